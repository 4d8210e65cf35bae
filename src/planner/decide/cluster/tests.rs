use super::*;
use crate::planner::decide::fixtures::{budget, maintenance, node, t, with_conditions};
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::from_cluster::AllotmentInput;

fn decide_over(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    budgets: &[Arc<NodeDisruptionBudget>],
) -> ClusterDecision {
    let now = t("2026-11-26T12:00:00Z");
    let no_alerts = crate::gates::AlertsRead::from(crate::gates::AlertsView::Firing(Vec::new()));
    let allotment = AllotmentInput::new(&Nodes::new(nodes), maintenances, budgets, &no_alerts, now.0).allot();
    decide(nodes, maintenances, budgets, &allotment, &now)
}

#[test]
fn one_decision_covers_budget_statuses_planned_nodes_and_conditions_left_by_a_missing_maintenance() {
    let left = conditions::conditions(&Node::default(), NodePhase::Draining, "gone", &t("2026-11-26T11:00:00Z"));
    let nodes =
        [node("held", Some(&["live"]), vec![]), node("left", Some(&["gone"]), left), node("idle", None, vec![])];
    let maintenances = [maintenance("live", "Cordon", &["held"]), maintenance("plan", "Idle", &["idle"])];
    let d = decide_over(&nodes, &maintenances, &[budget("general")]);

    let (name, version, status) = &d.budget_statuses[0];
    assert_eq!((name.as_str(), version.as_deref()), ("general", Some("7")), "conditional on what it was computed from");
    assert_eq!((status.expected_nodes, status.current_unavailable, status.disruptions_allowed), (3, 2, 0));
    let g = &d.budget_gauges["general"];
    assert_eq!((g.allowed, g.unavailable, g.waiting), (0, 2, 0));
    assert!(g.closed.is_empty() && g.next_open.is_none());

    assert_eq!(d.planned.len(), 1);
    assert!(matches!(&d.planned[0], (n, PlannedWrite::Set(c)) if n == "idle" && c.status == "True"));

    assert_eq!(d.orphaned.len(), 1, "only the node whose holder is gone: {:?}", d.orphaned);
    let (n, wanted) = &d.orphaned[0];
    assert_eq!(n, "left");
    assert!(wanted.iter().all(|c| c.status == "False" && c.reason.as_deref() == Some("MaintenanceComplete")));
}

#[test]
fn a_cluster_showing_the_decision_decides_nothing_to_write() {
    let left = conditions::conditions(&Node::default(), NodePhase::Held, "gone", &t("2026-11-26T11:00:00Z"));
    let nodes = [node("left", Some(&["gone"]), left), node("idle", None, vec![])];
    let maintenances = [maintenance("plan", "Idle", &["idle"])];
    let budgets = [budget("general")];
    let d = decide_over(&nodes, &maintenances, &budgets);
    assert!(!d.is_quiet());

    // The cluster after the writes: each object shows what was decided for it.
    let written: Vec<Arc<Node>> = nodes
        .iter()
        .map(|n| {
            let name = n.name_any();
            let mut wanted: Vec<NodeCondition> =
                d.orphaned.iter().filter(|(o, _)| *o == name).flat_map(|(_, c)| c.clone()).collect();
            wanted.extend(d.planned.iter().filter(|(p, _)| *p == name).filter_map(|(_, w)| match w {
                PlannedWrite::Set(c) => Some(c.clone()),
                PlannedWrite::Remove => None,
            }));
            Arc::new(with_conditions(n, &wanted))
        })
        .collect();
    let mut b = (*budgets[0]).clone();
    b.status = Some(d.budget_statuses[0].2.clone());
    let again = decide_over(&written, &maintenances, &[Arc::new(b)]);
    assert!(again.is_quiet(), "a steady state writes nothing: {again:?}");
}

/// `budget` with its count removed and `spec` merged in.
fn countless(name: &str, spec: serde_json::Value) -> Arc<NodeDisruptionBudget> {
    let mut b = serde_json::to_value(&*budget(name)).unwrap();
    b["spec"].as_object_mut().unwrap().remove("maxUnavailable");
    b["spec"].as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    Arc::new(serde_json::from_value(b).unwrap())
}

#[test]
fn a_budget_without_a_count_never_reports_insufficient_nodes() {
    // Every selected node is unavailable (held): a count would allow nothing more.
    let nodes = [node("a", Some(&["live"]), vec![]), node("b", Some(&["live"]), vec![])];
    let maintenances = [maintenance("live", "Cordon", &["a", "b"])];
    let d = decide_over(&nodes, &maintenances, &[countless("gates-only", serde_json::json!({}))]);
    let status = &d.budget_statuses[0].2;
    let c = &status.conditions[0];
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "SufficientNodes"), "{c:?}");
}

#[test]
fn a_node_held_only_by_maintenances_that_are_gone_counts_as_unhealthy() {
    // Neither node is Ready; one is held by a live maintenance, the other's holders
    // annotation names only one that no longer exists.
    let not_ready = |n: Arc<Node>| {
        let mut n = (*n).clone();
        let ready = NodeCondition { type_: "Ready".into(), status: "False".into(), ..Default::default() };
        n.status.get_or_insert_default().conditions = Some(vec![ready]);
        Arc::new(n)
    };
    let nodes = [not_ready(node("a", Some(&["live"]), vec![])), not_ready(node("b", Some(&["gone"]), vec![]))];
    let maintenances = [maintenance("live", "Cordon", &["a"])];
    let health = countless("health", serde_json::json!({"healthGate": {"maxUnhealthy": 0}}));
    let d = decide_over(&nodes, &maintenances, &[health]);
    let status = &d.budget_statuses[0].2;
    assert_eq!(status.closed_gates.len(), 1, "{status:?}");
    assert_eq!(
        status.closed_gates[0].message,
        "NodeDisruptionBudget health holds while 1 of 2 selected nodes are unhealthy (maxUnhealthy allows 0)"
    );
}

#[test]
fn our_taint_and_status_on_a_node_no_existing_maintenance_holds_go() {
    let ours = |n: Arc<Node>| {
        let mut n = (*n).clone();
        n.spec.get_or_insert_default().taints = Some(vec![k8s_openapi::api::core::v1::Taint {
            key: crate::api::DRAINING_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]);
        n.metadata.annotations.get_or_insert_default().insert(MAINTENANCE_STATUS_ANNOTATION.into(), "{}".into());
        Arc::new(n)
    };
    let nodes = [
        ours(node("gone", Some(&["gone"]), vec![])),
        ours(node("live", Some(&["live"]), vec![])),
        ours(node("none", None, vec![])),
        node("clean", Some(&["gone"]), vec![]),
    ];
    let d = decide_over(&nodes, &[maintenance("live", "Drain", &["live"])], &[]);
    let names: Vec<String> = d.leftovers.iter().map(|n| n.name_any()).collect();
    assert_eq!(names, ["gone", "none"], "a live holder keeps them; a node without them needs nothing");
}
