//! The drain messages of SPEC 4.3 "Messages" (the KEP's `drainMessage`), and a bounded
//! summary of the pods in the way (SPEC 4.3 "Blocked progress").

use super::output::{BlockedCause, BlockedPod};
use std::collections::BTreeSet;

/// Message of a node or maintenance that has nothing left to do. SPEC 4.3 names only the
/// `Draining` and `Waiting for` forms; this is the planner's message once nothing remains.
pub const DRAINED: &str = "Drained";
/// Message when every plan is through but pods the plans never select remain (only possible
/// with plans that were not defaulted by admission, SPEC 3.1).
pub const PLAN_COMPLETE: &str = "Drain plan complete";

/// `Draining`, or `Draining (limited by a, b)` with the names sorted (SPEC 4.3 "Messages").
pub(crate) fn draining<'a>(limited_by: impl IntoIterator<Item = &'a str>) -> String {
    let names: BTreeSet<&str> = limited_by.into_iter().collect();
    if names.is_empty() { "Draining".to_string() } else { format!("Draining (limited by {})", join(&names)) }
}

/// `Waiting for a, b.` with the names sorted (SPEC 4.3 "Messages").
pub(crate) fn waiting<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: BTreeSet<&str> = names.into_iter().collect();
    format!("Waiting for {}.", join(&names))
}

fn join(names: &BTreeSet<&str>) -> String {
    names.iter().copied().collect::<Vec<_>>().join(", ")
}

/// Summarises the blocked pods of a [`NodePlan`](super::NodePlan), grouped by cause, at most
/// `limit` names per cause (`static pods (never evicted): ns/a, ns/b and 3 more`); `None` when
/// there are none. The controller appends it, with its own causes (PDBs, failing evictions),
/// to the node's message (SPEC 4.3 "Blocked progress").
pub fn blocked_summary(blocked: &[BlockedPod], limit: usize) -> Option<String> {
    let mut parts = Vec::new();
    for cause in [BlockedCause::StaticPod, BlockedCause::ToleratesDrainingTaint] {
        let label = cause.label();
        let names: Vec<String> = blocked
            .iter()
            .filter(|b| b.cause == cause)
            .map(|b| format!("{}/{}", b.pod.namespace, b.pod.name))
            .collect();
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
    use crate::planner::PodRef;

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
}
