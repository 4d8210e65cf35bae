//! The drain messages of SPEC 4.3 "Messages" (the KEP's `drainMessage`), and a bounded
//! summary of the pods in the way (SPEC 4.3 "Blocked progress").

use super::output::{BlockedCause, BlockedPod, DrainReason, EvictionRisk, PodRef, RiskyPod};
use super::wait::Gates;
use std::collections::BTreeSet;

/// Message of a node or maintenance that has nothing left to do. SPEC 4.3 names only the
/// `Draining` and `Waiting for` forms; this is the planner's message once nothing remains.
pub const DRAINED: &str = "Drained";
/// Message when every plan is through but pods the plans never select remain (only possible
/// with plans that were not defaulted by admission, SPEC 3.1).
pub const PLAN_COMPLETE: &str = "Drain plan complete";
/// Message when nothing is left to evict but pods that are reported instead hold the drain
/// (opted out, or unmanaged / emptyDir pods the options block); the blocker
/// summary appended to it names them.
pub const BLOCKED: &str = "Blocked by pods that are not evicted";
/// Message when nothing is left to evict and nothing blocks, but pods left to finish still run
/// (SPEC 4.6 "Pods that finish"); the summary appended to it names them
/// ([`waiting_summary`]).
pub const WAITING_FOR_COMPLETION: &str = "Waiting for pods to complete";

/// `Draining`, or `Draining (limited by a, b)` with the names sorted (SPEC 4.3 "Messages").
pub(crate) fn draining<'a>(limited_by: impl IntoIterator<Item = &'a str>) -> String {
    let names: BTreeSet<&str> = limited_by.into_iter().collect();
    if names.is_empty() { "Draining".to_string() } else { format!("Draining (limited by {})", join(&names)) }
}

/// `Waiting for a drain slot (a: 1 of 1 nodes draining).`; several budgets that
/// hold nodes back are listed sorted, separated by `; `.
pub(crate) fn waiting_for_slot<'a>(budgets: impl IntoIterator<Item = &'a str>) -> String {
    let budgets: BTreeSet<&str> = budgets.into_iter().collect();
    format!("Waiting for a drain slot ({}).", budgets.into_iter().collect::<Vec<_>>().join("; "))
}

/// `Waiting for a, b.` with the names sorted (SPEC 4.3 "Messages").
pub(crate) fn waiting<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: BTreeSet<&str> = names.into_iter().collect();
    format!("Waiting for {}.", join(&names))
}

/// What the reason of a node's or a maintenance's drain is read from.
#[derive(Default)]
pub(super) struct ReasonFacts {
    /// Pods are being evicted, not held back by a drain slot or a gate: the maintenances
    /// limiting it, sorted.
    pub draining: Option<Vec<String>>,
    /// It may not start evicting (a pause or a closed gate, SPEC 4.6) and is not drained.
    pub gated: Option<Gates>,
    /// The full budgets whose drain slot it waits for, sorted.
    pub full_budgets: Vec<String>,
    /// Stuck: the maintenances it waits for, sorted.
    pub waiting_for: Vec<String>,
    /// Nothing it is responsible for remains.
    pub drained: bool,
    /// Pods that are reported instead of evicted hold the drain.
    pub blocked: bool,
    /// Pods left to finish still run.
    pub completing: bool,
}

impl DrainReason {
    /// The reason `f` gives: the first of `Draining`, `Gated`, `WaitingForSlot`,
    /// `WaitingFor`, `Drained`, `Blocked`, `WaitingForCompletion`, else `PlanComplete`. The one
    /// place that order is written, for nodes and maintenances alike (SPEC 4.3 "Messages").
    pub(super) fn of(f: ReasonFacts) -> Self {
        if let Some(limited_by) = f.draining {
            DrainReason::Draining { limited_by }
        } else if let Some(gates) = f.gated {
            DrainReason::Gated(gates)
        } else if !f.full_budgets.is_empty() {
            DrainReason::WaitingForSlot { budgets: f.full_budgets }
        } else if !f.waiting_for.is_empty() {
            DrainReason::WaitingFor { maintenances: f.waiting_for }
        } else if f.drained {
            DrainReason::Drained
        } else if f.blocked {
            DrainReason::Blocked
        } else if f.completing {
            DrainReason::WaitingForCompletion
        } else {
            DrainReason::PlanComplete
        }
    }

    /// The reason in words: the maintenance's `drainMessage` (SPEC 4.3 "Messages").
    pub fn message(&self) -> String {
        match self {
            DrainReason::Draining { limited_by } => draining(limited_by.iter().map(String::as_str)),
            DrainReason::WaitingForSlot { budgets } => waiting_for_slot(budgets.iter().map(String::as_str)),
            DrainReason::WaitingFor { maintenances } => waiting(maintenances.iter().map(String::as_str)),
            DrainReason::Gated(gates) => gates.to_string(),
            DrainReason::Drained => DRAINED.to_string(),
            DrainReason::Blocked => BLOCKED.to_string(),
            DrainReason::WaitingForCompletion => WAITING_FOR_COMPLETION.to_string(),
            DrainReason::PlanComplete => PLAN_COMPLETE.to_string(),
        }
    }
}

fn join(names: &BTreeSet<&str>) -> String {
    names.iter().copied().collect::<Vec<_>>().join(", ")
}

/// Summarises the blocked pods of a [`NodePlan`](super::NodePlan), grouped by cause, at most
/// `limit` names per cause (`static pods (never evicted): ns/a, ns/b and 3 more`); `None` when
/// there are none. The controller appends it, with its own causes (PDBs, failing evictions),
/// to the node's message (SPEC 4.3 "Blocked progress").
pub fn blocked_summary(blocked: &[BlockedPod], limit: usize) -> Option<String> {
    summary(BlockedCause::ALL.map(|c| (c.label(), blocked.iter().filter(move |b| b.cause == c).map(|b| &b.pod))), limit)
}

/// Summarises the pods of a [`NodePlan`](super::NodePlan) evicted although that loses
/// something, grouped by risk and bounded as [`blocked_summary`]
/// (`evicting unmanaged pods (nothing re-creates them): ns/a`); `None` when there are none.
pub fn risk_summary(at_risk: &[RiskyPod], limit: usize) -> Option<String> {
    let risks = [EvictionRisk::Unmanaged, EvictionRisk::EmptyDir];
    summary(risks.map(|r| (r.label(), at_risk.iter().filter(move |p| p.risk == r).map(|p| &p.pod))), limit)
}

/// Summarises the pods left to finish of a [`NodePlan`](super::NodePlan) (SPEC 4.6), bounded
/// as [`blocked_summary`] (`left to finish: ns/a, ns/b and 3 more`); `None` when there are
/// none. The controller appends it to the node's message like the blockers.
pub fn waiting_summary(waiting: &[PodRef], limit: usize) -> Option<String> {
    summary([("left to finish", waiting.iter())], limit)
}

fn summary<'a, P: Iterator<Item = &'a PodRef>>(
    groups: impl IntoIterator<Item = (&'static str, P)>,
    limit: usize,
) -> Option<String> {
    let mut parts = Vec::new();
    for (label, pods) in groups {
        let names: Vec<String> = pods.map(|p| format!("{}/{}", p.namespace, p.name)).collect();
        if names.is_empty() {
            continue;
        }
        let shown = names.iter().take(limit).cloned().collect::<Vec<_>>().join(", ");
        let more = names.len().saturating_sub(limit);
        parts.push(if more > 0 { format!("{label}: {shown} and {more} more") } else { format!("{label}: {shown}") });
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draining_message_names_limiters_sorted_and_comma_separated() {
        assert_eq!(draining([]), "Draining");
        assert_eq!(draining(["maintenance-c", "maintenance-b"]), "Draining (limited by maintenance-b, maintenance-c)");
    }

    #[test]
    fn waiting_message_names_sorted_with_final_period() {
        assert_eq!(waiting(["maintenance-a"]), "Waiting for maintenance-a.");
        assert_eq!(waiting(["b", "a", "b"]), "Waiting for a, b.");
    }

    #[test]
    fn slot_message_lists_the_full_budgets() {
        assert_eq!(
            waiting_for_slot(["m-b: 1 of 1 nodes draining", "m-a: 2 of 2 nodes draining"]),
            "Waiting for a drain slot (m-a: 2 of 2 nodes draining; m-b: 1 of 1 nodes draining)."
        );
    }

    #[test]
    fn blocked_summary_groups_by_cause_and_is_bounded() {
        let pod = |n: usize, cause| BlockedPod {
            pod: PodRef { namespace: "kube-system".into(), name: format!("p{n}").into(), uid: "".into() },
            cause,
        };
        let mut blocked: Vec<_> = (0..5).map(|n| pod(n, BlockedCause::StaticPod)).collect();
        blocked.push(pod(9, BlockedCause::ToleratesDrainingTaint));
        assert_eq!(
            blocked_summary(&blocked, 2).as_deref(),
            Some(
                "static pods (never evicted): kube-system/p0, kube-system/p1 and 3 more; \
                 DaemonSet pods tolerating the draining taint: kube-system/p9"
            )
        );
        assert_eq!(blocked_summary(&[], 2), None);
    }

    #[test]
    fn waiting_summary_is_bounded() {
        let pod = |n: usize| PodRef { namespace: "batch".into(), name: format!("j{n}").into(), uid: "".into() };
        let waiting: Vec<_> = (0..4).map(pod).collect();
        assert_eq!(waiting_summary(&waiting, 2).as_deref(), Some("left to finish: batch/j0, batch/j1 and 2 more"));
        assert_eq!(waiting_summary(&[], 2), None);
    }
}
