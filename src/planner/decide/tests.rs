//! The whole decision over one snapshot, without a network.
use super::fixtures::{budget, maintenance, node, t};
use super::*;
use crate::api::FINALIZER;
use crate::gates::AlertsView;

/// `nm` with the finalizer, as the cache holds it.
fn live(nm: Arc<NodeMaintenance>) -> Arc<NodeMaintenance> {
    let mut nm = (*nm).clone();
    nm.metadata.finalizers = Some(vec![FINALIZER.into()]);
    Arc::new(nm)
}

fn snapshot<'a>(
    nodes: &'a [Arc<k8s_openapi::api::core::v1::Node>],
    maintenances: &'a [Arc<NodeMaintenance>],
    budgets: &'a [Arc<NodeDisruptionBudget>],
    alerts: &'a AlertsRead,
) -> Snapshot<'a> {
    Snapshot {
        nodes: Nodes::for_selectors(nodes, maintenances, budgets),
        maintenances,
        budgets,
        alerts,
        busy_requeue: Duration::from_secs(2),
        idle_requeue: Duration::from_secs(300),
        now: t("2026-11-26T12:00:00Z"),
    }
}

#[test]
fn one_snapshot_gives_a_budget_of_one_to_one_maintenance_and_tells_the_other_why_it_waits() {
    let nodes = [node("a", None, vec![]), node("b", None, vec![])];
    let maintenances = [live(maintenance("m1", "Cordon", &["a"])), live(maintenance("m2", "Cordon", &["b"]))];
    let budgets = [budget("one")];
    let alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let s = snapshot(&nodes, &maintenances, &budgets, &alerts);
    let scopes = scopes(&s, |_| true);
    assert!(scopes.gated.is_empty(), "nothing drains: the eviction gates are not read");
    let d = decide(&s, scopes, BTreeMap::new(), true);
    let holds: Vec<(String, String)> = d
        .maintenances
        .iter()
        .flat_map(|(m, d)| d.holds.iter().map(move |h| (m.name_any(), h.node.name_any())))
        .collect();
    assert_eq!(holds, [("m1".to_owned(), "a".to_owned())], "the budget's one place, given once");
    let waiting = d.maintenances[1].1.status.as_ref().unwrap();
    let b = &waiting.node_statuses[0];
    assert_eq!((b.node_ref.name.as_str(), b.phase), ("b", Some(crate::api::NodePhase::Waiting)));
    let cluster = d.cluster.expect("the cluster-wide decision was asked for");
    assert_eq!(cluster.budget_gauges["one"].waiting, 1);
    assert_eq!(cluster.budget_statuses.len(), 1, "the budget's first status");
    assert_eq!(d.now, t("2026-11-26T12:00:00Z"));
}

#[test]
fn only_the_maintenances_due_are_decided_and_the_cluster_only_when_asked() {
    let nodes = [node("a", None, vec![]), node("b", None, vec![])];
    let maintenances = [live(maintenance("m1", "Cordon", &["a"])), live(maintenance("m2", "Cordon", &["b"]))];
    let alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let s = snapshot(&nodes, &maintenances, &[], &alerts);
    let d = decide(&s, scopes(&s, |m| m == "m2"), BTreeMap::new(), false);
    let decided: Vec<String> = d.maintenances.iter().map(|(m, _)| m.name_any()).collect();
    assert_eq!(decided, ["m2"]);
    assert_eq!(d.maintenances[0].1.nodes().map(|n| n.name_any()).collect::<Vec<_>>(), ["b"]);
    assert!(d.cluster.is_none());
}

/// The KEP's "Pod Selection and DrainTargets" example at its last step, as one snapshot:
/// `maintenance-a` (nodes one, two), `maintenance-b` (one, three) and the later
/// `maintenance-c` (one, four), node one at targets `10000/Default` (limited by b), node two
/// at `15000/Default`, node four just joined. The pass is planned from the snapshot's objects
/// as the shell plans it.
#[test]
fn the_keps_worked_example_keeps_node_one_and_fast_forwards_the_later_maintenance() {
    use crate::api::{DrainPlanEntry, MAINTENANCE_STATUS_ANNOTATION, PodType, StageStatus};
    use crate::planner::from_cluster::{Drained, drain_maintenances, node_inputs};
    use crate::planner::{PlannerInput, PodView, plan};
    let entry =
        |priority: i32, pod_type: PodType| DrainPlanEntry { pod_priority: priority, pod_type, pod_selector: None };
    let drain = |name: &str, created: &str, nodes: &[&str], plan: Vec<DrainPlanEntry>| {
        let mut nm = fixtures::maintenance_with(name, "Drain", nodes, serde_json::json!({}));
        nm.spec.drain_plan = plan;
        nm.metadata.creation_timestamp = Some(t(created));
        let recorded = |stage| StageStatus { name: stage, start_timestamp: Some(t(created)) };
        nm.status = Some(crate::api::NodeMaintenanceStatus {
            stage_statuses: vec![recorded(crate::api::Stage::Cordon), recorded(crate::api::Stage::Drain)],
            ..Default::default()
        });
        live(Arc::new(nm))
    };
    let maintenances = [
        drain(
            "maintenance-a",
            "2026-11-26T09:00:00Z",
            &["one", "two"],
            vec![entry(5000, PodType::Default), entry(15000, PodType::Default), entry(3000, PodType::DaemonSet)],
        ),
        drain(
            "maintenance-b",
            "2026-11-26T09:00:01Z",
            &["one", "three"],
            vec![entry(10000, PodType::Default), entry(15000, PodType::Default), entry(4000, PodType::DaemonSet)],
        ),
        drain(
            "maintenance-c",
            "2026-11-26T11:00:00Z",
            &["one", "four"],
            vec![entry(2000, PodType::Default), entry(15000, PodType::Default)],
        ),
    ];
    let published = |node: Arc<k8s_openapi::api::core::v1::Node>, priority: i32| {
        let mut n = (*node).clone();
        let status = crate::api::NodeMaintenanceNodeStatus {
            node_ref: crate::api::NodeRef { name: n.name_any() },
            drain_targets: vec![entry(priority, PodType::Default)],
            drain_start_time: Some(t("2026-11-26T09:00:02Z")),
            ..Default::default()
        };
        let value = serde_json::to_string(&status).unwrap();
        n.metadata.annotations.get_or_insert_default().insert(MAINTENANCE_STATUS_ANNOTATION.to_owned(), value);
        Arc::new(n)
    };
    let nodes = [
        published(node("one", Some(&["maintenance-a", "maintenance-b", "maintenance-c"]), vec![]), 10000),
        published(node("two", Some(&["maintenance-a"]), vec![]), 15000),
        published(node("three", Some(&["maintenance-b"]), vec![]), 10000),
        node("four", Some(&["maintenance-c"]), vec![]),
    ];
    let pod = |name: &str, node: &str, priority: i32| PodView {
        namespace: "apps".into(),
        name: name.into(),
        uid: format!("uid-{name}").into(),
        node_name: node.into(),
        priority,
        pod_type: PodType::Default,
        ..PodView::default()
    };
    let pods = vec![pod("cache", "one", 12000), pod("batch", "four", 1000), pod("web", "four", 12000)];
    let now = t("2026-11-26T12:00:00Z");
    let input = PlannerInput {
        maintenances: drain_maintenances(&maintenances, &nodes, Drained::Held),
        nodes: node_inputs(&nodes, |_| true, &BTreeMap::new()),
        pods,
        now: now.0,
        ..PlannerInput::default()
    };
    let pass = Arc::new(plan(&input));
    let alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let s = snapshot(&nodes, &maintenances, &[], &alerts);
    let view = DrainView {
        decision: pass,
        gated: Arc::default(),
        evacuation: crate::planner::evacuation::EvacuationPlan::default(),
        refused: BTreeMap::new(),
    };
    let d =
        decide(&s, scopes(&s, |m| m == "maintenance-c"), BTreeMap::from([("maintenance-c".to_owned(), view)]), false);
    let (_, c) = &d.maintenances[0];

    let reasons: Vec<String> = c.events.iter().map(|e| e.clone().into_event().reason).collect();
    assert_eq!(reasons, ["FastForwarded"], "the later maintenance's precondition is broken on node one: said once");
    let status = c.status.as_ref().unwrap();
    let one = status.node_statuses.iter().find(|s| s.node_ref.name == "one").unwrap();
    assert!(one.fast_forwarded, "recorded in its own status");
    assert_eq!(one.drain_targets, [entry(10000, PodType::Default)], "node one's progress is not backtracked to 2000");
    let four = c.node_writes.iter().find(|w| w.node.name_any() == "four").expect("node four's first targets");
    let targets = &four.published.as_ref().expect("published by its only holder").drain_targets;
    assert_eq!(targets, &[entry(2000, PodType::Default)], "the joined node starts at the plan's first entry");
    assert!(
        c.node_writes.iter().all(|w| w.node.name_any() != "one" || w.published.is_none()),
        "node one's status is maintenance-a's to publish (its first holder)"
    );
    let evicted: Vec<(String, String)> =
        c.evictions.iter().map(|e| (e.node.name_any(), e.pod.name.to_string())).collect();
    assert_eq!(evicted, [("four".to_owned(), "batch".to_owned())], "only what the targets allow");
}

/// SPEC 4.7: a decision over the status the previous one wrote makes no new forecast (the
/// stored one is kept, to the byte), and a node that finishes makes one.
#[test]
fn the_stored_forecast_stands_until_a_node_changes_phase() {
    let nodes = [node("a", None, vec![]), node("b", None, vec![])];
    let mut m = (*live(maintenance("m1", "Cordon", &["a", "b"]))).clone();
    m.spec.max_unavailable = Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1));
    let alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let first = {
        let maintenances = [Arc::new(m.clone())];
        let s = snapshot(&nodes, &maintenances, &[], &alerts);
        decide(&s, scopes(&s, |_| true), BTreeMap::new(), false).maintenances[0].1.status.clone().unwrap()
    };
    let forecast = first.forecast.clone().expect("an active maintenance has a forecast");
    assert_eq!(forecast.basis, "no basis: no node has finished yet");
    assert!(!forecast_inputs_changed(&first, &first));
    let mut later = first.clone();
    later.forecast = Some(ForecastStatus { basis: "kept".into(), ..forecast });
    m.status = Some(later.clone());
    let maintenances = [Arc::new(m.clone())];
    let s = snapshot(&nodes, &maintenances, &[], &alerts);
    let again = decide(&s, scopes(&s, |_| true), BTreeMap::new(), false).maintenances[0].1.status.clone().unwrap();
    assert!(!forecast_inputs_changed(&later, &again), "nothing moved: {:?}", again.node_statuses);
    assert_eq!(again.forecast.unwrap().basis, "kept", "the stored forecast stands");
    let mut finished = later.clone();
    finished.node_statuses[0].phase = Some(crate::api::NodePhase::Released);
    assert!(forecast_inputs_changed(&later, &finished), "a node that changes phase");
}
