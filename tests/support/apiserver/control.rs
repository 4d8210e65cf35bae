//! Test-facing controls of [`ApiServer`]: SubjectAccessReview failures, recorded
//! Events and requests, fault injection and watch control.

use super::server::lock;
use super::{ApiServer, DownMode, RequestRecord, SarFailure};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

impl ApiServer {
    /// Serves lifecycle.k8s.io/v1alpha1 EvictionRequests and Evictions (discovery and the
    /// resources, with the real API's validation: `lifecycle.rs`) or not (404, as a cluster
    /// without the `EvictionRequestAPI` feature gate answers).
    pub fn serve_eviction_requests(&self, on: bool) {
        self.inner.eviction_requests.store(on, Ordering::SeqCst);
    }

    /// Delay before each SubjectAccessReview answer.
    pub fn sar_latency(&self, latency: Duration) {
        *lock(&self.inner.sar.latency) = latency;
    }

    /// Makes SubjectAccessReviews fail (or answer again with [`SarFailure::None`]).
    pub fn sar_fail(&self, failure: SarFailure) {
        *lock(&self.inner.sar.failure) = failure;
    }

    /// Every SubjectAccessReview body received (`apiVersion`, `kind`, `spec` with `user`,
    /// `uid`, `groups`, `extra` and `resourceAttributes`), in arrival order.
    pub fn sar_requests(&self) -> Vec<Value> {
        lock(&self.inner.sar.requests).clone()
    }

    /// Forgets the recorded SubjectAccessReviews and the concurrency high-water mark.
    pub fn sar_reset(&self) {
        lock(&self.inner.sar.requests).clear();
        let now = self.inner.sar.in_flight.load(Ordering::SeqCst);
        self.inner.sar.max_in_flight.store(now, Ordering::SeqCst);
    }

    /// The largest number of SubjectAccessReviews in flight at once so far.
    pub fn sar_max_concurrency(&self) -> usize {
        self.inner.sar.max_in_flight.load(Ordering::SeqCst)
    }

    /// Every Event write (create, update or patch, events.k8s.io/v1), as
    /// stored after the write, in order.
    pub fn events(&self) -> Vec<Value> {
        lock(&self.inner.events).clone()
    }

    /// Takes the whole server down (503 ServiceUnavailable to every request, open watch
    /// streams ended) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.set_down_mode(down.then_some(DownMode::Unavailable));
    }

    /// Takes the whole server down in `mode` (`None` = up). Open watches end.
    pub fn set_down_mode(&self, mode: Option<DownMode>) {
        lock(&self.inner.faults).down = mode;
        if mode.is_some() {
            self.inner.close_watches("");
        }
    }

    /// Takes the paths starting with `prefix` (e.g. `/api/v1/nodes`,
    /// `/apis/authorization.k8s.io`) down in `mode`, or back up with `None`. Open watches
    /// under the prefix end.
    pub fn set_path_down(&self, prefix: &str, mode: Option<DownMode>) {
        let mut faults = lock(&self.inner.faults);
        faults.prefixes.retain(|(p, _)| p != prefix);
        if let Some(mode) = mode {
            faults.prefixes.push((prefix.to_owned(), mode));
            drop(faults);
            self.inner.close_watches(prefix);
        }
    }

    /// Ends every open watch stream cleanly; kube's watcher re-watches from its last
    /// resourceVersion.
    pub fn close_watches(&self) {
        self.inner.close_watches("");
    }

    /// The number of open watch streams whose path starts with `prefix` (`""` = all).
    pub fn open_watches(&self, prefix: &str) -> usize {
        lock(&self.inner.watches).iter().filter(|w| w.path.starts_with(prefix)).count()
    }

    /// Forgets the change history, so that a watch from any earlier resourceVersion gets
    /// a 410 Expired ERROR event (and kube re-lists).
    pub fn compact(&self) {
        self.inner.store.compact();
    }

    /// Every request received, in order.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        lock(&self.inner.requests).clone()
    }

    /// How many requests `verb` on `resource` were received (`list` on `nodes`, ...).
    pub fn count_requests(&self, verb: &str, resource: &str) -> usize {
        lock(&self.inner.requests).iter().filter(|r| r.is(verb, resource)).count()
    }

    /// Polls `check` every 10 ms until it returns `Some` or `timeout` passes (then panics
    /// with `what`).
    pub async fn wait_for<T>(&self, what: &str, timeout: Duration, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = check(self) {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
