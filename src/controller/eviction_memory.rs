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

    /// Whether the pod may be (re)tried now. Never tried: yes. Refused by a
    /// PodDisruptionBudget that the cache holds: when `take(namespace, pdb)` gives it one of
    /// the disruptions the budget's watched `status.disruptionsAllowed` allows (`Some(true)`;
    /// the caller counts them down over a round, so a round sends no more evictions than the
    /// budget allows, which is what the apiserver checks), at most once per [`PDB_RETRY`];
    /// or, behind a status that lags, once [`MAX_BACKOFF`] has passed. Anything else
    /// (`take` answers `None`: the budget is not in the cache): once its backoff passed.
    pub fn may_try(&self, uid: &str, now: Instant, mut take: impl FnMut(&str, &str) -> Option<bool>) -> bool {
        self.lock().get(uid).is_none_or(|r| {
            if self.is_done(&r.outcome) {
                return false;
            }
            match &r.outcome {
                EvictionOutcome::BlockedByPdb(pdb) if now >= r.tried_at + PDB_RETRY => {
                    match take(&r.pod.namespace, pdb) {
                        Some(taken) => taken || now >= r.tried_at + MAX_BACKOFF,
                        None => r.retry_at <= now,
                    }
                }
                _ => r.retry_at <= now,
            }
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
        let unknown = |_: &str, _: &str| None;
        assert!(m.may_try("u-a", now, unknown));
        m.record(&pod("a"), "one", EvictionOutcome::BlockedByPdb("web".into()), now);
        m.record(&pod("b"), "one", EvictionOutcome::BlockedByPdb("web".into()), now);
        m.record(&pod("c"), "one", EvictionOutcome::Accepted, now);
        assert!(!m.may_try("u-a", now, unknown));
        assert!(m.may_try("u-a", now + Duration::from_secs(3), unknown), "a budget not cached: the backoff");
        assert!(!m.may_try("u-c", now + Duration::from_secs(100), unknown), "accepted pods are not evicted twice");
        assert!(m.waits_for_pdb("default", "web") && !m.waits_for_pdb("other", "web"));
        // A cached budget that allows nothing holds its pods past their backoff, up to
        // MAX_BACKOFF (a status that lags); one that allows lets them go at once (not before
        // a second), as many as it allows in one round.
        let closed = |_: &str, _: &str| Some(false);
        assert!(!m.may_try("u-a", now + Duration::from_secs(3), closed), "the budget allows nothing");
        assert!(m.may_try("u-a", now + MAX_BACKOFF, closed), "a lagging status is not trusted forever");
        for _ in 0..4 {
            m.record(&pod("a"), "one", EvictionOutcome::BlockedByPdb("web".into()), now);
        }
        let mut allowed = 1;
        let mut web = |ns: &str, pdb: &str| {
            let take = ns == "default" && pdb == "web" && allowed > 0;
            allowed -= i32::from(take);
            Some(take)
        };
        assert!(!m.may_try("u-a", now + Duration::from_millis(500), &mut web), "never twice within a second");
        assert!(m.may_try("u-a", now + Duration::from_secs(2), &mut web), "the budget allows: at once");
        assert!(!m.may_try("u-b", now + Duration::from_secs(2), &mut web), "one disruption allowed, one taken");
        assert!(m.in_progress("u-c") && !m.in_progress("u-a"));
        assert_eq!(m.blockers("one").as_deref(), Some("blocked by PDB default/web: 2 pods"));
        assert_eq!(m.blockers("two"), None);
        m.retain(|uid| uid != "u-a");
        assert_eq!(m.blockers("one").as_deref(), Some("blocked by PDB default/web: 1 pod"));
    }
}
