use super::*;
use crate::planner::decide::fixtures::{budget, maintenance, node, t, with_conditions};
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::from_cluster::allotment;

fn decide_over(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    budgets: &[Arc<NodeDisruptionBudget>],
) -> ClusterDecision {
    let now = t("2026-11-26T12:00:00Z");
    let no_alerts = crate::planner::gates::AlertsView::Firing(Vec::new());
    let allotment = allotment(&Nodes::new(nodes), maintenances, budgets, &no_alerts, now.0);
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
