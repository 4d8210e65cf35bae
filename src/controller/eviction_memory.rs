//! What the controller remembers of its evictions between decisions (SPEC 4.3): which pods'
//! evictions were accepted or taken over (never evicted twice) and which were refused (not
//! retried before their backoff, reported by cause on the node). The API shows this late or
//! not at all: a terminating pod only once the watch brings it, and nothing of an
//! intercepted eviction or of a refusal's backoff.

use super::memory::locked;
use crate::cluster::eviction::{EvictionOutcome, summary};
use crate::planner::PodRef;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the controller remembers of evictions between decisions (lost on restart, which
/// only means asking again): accepted or intercepted pods (not evicted twice), and refused
/// ones (not retried before their backoff, reported by cause).
#[derive(Debug, Default)]
pub struct EvictionMemory {
    by_uid: Mutex<HashMap<Arc<str>, Remembered>>,
}

#[derive(Clone, Debug)]
struct Remembered {
    outcome: EvictionOutcome,
    pod: PodRef,
    node: String,
    attempts: u32,
    tried_at: Instant,
    retry_at: Instant,
}

/// Longest wait between two eviction attempts of a refused pod.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Shortest wait between two eviction attempts of a pod a PodDisruptionBudget refused, when
/// the budget says it allows a disruption again: its status may lag the evictions it just
/// accepted, and a refusal must not turn into a loop of requests.
const PDB_RETRY: Duration = Duration::from_secs(1);

impl EvictionMemory {
    /// Whether an eviction of this pod UID was accepted or taken over (it counts as in progress).
    pub fn in_progress(&self, uid: &str) -> bool {
        self.lock().get(uid).is_some_and(|r| r.outcome.in_progress())
    }

    /// The UIDs of every pod whose eviction was accepted or taken over: [`Self::in_progress`]
    /// of many pods under one lock (a planning pass asks it of every pod).
    pub fn in_progress_uids(&self) -> std::collections::HashSet<Arc<str>> {
        self.lock().iter().filter(|(_, r)| r.outcome.in_progress()).map(|(uid, _)| uid.clone()).collect()
    }

    /// The PodDisruptionBudget that refused the last eviction of this pod UID, if one did
    /// (evacuation by rollout reads whether it can ever allow a disruption).
    pub fn refused_by_pdb(&self, uid: &str) -> Option<String> {
        match &self.lock().get(uid)?.outcome {
            EvictionOutcome::BlockedByPdb(pdb) => Some(pdb.clone()),
            _ => None,
        }
    }

    /// Whether the last answer about this pod UID was a failure ([`EvictionOutcome::Failed`]).
    pub fn failing(&self, uid: &str) -> bool {
        self.lock().get(uid).is_some_and(|r| matches!(r.outcome, EvictionOutcome::Failed(_)))
    }

    /// Whether the pod may be (re)tried now: never tried, or its backoff passed, or a
    /// PodDisruptionBudget refused it and `allows(namespace, pdb)` says that budget allows a
    /// disruption again (its watched `status.disruptionsAllowed`): evictions go at the pace
    /// the budget allows, not on a timer that grows (at most one try per [`PDB_RETRY`]).
    pub fn may_try(&self, uid: &str, now: Instant, allows: impl Fn(&str, &str) -> bool) -> bool {
        self.lock().get(uid).is_none_or(|r| {
            let pdb_allows = match &r.outcome {
                EvictionOutcome::BlockedByPdb(pdb) => now >= r.tried_at + PDB_RETRY && allows(&r.pod.namespace, pdb),
                _ => false,
            };
            !self.is_done(&r.outcome) && (r.retry_at <= now || pdb_allows)
        })
    }

    /// Whether some pod in `namespace` waits for the PodDisruptionBudget `pdb`, which refused
    /// its eviction: a change of that budget that allows a disruption is worth a decision.
    pub fn waits_for_pdb(&self, namespace: &str, pdb: &str) -> bool {
        self.lock().values().any(|r| {
            &*r.pod.namespace == namespace && matches!(&r.outcome, EvictionOutcome::BlockedByPdb(p) if p == pdb)
        })
    }

    fn is_done(&self, o: &EvictionOutcome) -> bool {
        o.in_progress() || *o == EvictionOutcome::Gone
    }

    /// Records an outcome; refusals back off exponentially: attempt `n` waits `2^n` s (2 s
    /// after the first refusal), at most a minute; a throttled request waits the pause the
    /// apiserver asked for.
    pub fn record(&self, pod: &PodRef, node: &str, outcome: EvictionOutcome, now: Instant) {
        let mut map = self.lock();
        let attempts = map.get(&pod.uid).map_or(0, |r| r.attempts) + 1;
        let backoff =
            outcome.throttle().unwrap_or_else(|| Duration::from_secs(1u64 << attempts.min(6)).min(MAX_BACKOFF));
        map.insert(
            pod.uid.clone(),
            Remembered {
                outcome,
                pod: pod.clone(),
                node: node.to_owned(),
                attempts,
                tried_at: now,
                retry_at: now + backoff,
            },
        );
    }

    /// Forgets pods that no longer exist (`exists(uid)` false).
    pub fn retain(&self, exists: impl Fn(&str) -> bool) {
        self.lock().retain(|uid, _| exists(uid));
    }

    /// Number of pods remembered (a gauge, flat over time).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no pod is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A bounded summary of refused evictions on `node`, grouped by cause
    /// (`blocked by PDB default/web: 2 pods; eviction failing: 1 pod`), `None` if none.
    pub fn blockers(&self, node: &str) -> Option<String> {
        let map = self.lock();
        let mut groups: std::collections::BTreeMap<String, usize> = Default::default();
        for r in map.values().filter(|r| r.node == node) {
            let key = match &r.outcome {
                EvictionOutcome::BlockedByPdb(pdb) => format!("blocked by PDB {}/{pdb}", r.pod.namespace),
                EvictionOutcome::Failed(_) => "eviction failing".to_owned(),
                _ => continue,
            };
            *groups.entry(key).or_default() += 1;
        }
        summary(&groups)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Remembered>> {
        // A poisoned lock only means another job panicked mid-update of plain data.
        locked(&self.by_uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn memory_backs_off_and_summarises_blockers() {
        let m = EvictionMemory::default();
        let now = Instant::now();
        let pod = |n: &str| PodRef { namespace: "default".into(), name: n.into(), uid: format!("u-{n}").into() };
        let never = |_: &str, _: &str| false;
        assert!(m.may_try("u-a", now, never));
        m.record(&pod("a"), "one", EvictionOutcome::BlockedByPdb("web".into()), now);
        m.record(&pod("b"), "one", EvictionOutcome::BlockedByPdb("web".into()), now);
        m.record(&pod("c"), "one", EvictionOutcome::Accepted, now);
        assert!(!m.may_try("u-a", now, never));
        assert!(m.may_try("u-a", now + Duration::from_secs(3), never));
        assert!(!m.may_try("u-c", now + Duration::from_secs(100), never), "accepted pods are not evicted twice");
        assert!(m.waits_for_pdb("default", "web") && !m.waits_for_pdb("other", "web"));
        // Refused again: the backoff grows, but the budget allowing a disruption lets it go
        // at once (not before a second), whatever the backoff says.
        for _ in 0..4 {
            m.record(&pod("a"), "one", EvictionOutcome::BlockedByPdb("web".into()), now);
        }
        let web = |ns: &str, pdb: &str| ns == "default" && pdb == "web";
        assert!(!m.may_try("u-a", now + Duration::from_secs(2), never), "the backoff is long by now");
        assert!(m.may_try("u-a", now + Duration::from_secs(2), web), "the budget allows: at once");
        assert!(!m.may_try("u-a", now + Duration::from_millis(500), web), "never twice within a second");
        assert!(m.in_progress("u-c") && !m.in_progress("u-a"));
        assert_eq!(m.blockers("one").as_deref(), Some("blocked by PDB default/web: 2 pods"));
        assert_eq!(m.blockers("two"), None);
        m.retain(|uid| uid != "u-a");
        assert_eq!(m.blockers("one").as_deref(), Some("blocked by PDB default/web: 1 pod"));
    }
}
