//! When the loop looks at each object next, and the one error policy (SPEC 1.2).
//!
//! A watch event makes every job due at once; a job that succeeded says when it wants to be
//! looked at again (a deadline, a drain in progress, or never until the next change); a job
//! that failed is retried after a jittered exponential backoff from 250 ms, capped at 10 s,
//! whether or not anything else changes. kube-runtime's default backoff grows to minutes,
//! too slow for a write that a webhook or a policy refused for a moment.

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// What one turn of the loop works on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Job {
    /// The cluster-wide writes: NodeDisruptionBudget statuses and `MaintenancePlanned`
    /// conditions (SPEC 4.5).
    Cluster,
    /// One NodeMaintenance, by name (SPEC 4.1 to 4.3).
    Maintenance(String),
}

/// The longest a failed job waits before it is tried again.
pub const MAX_RETRY: Duration = Duration::from_secs(10);

/// Due instants and the backoff of failing jobs. Bounded by the jobs that exist: the loop
/// [`Schedule::retain`]s the live ones at every trigger.
#[derive(Debug, Default)]
pub struct Schedule {
    due: BTreeMap<Job, Instant>,
    failing: HashMap<Job, ExponentialBackoff>,
}

impl Schedule {
    /// Makes each of `jobs` due at `now`.
    pub fn all_due(&mut self, jobs: impl IntoIterator<Item = Job>, now: Instant) {
        for job in jobs {
            self.due.insert(job, now);
        }
    }

    /// Forgets every job that `live` rejects (a maintenance that is gone); returns them.
    pub fn retain(&mut self, live: impl Fn(&Job) -> bool) -> Vec<Job> {
        let gone: BTreeSet<Job> = self.due.keys().chain(self.failing.keys()).filter(|j| !live(j)).cloned().collect();
        for job in &gone {
            self.due.remove(job);
            self.failing.remove(job);
        }
        gone.into_iter().collect()
    }

    /// The earliest due instant, if any job is due at all.
    pub fn next(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    /// Removes and returns the jobs due at `now`: [`Job::Maintenance`] in name order, then
    /// [`Job::Cluster`] (it publishes what the maintenances just decided).
    pub fn take_due(&mut self, now: Instant) -> Vec<Job> {
        let mut due: Vec<Job> = self.due.iter().filter(|(_, at)| **at <= now).map(|(j, _)| j.clone()).collect();
        for job in &due {
            self.due.remove(job);
        }
        due.sort_by_key(|j| matches!(j, Job::Cluster));
        due
    }

    /// `job` succeeded: its backoff starts over, and it is due again after `again` (`None`:
    /// at the next trigger only). An earlier due instant already set (a trigger during the
    /// job) stays.
    pub fn succeeded(&mut self, job: Job, again: Option<Duration>, now: Instant) {
        self.failing.remove(&job);
        if let Some(after) = again {
            let at = now + after;
            self.due.entry(job).and_modify(|d| *d = (*d).min(at)).or_insert(at);
        }
    }

    /// `job` failed: it is due again after its next backoff step (jittered, at most
    /// [`MAX_RETRY`]), which this returns.
    pub fn failed(&mut self, job: Job, now: Instant) -> Duration {
        let backoff = self.failing.entry(job.clone()).or_insert_with(backoff);
        let wait = backoff.next().unwrap_or(MAX_RETRY).min(MAX_RETRY);
        let at = now + wait;
        self.due.entry(job).and_modify(|d| *d = (*d).min(at)).or_insert(at);
        wait
    }
}

/// 250 ms doubling to 5 s, plus up to as much again of jitter: at most [`MAX_RETRY`].
fn backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(250))
        .with_max_delay(MAX_RETRY / 2)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> Job {
        Job::Maintenance(name.into())
    }

    #[test]
    fn a_trigger_makes_every_job_due_and_the_cluster_job_runs_last() {
        let mut s = Schedule::default();
        let now = Instant::now();
        s.all_due([Job::Cluster, m("b"), m("a")], now);
        assert_eq!(s.next(), Some(now));
        assert_eq!(s.take_due(now), vec![m("a"), m("b"), Job::Cluster]);
        assert_eq!(s.next(), None);
    }

    #[test]
    fn a_failed_job_is_retried_by_itself_with_a_growing_jittered_backoff_capped_at_ten_seconds() {
        let mut s = Schedule::default();
        let now = Instant::now();
        let waits: Vec<Duration> = (0..12).map(|_| s.failed(m("a"), now)).collect();
        assert!(waits[0] >= Duration::from_millis(250) && waits[0] < Duration::from_millis(500), "{waits:?}");
        assert!(waits.iter().all(|w| *w <= MAX_RETRY), "{waits:?}");
        assert!(waits[11] >= MAX_RETRY / 2, "{waits:?}");
        // Due at the earliest of the retries computed (each retry keeps the sooner instant).
        assert_eq!(s.next(), Some(now + waits[0]));
        assert_eq!(s.take_due(now + waits[0]), vec![m("a")]);
    }

    #[test]
    fn success_resets_the_backoff_and_asks_to_be_looked_at_again_later() {
        let mut s = Schedule::default();
        let now = Instant::now();
        for _ in 0..8 {
            s.failed(m("a"), now);
        }
        s.take_due(now + MAX_RETRY);
        s.succeeded(m("a"), Some(Duration::from_secs(2)), now);
        assert_eq!(s.next(), Some(now + Duration::from_secs(2)));
        s.take_due(now + Duration::from_secs(2));
        let first = s.failed(m("a"), now);
        assert!(first < Duration::from_millis(500), "backoff starts over: {first:?}");
        s.take_due(now + MAX_RETRY);
        s.succeeded(m("a"), None, now);
        assert_eq!(s.next(), None, "no timer: only a trigger looks again");
    }

    #[test]
    fn jobs_that_are_gone_are_forgotten() {
        let mut s = Schedule::default();
        let now = Instant::now();
        s.all_due([m("a"), m("b"), Job::Cluster], now);
        s.failed(m("b"), now);
        assert_eq!(s.retain(|j| *j != m("b")), vec![m("b")]);
        assert_eq!(s.take_due(now), vec![m("a"), Job::Cluster]);
    }
}
