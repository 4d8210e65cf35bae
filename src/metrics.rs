//! Prometheus metrics (SPEC 4.4), served on the plain-HTTP metrics port. Every family the
//! program exports is declared here, so names and labels live in one place, except the
//! state metrics read from the caches at scrape time ([`state`]) and the budget gauges of
//! the controller's last decision ([`budgets`]), encoded at scrape time too.

pub mod budgets;
pub mod state;

pub use budgets::BudgetGaugesView;

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of an admission request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// `mutate`, `validate`, `validate-node` or `validate-budget`.
    pub endpoint: &'static str,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT`, or `unknown` when the body was unreadable.
    pub operation: &'static str,
    /// `allowed`, `denied` or `error`.
    pub result: &'static str,
}

/// Labels of a SubjectAccessReview call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SarLabels {
    /// `allowed`, `denied` or `error`.
    pub result: &'static str,
}

impl SarLabels {
    /// Every `result`; their series are created at 0 on start, like
    /// [`ReconcileErrorLabels::REASONS`], so that the first failed review shows in `rate()`.
    pub const RESULTS: [&'static str; 3] = ["allowed", "denied", "error"];
}

/// Labels of a read of Prometheus' alerts (SPEC 4.6, `healthGate.alerts`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AlertReadLabels {
    /// `success`, `timeout`, `unreachable` (no connection, TLS refused), `http_error`
    /// (a non-2xx answer) or `invalid_response` (not the JSON of `/api/v1/alerts`, too large,
    /// or a `status` other than `success`).
    pub result: &'static str,
}

impl AlertReadLabels {
    /// Every `result`; their series are created at 0 on start, like [`SarLabels::RESULTS`],
    /// so that an alert on failed reads sees the first one.
    pub const RESULTS: [&'static str; 5] = ["success", "timeout", "unreachable", "http_error", "invalid_response"];
}

/// Labels of an eviction.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// `accepted`, `completed` (an eviction the apiserver had accepted and not carried out,
    /// finished by deleting the pod), `blocked_by_pdb`, `intercepted`, `throttled`,
    /// `not_found` or `error`.
    pub result: &'static str,
}

/// Labels of a controller memory's size: one of
/// `crate::controller::janitor::MEMORIES`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemoryLabels {
    /// Which memory (`reported_pods`, `evictions`, ...).
    pub memory: &'static str,
}

/// Labels of a per-NodeDisruptionBudget series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    /// The NodeDisruptionBudget's name.
    pub budget: String,
}

/// Labels of a per-NodeDisruptionBudget, per-gate series (SPEC 4.6).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetGateLabels {
    /// The NodeDisruptionBudget's name.
    pub budget: String,
    /// The gate, by the reason it gives when closed (`Paused`, `Blackout`,
    /// `OutsideMaintenanceWindow`, `AlertsFiring`, `TooManyUnhealthyNodes`).
    pub gate: &'static str,
}

/// Labels of a failed reconcile: the cause, from the API error (a small fixed set).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileErrorLabels {
    /// `conflict` (409), `forbidden` (403), `not_found` (404), `throttled` (429),
    /// `server_error` (5xx), `invalid` (any other 4xx), or `transport` (no HTTP answer:
    /// connection, TLS, timeout, decoding).
    pub reason: &'static str,
}

impl ReconcileErrorLabels {
    /// Every `reason`. Their series are created at 0 on start: a counter that
    /// appears only at its first increment hides that increment from `rate()`, and the alert
    /// on reconcile errors could not see the first failures.
    pub const REASONS: [&'static str; 7] =
        ["conflict", "forbidden", "not_found", "throttled", "server_error", "invalid", "transport"];

    /// The labels for `error` (SPEC 4.4).
    pub fn of(error: &kube::Error) -> Self {
        let reason = match error {
            kube::Error::Api(status) => match status.code {
                409 => "conflict",
                403 => "forbidden",
                404 => "not_found",
                429 => "throttled",
                500..=599 => "server_error",
                _ => "invalid",
            },
            _ => "transport",
        };
        ReconcileErrorLabels { reason }
    }
}

/// All metric families; cheap to clone (families are reference-counted).
#[derive(Clone, Debug)]
pub struct Metrics {
    /// `node_maintenance_admission_requests_total`.
    pub admission_requests: Family<AdmissionLabels, Counter>,
    /// `node_maintenance_admission_request_duration_seconds`.
    pub admission_duration: Family<AdmissionLabels, Histogram>,
    /// `node_maintenance_subject_access_reviews_total`.
    pub sar_calls: Family<SarLabels, Counter>,
    /// `node_maintenance_subject_access_review_duration_seconds`.
    pub sar_duration: Histogram,
    /// `node_maintenance_subject_access_review_cache_hits_total`.
    pub sar_cache_hits: Counter,
    /// `node_maintenance_alert_reads_total{result}`: reads of Prometheus' `/api/v1/alerts`
    /// for the health gates (at most one per 15 s).
    pub alert_reads: Family<AlertReadLabels, Counter>,
    /// `node_maintenance_alert_read_duration_seconds`: time of one such read, failed ones
    /// included (a timeout shows as `--prometheus-timeout`).
    pub alert_read_duration: Histogram,
    /// `node_maintenance_reconciles_total`: jobs the loop decided and wrote (each
    /// maintenance's and the cluster-wide job); the denominator of the reconcile-errors
    /// alert.
    pub reconciles: Counter,
    /// `node_maintenance_reconcile_errors_total{reason}`: jobs that failed.
    pub reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    /// `node_maintenance_reconcile_duration_seconds`: per job, the decision it was part of
    /// plus its writes, in seconds.
    pub reconcile_duration: Histogram,
    /// `node_maintenance_planning_pass_duration_seconds`: one drain planning pass over every
    /// Drain-stage maintenance, built from the caches (kept by the decisions after it while
    /// the Node and Pod watches see no change), in seconds.
    pub planning_pass_duration: Histogram,
    /// `node_maintenance_evictions_total`.
    pub evictions: Family<EvictionLabels, Counter>,
    /// `node_maintenance_drain_timeouts_total`: drains that ran past their
    /// `spec.drainTimeout`, counted when the `Drained` condition turns `DrainTimedOut`.
    pub drain_timeouts: Counter,
    /// `node_maintenance_rollouts_started_total`: Deployment rollouts started to evacuate
    /// pods.
    pub rollouts_started: Counter,
    /// `node_maintenance_rollouts_finished_total`: those rollouts seen finished (every
    /// replica updated and available).
    pub rollouts_finished: Counter,
    /// `node_maintenance_rollouts_failed_total`: those rollouts seen failed (progress
    /// deadline exceeded).
    pub rollouts_failed: Counter,
    /// The NodeDisruptionBudget gauges of the controller's last decision, encoded at each
    /// scrape ([`BudgetGaugesView`]).
    pub budgets: BudgetGaugesView,
    /// `node_maintenance_controller_memory_entries{memory}`: entries of each long-lived
    /// memory of the controller, after its last sweep (0 while not leading).
    pub memory_entries: Family<MemoryLabels, Gauge>,
    /// `node_maintenance_leader`: 1 while this replica holds the controller's Lease and runs
    /// the reconcile loop, else 0 (the "no controller leading" alert sums it over
    /// the replicas).
    pub leader: Gauge,
    /// `node_maintenance_serving_certificate_expiration_timestamp_seconds`: `notAfter` of
    /// the webhook's serving certificate now in use, in seconds since the Unix epoch; set
    /// when it is loaded and on every reload.
    pub certificate_expiration: Gauge,
}

/// Latency buckets from 50 µs to about 6.5 s (admission and reconcile), in seconds.
fn latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.00005, 2.0, 18))
}

impl Metrics {
    /// Creates the families and registers them under the `node_maintenance` prefix.
    /// Returns the metrics and the registry to encode on `/metrics`.
    pub fn new() -> (Self, Registry) {
        let m = Metrics {
            admission_requests: Family::default(),
            admission_duration: Family::new_with_constructor(latency_histogram),
            sar_calls: Family::default(),
            sar_duration: latency_histogram(),
            sar_cache_hits: Counter::default(),
            alert_reads: Family::default(),
            alert_read_duration: latency_histogram(),
            reconciles: Counter::default(),
            reconcile_errors: Family::default(),
            reconcile_duration: latency_histogram(),
            planning_pass_duration: latency_histogram(),
            evictions: Family::default(),
            drain_timeouts: Counter::default(),
            rollouts_started: Counter::default(),
            rollouts_finished: Counter::default(),
            rollouts_failed: Counter::default(),
            budgets: BudgetGaugesView::default(),
            memory_entries: Family::default(),
            leader: Gauge::default(),
            certificate_expiration: Gauge::default(),
        };
        for reason in ReconcileErrorLabels::REASONS {
            let _ = m.reconcile_errors.get_or_create(&ReconcileErrorLabels { reason });
        }
        for result in SarLabels::RESULTS {
            let _ = m.sar_calls.get_or_create(&SarLabels { result });
        }
        for result in AlertReadLabels::RESULTS {
            let _ = m.alert_reads.get_or_create(&AlertReadLabels { result });
        }
        let mut r = Registry::with_prefix("node_maintenance");
        r.register(
            "admission_requests",
            "Admission requests by endpoint, operation and result",
            m.admission_requests.clone(),
        );
        r.register_with_unit(
            "admission_request_duration",
            "Time to answer an admission request",
            prometheus_client::registry::Unit::Seconds,
            m.admission_duration.clone(),
        );
        r.register("subject_access_reviews", "SubjectAccessReviews sent, by result", m.sar_calls.clone());
        r.register_with_unit(
            "subject_access_review_duration",
            "Latency of SubjectAccessReview calls",
            prometheus_client::registry::Unit::Seconds,
            m.sar_duration.clone(),
        );
        r.register(
            "subject_access_review_cache_hits",
            "Authorization answers served from cache",
            m.sar_cache_hits.clone(),
        );
        r.register(
            "alert_reads",
            "Reads of Prometheus' alerts for the health gates of NodeDisruptionBudgets, by result",
            m.alert_reads.clone(),
        );
        r.register_with_unit(
            "alert_read_duration",
            "Time of one read of Prometheus' alerts, failed reads included",
            prometheus_client::registry::Unit::Seconds,
            m.alert_read_duration.clone(),
        );
        r.register(
            "reconciles",
            "Jobs the controller loop ran: one per NodeMaintenance reconcile, plus the cluster-wide job",
            m.reconciles.clone(),
        );
        r.register(
            "reconcile_errors",
            "Jobs of the controller loop that failed (each retried after its backoff), by cause of the failed API call",
            m.reconcile_errors.clone(),
        );
        r.register_with_unit(
            "reconcile_duration",
            "Time of one job of the controller loop: the decision it was part of, then its writes",
            prometheus_client::registry::Unit::Seconds,
            m.reconcile_duration.clone(),
        );
        r.register_with_unit(
            "planning_pass_duration",
            "Time of one drain planning pass over every Drain-stage maintenance, from the caches",
            prometheus_client::registry::Unit::Seconds,
            m.planning_pass_duration.clone(),
        );
        r.register("evictions", "Evictions requested, by result", m.evictions.clone());
        r.register(
            "drain_timeouts",
            "Drains that ran past their spec.drainTimeout without finishing (nothing is forced)",
            m.drain_timeouts.clone(),
        );
        r.register(
            "rollouts_started",
            "Deployment rollouts started to evacuate pods instead of evicting them",
            m.rollouts_started.clone(),
        );
        r.register(
            "rollouts_finished",
            "Evacuating rollouts seen finished (every replica updated and available)",
            m.rollouts_finished.clone(),
        );
        r.register(
            "rollouts_failed",
            "Evacuating rollouts seen failed (progress deadline exceeded; nothing is forced)",
            m.rollouts_failed.clone(),
        );
        r.register_collector(Box::new(m.budgets.clone()));
        r.register(
            "controller_memory_entries",
            "Entries of each long-lived memory of the controller after its last sweep (0 while not leading)",
            m.memory_entries.clone(),
        );
        r.register(
            "leader",
            "1 while this replica holds the controller's Lease and reconciles, else 0",
            m.leader.clone(),
        );
        r.register_with_unit(
            "serving_certificate_expiration_timestamp",
            "notAfter of the webhook's serving certificate in use, in seconds since the Unix epoch",
            prometheus_client::registry::Unit::Seconds,
            m.certificate_expiration.clone(),
        );
        (m, r)
    }
}

/// `node_maintenance_tokio_alive_tasks`, read from the runtime at each scrape (a
/// task leak shows as growth over a soak); register it with `Registry::register_collector`.
#[derive(Debug)]
pub struct TokioTasks(pub tokio::runtime::Handle);

impl prometheus_client::collector::Collector for TokioTasks {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> std::fmt::Result {
        let help = "Tasks alive in the process's tokio runtime (webhook and controller)";
        let tasks = u64::try_from(self.0.metrics().num_alive_tasks()).unwrap_or(u64::MAX);
        encode_gauge(&mut encoder, "tokio_alive_tasks", help, None, tasks)
    }
}

/// Encodes one gauge family: its descriptor always (so the name is on `/metrics` even
/// without series), then one sample per entry of `series`.
pub(crate) fn encode_gauges<L: EncodeLabelSet, N>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&prometheus_client::registry::Unit>,
    series: impl IntoIterator<Item = (L, N)>,
) -> std::fmt::Result
where
    prometheus_client::metrics::gauge::ConstGauge<N>: prometheus_client::encoding::EncodeMetric,
{
    use prometheus_client::encoding::EncodeMetric;
    let mut family = encoder.encode_descriptor(name, help, unit, prometheus_client::metrics::MetricType::Gauge)?;
    for (labels, value) in series {
        prometheus_client::metrics::gauge::ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// Encodes one gauge read at scrape time (`value` capped at `i64::MAX`), for the collectors
/// of this file.
pub(crate) fn encode_gauge(
    encoder: &mut prometheus_client::encoding::DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&prometheus_client::registry::Unit>,
    value: u64,
) -> std::fmt::Result {
    use prometheus_client::encoding::EncodeMetric;
    let metric = prometheus_client::metrics::gauge::ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
    metric.encode(encoder.encode_descriptor(name, help, unit, prometheus_client::metrics::MetricType::Gauge)?)
}

/// `node_maintenance_heap_in_use_bytes`: bytes the program holds from glibc's allocator,
/// read at each scrape from `mallinfo2()` (`uordblks + hblkhd`: chunks in use in every arena,
/// plus those mmapped on their own). RSS also counts pages the allocator keeps free for later
/// and the binary's own pages, so a soak judges growth on this figure
/// (docs/reliability.md "Soak"). Exported only where the allocator is glibc's; register it with
/// `Registry::register_collector`.
#[derive(Debug)]
pub struct HeapInUse;

impl HeapInUse {
    /// The bytes in use now, or `None` where the allocator is not glibc's. Takes each arena's
    /// lock once (microseconds), so it is read per scrape, never per request.
    pub fn bytes() -> Option<u64> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            // SAFETY: mallinfo2 only reads glibc's own allocator state under its locks; no
            // preconditions (glibc >= 2.33).
            let info = unsafe { libc::mallinfo2() };
            Some(u64::try_from(info.uordblks.saturating_add(info.hblkhd)).unwrap_or(u64::MAX))
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        None
    }
}

impl prometheus_client::collector::Collector for HeapInUse {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> std::fmt::Result {
        let Some(bytes) = Self::bytes() else { return Ok(()) };
        let help = "Bytes the process holds from glibc's allocator (mallinfo2: in use in the arenas plus mmapped)";
        encode_gauge(&mut encoder, "heap_in_use", help, Some(&prometheus_client::registry::Unit::Bytes), bytes)
    }
}

/// Registers the figures read from the process at each scrape: [`TokioTasks`] for the
/// current runtime and [`HeapInUse`]. Call from within the runtime `serve` runs on.
pub fn register_process_collectors(registry: &mut Registry) {
    registry.register_collector(Box::new(TokioTasks(tokio::runtime::Handle::current())));
    registry.register_collector(Box::new(HeapInUse));
}

/// Encodes the registry in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status { code, ..Default::default() }))
    }

    #[test]
    fn reconcile_errors_are_labelled_by_a_small_set_of_causes() {
        let reason = |code| ReconcileErrorLabels::of(&api_error(code)).reason;
        assert_eq!(
            [409, 403, 404, 429, 500, 503, 422, 400].map(reason),
            ["conflict", "forbidden", "not_found", "throttled", "server_error", "server_error", "invalid", "invalid"]
        );
        let transport = kube::Error::LinesCodecMaxLineLengthExceeded;
        assert_eq!(ReconcileErrorLabels::of(&transport).reason, "transport");
        let seen: std::collections::BTreeSet<_> =
            [409, 403, 404, 429, 500, 400].map(reason).into_iter().chain(["transport"]).collect();
        assert_eq!(seen, ReconcileErrorLabels::REASONS.into_iter().collect(), "REASONS lists exactly these");
    }

    #[test]
    fn every_reconcile_error_reason_and_review_result_starts_at_zero() {
        let (_, registry) = Metrics::new();
        let text = encode(&registry);
        let reasons = ReconcileErrorLabels::REASONS.map(|r| format!("reconcile_errors_total{{reason=\"{r}\"}} 0"));
        let results = SarLabels::RESULTS.map(|r| format!("subject_access_reviews_total{{result=\"{r}\"}} 0"));
        let reads = AlertReadLabels::RESULTS.map(|r| format!("alert_reads_total{{result=\"{r}\"}} 0"));
        for line in reasons.iter().chain(&results).chain(&reads) {
            assert!(text.contains(&format!("node_maintenance_{line}")), "{line} in {text}");
        }
    }

    /// The value of the unlabelled series `name` in the encoded `text`.
    fn exported(text: &str, name: &str) -> Option<i64> {
        let line = text.lines().find(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ')))?;
        line.rsplit(' ').next().and_then(|v| v.parse().ok())
    }

    #[tokio::test]
    async fn tokio_tasks_are_read_at_each_scrape() {
        let (_, mut registry) = Metrics::new();
        register_process_collectors(&mut registry);
        let task = tokio::spawn(std::future::pending::<()>());
        let tasks = |text: &str| exported(text, "node_maintenance_tokio_alive_tasks");
        let with = tasks(&encode(&registry)).expect("the gauge is exported");
        task.abort();
        let _ = task.await;
        assert_eq!(tasks(&encode(&registry)), Some(with - 1), "one task fewer once it ended");
    }

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn heap_in_use_follows_what_the_program_holds() {
        let (_, mut registry) = Metrics::new();
        registry.register_collector(Box::new(HeapInUse));
        let heap = |text: &str| exported(text, "node_maintenance_heap_in_use_bytes");
        let before = heap(&encode(&registry)).expect("the gauge is exported");
        // 64 MiB, touched so it is really allocated; other tests' threads move the figure by far less.
        let held = vec![1u8; 64 << 20];
        let with = heap(&encode(&registry)).expect("the gauge is exported");
        assert!(with - before > 60 << 20, "{before} -> {with} with 64 MiB held");
        drop(std::hint::black_box(held));
        let after = heap(&encode(&registry)).expect("the gauge is exported");
        assert!(with - after > 60 << 20, "{with} -> {after} once freed");
    }

    #[test]
    fn reconcile_errors_are_counted_by_reason() {
        let (m, registry) = Metrics::new();
        m.reconcile_errors.get_or_create(&ReconcileErrorLabels { reason: "conflict" }).inc();
        let text = encode(&registry);
        assert!(text.contains("node_maintenance_reconcile_errors_total{reason=\"conflict\"} 1"), "{text}");
    }
}
