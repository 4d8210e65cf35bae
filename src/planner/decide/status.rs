//! Building the NodeMaintenance status (SPEC 2, 4.3): stage records, the `Drained`
//! condition and per-node statuses. Pure functions over the plan and what was observed.

use crate::api::{
    DrainStatus, NodeCounts, NodeMaintenanceNodeStatus, NodeMaintenanceStatus, NodeRef, Stage, StageStatus,
};
use crate::planner::wait::Gates;
use crate::planner::{DrainReason, MaintenancePlan, NodePlan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition type set on every maintenance (SPEC 2).
pub const DRAINED: &str = "Drained";
/// Condition type of a rolling maintenance: True once every selected node was
/// released.
pub const NODES_RELEASED: &str = "NodesReleased";
/// Reason of `NodesReleased=True`, and of the Event sent when it turns True.
pub const ALL_NODES_RELEASED: &str = "AllNodesReleased";
/// Condition type (and reason) of a maintenance with `spec.paused: true` (SPEC 4.6), present
/// only while it is paused.
pub const PAUSED: &str = "Paused";
/// Reason of `Drained=False` while nothing is left to evict but pods left to finish
/// (`spec.waitForCompletion`, SPEC 4.6) still run. Not a stall: the stall metric leaves such
/// a drain out (`crate::metrics::state`).
pub const WAITING_FOR_COMPLETION: &str = "WaitingForCompletion";
/// Reason of `Drained=False` while every node left waits for a gate of its
/// NodeDisruptionBudget or a pause (SPEC 4.6): like a wait for pods to finish, not a stall.
pub const WAITING_FOR_GATE: &str = "WaitingForGate";

/// Whether a stored `Drained` condition says the drain waits by design (pods left to finish,
/// a gate): not a stall, and the stall clock starts again when the wait ends.
pub fn waits(drained: Option<&Condition>) -> bool {
    drained.is_some_and(|c| c.reason == WAITING_FOR_COMPLETION || c.reason == WAITING_FOR_GATE)
}

/// The `Paused` condition of `nm` (`previous`: the stored one) while `spec.paused` is true.
pub fn paused_condition(
    nm: &crate::api::NodeMaintenance,
    previous: Option<&Condition>,
    now: &Time,
) -> Option<Condition> {
    let message = "spec.paused is true: no node starts and no new eviction starts; holds stay.".to_owned();
    (nm.spec.paused == Some(true) && nm.spec.stage.is_active())
        .then(|| condition(PAUSED, previous, "True", PAUSED, message, nm.metadata.generation, now))
}

/// Appends `stage` to the recorded stages when it is not there yet and comes after the
/// last recorded one (the list is append-only and in stage order, SPEC 3.3). Returns the new
/// list.
pub fn record_stage(existing: &[StageStatus], stage: Stage, now: &Time) -> Vec<StageStatus> {
    let mut out = existing.to_vec();
    if existing.last().is_none_or(|last| last.name < stage) {
        out.push(StageStatus { name: stage, start_timestamp: Some(now.clone()) });
    }
    out
}

/// Whether `stage` has been recorded.
pub fn recorded(existing: &[StageStatus], stage: Stage) -> bool {
    existing.iter().any(|s| s.name == stage)
}

/// The `Drained` condition for a maintenance in `stage` (SPEC 4.3): True when the Drain
/// stage found nothing left to evict, False while draining (message: what is in the way),
/// False with reason `WaitingForCompletion` while only pods left to finish remain and
/// `WaitingForGate` (message `gates`) while every node left waits for a gate (SPEC 4.6),
/// False with reason `NotDraining` in Idle and Cordon, and `Complete` after Complete. Keeps
/// `lastTransitionTime` from `previous` when the status did not change.
pub fn drained_condition(
    previous: Option<&Condition>,
    stage: Stage,
    plan: Option<&MaintenancePlan>,
    blockers: Option<&str>,
    gates: Option<&Gates>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let (status, reason, message) = match (stage, plan) {
        (Stage::Drain, Some(p)) if p.drained => {
            ("True", "Drained", "No pod the controller evicts remains on the selected nodes.".to_owned())
        }
        (Stage::Drain, Some(_)) if let Some(gates) = gates => ("False", WAITING_FOR_GATE, gates.to_string()),
        (Stage::Drain, Some(p)) if p.reason == DrainReason::WaitingForCompletion => (
            "False",
            WAITING_FOR_COMPLETION,
            match blockers {
                Some(b) => format!("{}; in the way: {b}", p.drain_message),
                None => format!("{}.", p.drain_message),
            },
        ),
        (Stage::Drain, Some(p)) => (
            "False",
            "Draining",
            match blockers {
                Some(b) => format!(
                    "{} {} pods pending eviction; in the way: {b}",
                    p.drain_message, p.pods_pending_eviction_request
                ),
                None => format!("{} {} pods pending eviction.", p.drain_message, p.pods_pending_eviction_request),
            },
        ),
        (Stage::Drain, None) => {
            ("False", "Cordoning", "Waiting for every selected node to be cordoned before evicting.".to_owned())
        }
        (Stage::Complete, _) => {
            ("False", "MaintenanceComplete", "The maintenance is complete; nodes were released.".to_owned())
        }
        _ => ("False", "NotDraining", format!("Stage {stage}: no pod is evicted.")),
    };
    condition(DRAINED, previous, status, reason, message, generation, now)
}

/// A metav1.Condition of `type_`, keeping `lastTransitionTime` from `previous` (the stored
/// condition of that type) when the status did not change, else `now`.
pub fn condition(
    type_: &str,
    previous: Option<&Condition>,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let last_transition_time = match previous {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now.clone(),
    };
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// The `NodesReleased` condition of a rolling maintenance from its node counts:
/// True (reason `AllNodesReleased`) when every selected node was released, else False
/// (reason `NodesHeld`) saying how many were. Keeps `lastTransitionTime` from `previous`
/// when the status did not change.
pub fn released_condition(
    previous: Option<&Condition>,
    counts: Option<&NodeCounts>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let c = counts.cloned().unwrap_or_default();
    let total = c.waiting + c.cordoned + c.draining + c.drained + c.released;
    let all = total > 0 && c.released == total;
    let (status, reason) = if all { ("True", ALL_NODES_RELEASED) } else { ("False", "NodesHeld") };
    let message = if all {
        format!("All {total} selected nodes were released.")
    } else {
        format!(
            "{} of {total} selected nodes released, {} held, {} waiting.",
            c.released,
            c.cordoned + c.draining + c.drained,
            c.waiting
        )
    };
    condition(NODES_RELEASED, previous, status, reason, message, generation, now)
}

/// The status of a Complete (or deleted) maintenance (SPEC 2, 4.1, 4.2): the recorded stages
/// plus `Complete`, the selected node count, and the `Drained` condition False with reason
/// `MaintenanceComplete`. No `drainStatus` and no `nodeStatuses`: nothing is drained any
/// more and the nodes were released, so the drain view would only be stale (see
/// docs/decisions.md "Status after Complete").
pub fn complete_status(
    previous: Option<&NodeMaintenanceStatus>,
    generation: Option<i64>,
    selected_nodes: usize,
    now: &Time,
) -> NodeMaintenanceStatus {
    let stages = previous.map(|s| s.stage_statuses.as_slice()).unwrap_or_default();
    let drained = previous.and_then(|s| s.conditions.iter().find(|c| c.type_ == DRAINED));
    NodeMaintenanceStatus {
        observed_generation: generation,
        stage_statuses: record_stage(stages, Stage::Complete, now),
        selected_nodes: Some(i32::try_from(selected_nodes).unwrap_or(i32::MAX)),
        conditions: vec![drained_condition(drained, Stage::Complete, None, None, None, generation, now)],
        ..Default::default()
    }
}

/// The drain status of a maintenance from its plan. `lastProgressTime` is `now`
/// when the drain starts (no `previous`, the stored drain status), made progress since
/// `previous` ([`progressed`]) or stopped waiting for pods left to finish (`resumed`: the
/// stored `Drained` reason was `WaitingForCompletion` and the plan's is not, SPEC 4.6: the
/// stall clock starts again at the end of a wait), else kept: a steady drain rewrites
/// nothing.
pub fn drain_status(plan: &MaintenancePlan, previous: Option<&DrainStatus>, resumed: bool, now: &Time) -> DrainStatus {
    let mut status = DrainStatus {
        reached_drain_targets: plan.reached_drain_targets.clone(),
        pods_pending_eviction_request: plan.pods_pending_eviction_request,
        active_eviction_requests: plan.active_eviction_requests,
        drain_plan_index: plan.drain_plan_index,
        drain_message: Some(plan.drain_message.clone()),
        last_progress_time: None,
    };
    status.last_progress_time = match previous {
        Some(p) if p.last_progress_time.is_some() && !resumed && !progressed(p, &status) => {
            p.last_progress_time.clone()
        }
        _ => Some(now.clone()),
    };
    status
}

/// Whether a drain progressed from `before` to `after`: fewer pods pending an
/// eviction request (evictions were accepted or pods went away), fewer pods left (pending
/// plus active evictions: evicted pods terminated), or the cursor `drainPlanIndex` moved on.
/// New pods appearing is not progress, nor is anything that only changes a message.
pub fn progressed(before: &DrainStatus, after: &DrainStatus) -> bool {
    let left = |d: &DrainStatus| i64::from(d.pods_pending_eviction_request) + i64::from(d.active_eviction_requests);
    after.pods_pending_eviction_request < before.pods_pending_eviction_request
        || left(after) < left(before)
        || after.drain_plan_index > before.drain_plan_index
}

/// The status of one node from its plan; `extra` (PDB refusals, failing evictions) is
/// appended to the planner's message.
pub fn node_status(plan: &NodePlan, extra: Option<&str>) -> NodeMaintenanceNodeStatus {
    NodeMaintenanceNodeStatus {
        node_ref: NodeRef { name: plan.name.clone() },
        drain_targets: plan.drain_targets.clone(),
        drain_message: Some(match extra {
            Some(e) => format!("{}; in the way: {e}", plan.drain_message.trim_end_matches('.')),
            None => plan.drain_message.clone(),
        }),
        pods_pending_eviction_request: plan.pods_pending_eviction_request,
        active_eviction_requests: plan.active_eviction_requests,
        pods_waiting_for_completion: i32::try_from(plan.waiting_for_completion.len()).unwrap_or(i32::MAX),
        ..Default::default()
    }
}

/// The status of a selected node outside the Drain stage (cordoned or not yet).
pub fn idle_node_status(name: &str, message: &str) -> NodeMaintenanceNodeStatus {
    NodeMaintenanceNodeStatus {
        node_ref: NodeRef { name: name.to_owned() },
        drain_message: Some(message.to_owned()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn stages_are_recorded_once_in_order() {
        let now = t("2026-11-22T00:00:00Z");
        let s = record_stage(&[], Stage::Cordon, &now);
        let s = record_stage(&s, Stage::Cordon, &now);
        assert_eq!(s.len(), 1);
        let s = record_stage(&s, Stage::Drain, &now);
        let s = record_stage(&s, Stage::Cordon, &now);
        assert_eq!(s.iter().map(|x| x.name).collect::<Vec<_>>(), [Stage::Cordon, Stage::Drain]);
        assert!(recorded(&s, Stage::Drain));
    }

    /// What the apiserver stores is the JSON of the status; reading it back must give the
    /// computed status exactly, or every decision would write it again.
    fn round_trip(s: &NodeMaintenanceStatus) -> NodeMaintenanceStatus {
        serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap()
    }

    #[test]
    fn the_complete_status_drops_the_drain_view_and_survives_a_round_trip() {
        let t0 = t("2026-11-22T00:00:00Z");
        let draining = NodeMaintenanceStatus {
            observed_generation: Some(3),
            stage_statuses: vec![
                StageStatus { name: Stage::Cordon, start_timestamp: Some(t0.clone()) },
                StageStatus { name: Stage::Drain, start_timestamp: Some(t0.clone()) },
            ],
            drain_status: Some(DrainStatus { drain_message: Some("Drained".into()), ..Default::default() }),
            selected_nodes: Some(2),
            node_counts: None,
            node_statuses: vec![idle_node_status("one", "Drained")],
            conditions: vec![drained_condition(
                None,
                Stage::Drain,
                Some(&MaintenancePlan { drained: true, ..Default::default() }),
                None,
                None,
                Some(3),
                &t0,
            )],
            evacuations: vec![],
            forecast: Some(crate::api::ForecastStatus {
                completion_time: Some(t("2026-11-22T02:00:00Z")),
                late_completion_time: None,
                basis: "1 finished node (median 1h, p90 1h)".into(),
                next_blackout_start: None,
                message: None,
                computed_at: t0.clone(),
            }),
        };
        let later = t("2026-11-22T01:00:00Z");
        let complete = complete_status(Some(&draining), Some(4), 2, &later);
        assert_eq!(complete.drain_status, None);
        assert_eq!(complete.forecast, None, "a finished maintenance forecasts nothing");
        assert!(complete.node_statuses.is_empty());
        assert_eq!(complete.selected_nodes, Some(2));
        assert_eq!(complete.stage_statuses.last().map(|s| s.name), Some(Stage::Complete));
        let c = &complete.conditions[0];
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "MaintenanceComplete"));
        assert_eq!(round_trip(&complete), complete, "the stored copy equals the computed one");
        let again = complete_status(Some(&round_trip(&complete)), Some(4), 2, &later);
        assert_eq!(again, complete, "recomputing from the stored copy changes nothing");
    }

    #[test]
    fn last_progress_time_starts_with_the_drain_and_moves_only_on_progress() {
        let (t0, t1, t2) = (t("2026-11-22T00:00:00Z"), t("2026-11-22T00:01:00Z"), t("2026-11-22T00:02:00Z"));
        let plan = |pending, active, index| MaintenancePlan {
            pods_pending_eviction_request: pending,
            active_eviction_requests: active,
            drain_plan_index: index,
            ..Default::default()
        };
        let started = drain_status(&plan(3, 0, 0), None, false, &t0);
        assert_eq!(started.last_progress_time, Some(t0.clone()), "set when the drain starts");
        let steady = drain_status(&plan(3, 0, 0), Some(&started), false, &t1);
        assert_eq!(steady, started, "nothing happened: nothing changes");
        let more_pods = drain_status(&plan(4, 0, 0), Some(&started), false, &t1);
        assert_eq!(more_pods.last_progress_time, Some(t0.clone()), "a new pod is not progress");
        for (after, what) in [
            (plan(2, 1, 0), "an eviction accepted"),
            (plan(3, 0, 1), "the cursor moved on"),
            (plan(2, 0, 0), "a pod went away"),
        ] {
            assert_eq!(drain_status(&after, Some(&started), false, &t2).last_progress_time, Some(t2.clone()), "{what}");
        }
        let evicting = drain_status(&plan(2, 1, 0), Some(&started), false, &t1);
        let terminated = drain_status(&plan(2, 0, 0), Some(&evicting), false, &t2);
        assert_eq!(terminated.last_progress_time, Some(t2.clone()), "an evicted pod terminated");
        let stored_by_older = DrainStatus { last_progress_time: None, ..started.clone() };
        assert_eq!(drain_status(&plan(3, 0, 0), Some(&stored_by_older), false, &t2).last_progress_time, Some(t2));
    }

    #[test]
    fn a_drain_that_stops_waiting_for_pods_to_finish_progresses() {
        let (t0, t1) = (t("2026-11-22T00:00:00Z"), t("2026-11-22T01:00:00Z"));
        let waiting = MaintenancePlan { pods_waiting_for_completion: 1, ..Default::default() };
        let stored = drain_status(&waiting, None, false, &t0);
        let timed_out = MaintenancePlan { pods_pending_eviction_request: 1, ..Default::default() };
        assert_eq!(drain_status(&timed_out, Some(&stored), false, &t1).last_progress_time, Some(t0));
        assert_eq!(
            drain_status(&timed_out, Some(&stored), true, &t1).last_progress_time,
            Some(t1),
            "the stall clock starts again at the end of the wait"
        );
    }

    #[test]
    fn waiting_for_pods_to_finish_has_its_own_reason() {
        let t0 = t("2026-11-22T00:00:00Z");
        let waiting = MaintenancePlan {
            drain_message: "Waiting for pods to complete".into(),
            reason: DrainReason::WaitingForCompletion,
            pods_waiting_for_completion: 1,
            ..Default::default()
        };
        let c = drained_condition(None, Stage::Drain, Some(&waiting), Some("left to finish: batch/j"), None, None, &t0);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", WAITING_FOR_COMPLETION));
        assert_eq!(c.message, "Waiting for pods to complete; in the way: left to finish: batch/j");
    }

    #[test]
    fn drained_condition_keeps_transition_time_while_status_holds() {
        let (t0, t1) = (t("2026-11-22T00:00:00Z"), t("2026-11-22T00:05:00Z"));
        let draining = MaintenancePlan {
            drain_message: "Draining".into(),
            pods_pending_eviction_request: 3,
            ..Default::default()
        };
        let c0 = drained_condition(None, Stage::Drain, Some(&draining), Some("static pods: a/b"), None, Some(2), &t0);
        assert_eq!((c0.status.as_str(), c0.reason.as_str()), ("False", "Draining"));
        assert_eq!(c0.message, "Draining 3 pods pending eviction; in the way: static pods: a/b");
        let c1 = drained_condition(Some(&c0), Stage::Drain, Some(&draining), None, None, Some(2), &t1);
        assert_eq!(c1.last_transition_time, t0);
        let done = MaintenancePlan { drained: true, ..Default::default() };
        let c2 = drained_condition(Some(&c1), Stage::Drain, Some(&done), None, None, Some(2), &t1);
        assert_eq!((c2.status.as_str(), c2.last_transition_time.clone()), ("True", t1));
    }
}
