//! Bounded parallel writes: the per-node writes of a step (cordons, releases,
//! Node conditions, evictions) are issued concurrently, at most `--max-concurrent-writes` at
//! a time, and every one waits while the apiserver's API Priority and Fairness asked us to
//! back off (a 429 with `Retry-After`).
//!
//! A PodDisruptionBudget refusal is also a 429, but an answer about one pod, not about the
//! apiserver's load: only a 429 that carries `retryAfterSeconds` and no `DisruptionBudget`
//! cause pauses the writes ([`crate::cluster::writes::retry_after`]).

use super::memory::locked;
use crate::cluster::writes::retry_after;
use futures::{StreamExt, stream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The bound and the shared pause of the controller's writes.
#[derive(Debug)]
pub struct Pacer {
    bound: usize,
    paused_until: Mutex<Option<Instant>>,
}

impl Pacer {
    /// At most `bound` writes in flight (0 counts as 1).
    pub fn new(bound: usize) -> Self {
        Pacer { bound: bound.max(1), paused_until: Mutex::new(None) }
    }

    /// Waits while a throttling 429 asked to back off.
    async fn pause(&self) {
        let until = *locked(&self.paused_until);
        if let Some(until) = until.filter(|u| *u > Instant::now()) {
            tokio::time::sleep_until(until.into()).await;
        }
    }

    /// Notes a throttling answer: every write waits `pause` from now.
    fn throttled(&self, pause: Duration) {
        let until = Instant::now() + pause;
        let mut paused = locked(&self.paused_until);
        if paused.is_none_or(|p| p < until) {
            *paused = Some(until);
        }
        tracing::warn!(seconds = pause.as_secs(), "the apiserver throttles our writes (429 Retry-After); pausing");
    }

    /// Runs one API write after any pause, and notes a throttling answer.
    ///
    /// # Errors
    /// The write's own error.
    pub async fn run<T>(&self, write: impl Future<Output = kube::Result<T>>) -> kube::Result<T> {
        self.run_with(write, |result| result.as_ref().err().and_then(retry_after)).await
    }

    /// [`Pacer::run`] for a write whose answer is already classified: `pause_of` reads the
    /// pause a throttling answer asked for (`None`: not throttled). Returns the answer.
    pub async fn run_with<T>(
        &self,
        write: impl Future<Output = T>,
        pause_of: impl FnOnce(&T) -> Option<Duration>,
    ) -> T {
        self.pause().await;
        let answer = write.await;
        if let Some(pause) = pause_of(&answer) {
            self.throttled(pause);
        }
        answer
    }

    /// Runs `step` for every item, at most the bound at a time, and waits for all of them.
    /// Returns their results in no particular order.
    pub async fn each<I, T, F, Fut>(&self, items: I, step: F) -> Vec<T>
    where
        I: IntoIterator,
        F: FnMut(I::Item) -> Fut,
        Fut: Future<Output = T>,
    {
        // The futures are made first (lazily: none runs before the stream polls it), so the
        // stream holds plain futures, not a closure over borrowed items (which keeps the
        // writer's future provably Send).
        let steps: Vec<Fut> = items.into_iter().map(step).collect();
        stream::iter(steps).buffer_unordered(self.bound).collect().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::writes::tests::too_many;

    #[tokio::test(start_paused = true)]
    async fn a_throttled_write_pauses_the_next_ones_and_the_bound_holds() {
        let pacer = Pacer::new(2);
        let first: kube::Result<()> = pacer.run(async { Err(too_many(3, None)) }).await;
        assert!(first.is_err());
        let started = tokio::time::Instant::now();
        pacer.run(async { Ok::<_, kube::Error>(()) }).await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(3), "the next write waited for Retry-After");

        let in_flight = std::sync::atomic::AtomicUsize::new(0);
        let peak = std::sync::atomic::AtomicUsize::new(0);
        let done = pacer
            .each(0..10, |_| async {
                let now = in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                in_flight.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            })
            .await;
        assert_eq!(done.len(), 10);
        assert_eq!(peak.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}
