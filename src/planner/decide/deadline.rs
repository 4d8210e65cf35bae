//! The drain deadline: `spec.drainTimeout` counted from the Drain stage's start
//! in `status.stageStatuses`, and the wake-up at the end of a wait for pods left to finish. It only reports: past it, a drain that has not finished turns
//! the `Drained` condition's reason into `DrainTimedOut`; nothing is forced (KEP-4212
//! non-goal, docs/decisions.md "Drain timeout"). Pure functions over the computed status.

use super::status::DRAINED;
use crate::api::{NodeMaintenanceSpec, NodeMaintenanceStatus, Stage, parse_drain_timeout};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use std::time::Duration;

/// Reason of the `Drained` condition (and of the Warning Event) once a drain has run past
/// its `spec.drainTimeout` without finishing.
pub const DRAIN_TIMED_OUT: &str = "DrainTimedOut";

/// Reports the drain deadline of `spec` in `status`, the status this decision computed for
/// a Drain-stage maintenance: once `now` is at or past the Drain start plus
/// `spec.drainTimeout` and `Drained` is still False, its reason becomes `DrainTimedOut` and
/// its message is prefixed with the timeout, the Drain start and `lastProgressTime`. Nothing
/// changes without a readable timeout or a recorded Drain start. Returns `requeue` (the
/// wait before the next decision), shortened to end at the deadline while it is ahead, so
/// the condition flips on time without any cluster event.
pub fn report(
    spec: &NodeMaintenanceSpec,
    status: &mut NodeMaintenanceStatus,
    now: &Time,
    requeue: Duration,
) -> Duration {
    let Some(text) = spec.drain_timeout.as_deref() else { return requeue };
    let Ok(timeout) = parse_drain_timeout(text) else { return requeue };
    let started = status.stage_statuses.iter().find(|s| s.name == Stage::Drain).and_then(|s| s.start_timestamp.clone());
    let Some(started) = started else { return requeue };
    let last_progress = status.drain_status.as_ref().and_then(|d| d.last_progress_time.clone());
    let Some(drained) = status.conditions.iter_mut().find(|c| c.type_ == DRAINED && c.status == "False") else {
        return requeue;
    };
    // A start in the future (clock skew) counts as just started.
    let elapsed = Duration::try_from(now.0.duration_since(started.0)).unwrap_or_default();
    match timeout.checked_sub(elapsed).filter(|left| !left.is_zero()) {
        Some(left) => requeue.min(left),
        None => {
            let progress = last_progress.map_or_else(|| "never".to_owned(), |t| t.0.to_string());
            drained.reason = DRAIN_TIMED_OUT.into();
            drained.message = format!(
                "The drain has not finished within its drainTimeout of {text} (Drain started {}, last progress {progress}); \
                 nothing is force-deleted, the drain goes on. {}",
                started.0, drained.message
            );
            requeue
        }
    }
}

/// How long until `instant` (the end of a wait for pods left to finish, a window or blackout
/// edge; SPEC 4.6), plus a second so that the decision then made sees the instant passed;
/// zero plus that second when it already passed; `now` is the decision's clock. A job's requeue is shortened to it: the
/// controller wakes at the instant without polling.
pub fn until(instant: Timestamp, now: Timestamp) -> Duration {
    let left = Duration::try_from(instant.duration_since(now)).unwrap_or_default();
    left + Duration::from_secs(1)
}

/// Whether `current` (the `Drained` condition just written) reports a timeout that
/// `previous` (the stored one) did not: the one transition that emits the Warning Event and
/// counts `node_maintenance_drain_timeouts_total`. Read from the stored condition, so a
/// restarted controller does not report the same timeout again.
pub fn newly_timed_out(previous: Option<&Condition>, current: Option<&Condition>) -> bool {
    current.is_some_and(|c| c.reason == DRAIN_TIMED_OUT) && previous.is_none_or(|p| p.reason != DRAIN_TIMED_OUT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{DrainStatus, StageStatus};
    use k8s_openapi::api::core::v1::NodeSelector;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn spec(timeout: Option<&str>) -> NodeMaintenanceSpec {
        NodeMaintenanceSpec {
            node_selector: NodeSelector::default(),
            stage: Stage::Drain,
            drain_plan: vec![],
            reason: None,
            drain_timeout: timeout.map(str::to_owned),
            max_unavailable: None,
            evacuation: None,
            release_nodes_on: None,
            ..Default::default()
        }
    }

    fn draining(drained: &str) -> NodeMaintenanceStatus {
        NodeMaintenanceStatus {
            stage_statuses: vec![
                StageStatus { name: Stage::Cordon, start_timestamp: Some(t("2026-11-22T00:00:00Z")) },
                StageStatus { name: Stage::Drain, start_timestamp: Some(t("2026-11-22T00:00:10Z")) },
            ],
            drain_status: Some(DrainStatus {
                last_progress_time: Some(t("2026-11-22T00:05:00Z")),
                ..Default::default()
            }),
            conditions: vec![Condition {
                type_: DRAINED.into(),
                status: drained.into(),
                reason: "Draining".into(),
                message: "Draining 1 pods pending eviction; in the way: PDB apps/db".into(),
                observed_generation: None,
                last_transition_time: t("2026-11-22T00:00:10Z"),
            }],
            ..Default::default()
        }
    }

    const IDLE: Duration = Duration::from_secs(300);

    #[test]
    fn before_the_deadline_nothing_changes_and_the_requeue_ends_at_it() {
        let mut st = draining("False");
        let requeue = report(&spec(Some("30m")), &mut st, &t("2026-11-22T00:29:00Z"), IDLE);
        assert_eq!(requeue, Duration::from_secs(70));
        assert_eq!(st, draining("False"));
        assert_eq!(report(&spec(Some("30m")), &mut st, &t("2026-11-22T00:00:00Z"), IDLE), IDLE, "start ahead");
    }

    #[test]
    fn at_the_deadline_an_unfinished_drain_times_out_and_says_why() {
        let mut st = draining("False");
        let requeue = report(&spec(Some("30m")), &mut st, &t("2026-11-22T00:30:10Z"), IDLE);
        assert_eq!(requeue, IDLE);
        let c = &st.conditions[0];
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", DRAIN_TIMED_OUT));
        assert_eq!(
            c.message,
            "The drain has not finished within its drainTimeout of 30m (Drain started 2026-11-22T00:00:10Z, \
             last progress 2026-11-22T00:05:00Z); nothing is force-deleted, the drain goes on. \
             Draining 1 pods pending eviction; in the way: PDB apps/db"
        );
        assert_eq!(c.last_transition_time, t("2026-11-22T00:00:10Z"), "the status did not change");
        // Recomputed later from a fresh Draining condition: the same text (no write).
        let mut again = draining("False");
        report(&spec(Some("30m")), &mut again, &t("2026-11-22T03:00:00Z"), IDLE);
        assert_eq!(again, st);
    }

    #[test]
    fn no_timeout_no_drain_start_or_a_finished_drain_are_left_alone() {
        let late = t("2026-11-23T00:00:00Z");
        for (spec, mut st) in [
            (spec(None), draining("False")),
            (spec(Some("bad")), draining("False")),
            (spec(Some("1m")), NodeMaintenanceStatus { stage_statuses: vec![], ..draining("False") }),
            (spec(Some("1m")), draining("True")),
        ] {
            let before = st.clone();
            assert_eq!(report(&spec, &mut st, &late, IDLE), IDLE);
            assert_eq!(st, before);
        }
    }

    #[test]
    fn the_wake_up_is_a_second_after_the_deadline() {
        let now = t("2026-11-26T12:00:00Z").0;
        let ahead = now + jiff::SignedDuration::from_secs(60);
        assert_eq!(until(ahead, now), Duration::from_secs(61));
        assert_eq!(until(Timestamp::UNIX_EPOCH, now), Duration::from_secs(1), "passed: right away");
    }

    #[test]
    fn a_timeout_is_new_only_when_the_stored_condition_did_not_report_it() {
        let mut timed_out = draining("False");
        report(&spec(Some("1m")), &mut timed_out, &t("2026-11-23T00:00:00Z"), IDLE);
        let (before, after) = (draining("False").conditions, timed_out.conditions);
        assert!(newly_timed_out(before.first(), after.first()));
        assert!(newly_timed_out(None, after.first()));
        assert!(!newly_timed_out(after.first(), after.first()), "already stored: a restart stays quiet");
        assert!(!newly_timed_out(after.first(), before.first()));
    }
}
