//! Prometheus metrics (SPEC 4.4), served on the plain-HTTP metrics port. Every family the
//! program exports is declared here, so names and labels live in one place.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of an admission request.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// `mutate`, `validate` or `validate-node`.
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

/// Labels of an eviction.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// `accepted`, `blocked_by_pdb`, `intercepted`, `not_found` or `error`.
    pub result: &'static str,
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
    /// `node_maintenance_reconciles_total`.
    pub reconciles: Counter,
    /// `node_maintenance_reconcile_errors_total`.
    pub reconcile_errors: Counter,
    /// `node_maintenance_reconcile_duration_seconds`.
    pub reconcile_duration: Histogram,
    /// `node_maintenance_evictions_total`.
    pub evictions: Family<EvictionLabels, Counter>,
    /// `node_maintenance_nodes_under_maintenance`.
    pub nodes_under_maintenance: Gauge,
    /// `node_maintenance_pods_pending_eviction`.
    pub pods_pending_eviction: Gauge,
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
            reconciles: Counter::default(),
            reconcile_errors: Counter::default(),
            reconcile_duration: latency_histogram(),
            evictions: Family::default(),
            nodes_under_maintenance: Gauge::default(),
            pods_pending_eviction: Gauge::default(),
        };
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
        r.register("reconciles", "NodeMaintenance reconciles", m.reconciles.clone());
        r.register("reconcile_errors", "NodeMaintenance reconciles that failed", m.reconcile_errors.clone());
        r.register_with_unit(
            "reconcile_duration",
            "Time of one reconcile",
            prometheus_client::registry::Unit::Seconds,
            m.reconcile_duration.clone(),
        );
        r.register("evictions", "Evictions requested, by result", m.evictions.clone());
        r.register("nodes_under_maintenance", "Nodes held by an active maintenance", m.nodes_under_maintenance.clone());
        r.register("pods_pending_eviction", "Targeted pods not yet evicted", m.pods_pending_eviction.clone());
        (m, r)
    }
}

/// Encodes the registry in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}
