use super::*;
use crate::api::GateReason;
use crate::planner::holds::{Holds, Wait};
use k8s_openapi::api::core::v1::NodeStatus;
use serde_json::json;

fn node(name: &str, pool: &str, conditions: Vec<NodeCondition>) -> Arc<Node> {
    let mut n: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"pool": pool}}})).unwrap();
    n.status = Some(NodeStatus { conditions: Some(conditions), ..Default::default() });
    Arc::new(n)
}

fn maintenance(name: &str, stage: &str, pool: &str) -> Arc<NodeMaintenance> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
            "metadata": {"name": name},
            "spec": {"stage": stage, "reason": "r", "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "In", "values": [pool]}]}]}}
        }))
        .unwrap(),
    )
}

fn t(s: &str) -> Time {
    Time(s.parse().unwrap())
}

fn planners_of(by: &[&str], window: bool) -> Planners {
    Planners { by: by.iter().map(|s| (*s).to_owned()).collect(), window }
}

fn set(w: Option<PlannedWrite>) -> NodeCondition {
    match w {
        Some(PlannedWrite::Set(c)) => c,
        other => panic!("expected a Set, got {other:?}"),
    }
}

#[test]
fn idle_selections_and_rolling_waits_plan_nodes_in_name_order() {
    let nodes = vec![node("a-1", "a", vec![]), node("a-2", "a", vec![]), node("b-1", "b", vec![])];
    let mut deleted = (*maintenance("gone", "Idle", "a")).clone();
    deleted.metadata.deletion_timestamp = Some(t("2026-11-25T00:00:00Z"));
    let maintenances = vec![maintenance("zeta", "Idle", "a"), maintenance("cordon", "Cordon", "b"), Arc::new(deleted)];
    let mut allotment = Allotment::default();
    let waiting = [
        ("a-2".to_owned(), Wait::Turn { held: 1, limit: 1 }),
        ("b-1".to_owned(), Wait::Budget { name: "general".into(), unavailable: 1, max_unavailable: 1 }),
    ];
    allotment
        .maintenances
        .insert("roll".into(), Holds { waiting: waiting.into_iter().collect(), ..Default::default() });
    let planned = planners(&nodes, &maintenances, &allotment);
    assert_eq!(planned["a-1"].by, ["zeta (Idle)"], "a Cordon maintenance and a deleted Idle one plan nothing");
    assert_eq!(planned["a-2"].by, ["roll (waiting for a place)", "zeta (Idle)"]);
    assert_eq!(planned["b-1"].by, ["roll (waiting for NodeDisruptionBudget general)"]);
    assert!(!planned["b-1"].window);
}

#[test]
fn a_planned_node_is_written_once_and_keeps_its_transition_time() {
    let t0 = t("2026-11-25T00:00:00Z");
    let by = planners_of(&["zeta (Idle)"], false);
    let first = set(wanted(&node("n", "a", vec![]), Some(&by), &t0));
    assert_eq!((first.status.as_str(), first.reason.as_deref()), ("True", Some(REASON)));
    assert_eq!(first.message.as_deref(), Some("Planned by NodeMaintenance zeta (Idle)."));
    let marked = node("n", "a", vec![first.clone()]);
    assert_eq!(wanted(&marked, Some(&by), &t("2026-11-25T01:00:00Z")), None, "current: no write");
    let more = planners_of(&["roll (waiting for a place)", "zeta (Idle)"], false);
    let second = set(wanted(&marked, Some(&more), &t("2026-11-25T01:00:00Z")));
    assert_eq!(second.last_transition_time, Some(t0), "still True: the transition time stays");
}

#[test]
fn only_the_condition_we_set_is_removed() {
    let now = t("2026-11-25T00:00:00Z");
    let ours = set(wanted(&node("n", "a", vec![]), Some(&planners_of(&["m (Idle)"], false)), &now));
    assert_eq!(wanted(&node("n", "a", vec![ours]), None, &now), Some(PlannedWrite::Remove));
    assert_eq!(wanted(&node("n", "a", vec![]), Some(&planners_of(&[], false)), &now), None, "nothing there");
    let theirs = NodeCondition {
        type_: MAINTENANCE_PLANNED.into(),
        status: "True".into(),
        reason: Some("VendorFirmwareUpdate".into()),
        ..Default::default()
    };
    assert_eq!(wanted(&node("n", "a", vec![theirs]), None, &now), None, "someone else's condition stays");
}

#[test]
fn a_node_waiting_for_a_window_says_so_and_only_our_window_condition_is_removed() {
    let now = t("2026-11-25T00:00:00Z");
    let nodes = vec![node("a-1", "a", vec![])];
    let gates = Gates::closed(
        "weekend",
        GateReason::OutsideMaintenanceWindow,
        "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens …)",
    );
    let mut allotment = Allotment::default();
    let waiting = [("a-1".to_owned(), Wait::Gated(gates))];
    allotment.maintenances.insert("m".into(), Holds { waiting: waiting.into_iter().collect(), ..Default::default() });
    let planned = planners(&nodes, &[], &allotment);
    assert_eq!(planned["a-1"].by, ["m (waiting for the maintenance window of NodeDisruptionBudget weekend)"]);
    let c = set(wanted(&nodes[0], planned.get("a-1"), &now));
    assert_eq!(c.reason.as_deref(), Some(WINDOW_REASON));
    assert_eq!(wanted(&node("a-1", "a", vec![c.clone()]), None, &now), Some(PlannedWrite::Remove));
    let theirs = NodeCondition { message: Some("vendor window".into()), ..c };
    assert_eq!(wanted(&node("a-1", "a", vec![theirs]), None, &now), None, "another tool's MaintenanceWindow stays");
}
