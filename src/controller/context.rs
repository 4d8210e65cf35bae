//! What the decisions and writes of a leadership term share: the client, the caches, the Event recorder, metrics,
//! switches, and the controller's in-memory state of one leadership term. Also the error
//! type of a job. The bottom of the controller's steps: they import it, and it
//! imports only the state files it owns, which import no module that imports it (checked by
//! `hack/module-cycles.py`).

use super::evacuation_memory::EvacuationMemory;
use super::eviction_memory::EvictionMemory;
use super::expectations::Expectations;
use super::pacer::Pacer;
use super::pass::{PassSources, ReportedPods, SharedPass};
use super::recorder::EventRecorder;
use crate::api::{Evacuation, NodeDisruptionBudget, NodeMaintenance};
use crate::cluster::alerts::PrometheusOptions;
use crate::cluster::cache::ClusterCache;
use crate::cluster::deployments::WorkloadCaches;
use crate::cluster::eviction_requests::{DEFAULT_REQUESTER, EvictionApiChoice, Watches};
use crate::cluster::pods::PodCache;
use crate::gates::AlertsRead;
use crate::metrics::Metrics;
use crate::planner::decide::events::MaintenanceEvent;
use crate::planner::wait::Gates;
use crate::planner::{PlannerOptions, PodPolicy};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Client;
use kube::runtime::reflector::Store;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Default of `--max-concurrent-writes`: enough to keep a drain bounded by the apiserver
/// rather than by our round trips, well below the apiserver's default of 200 mutating
/// requests in flight (docs/benchmarks.md, "Controller at scale").
pub const DEFAULT_MAX_CONCURRENT_WRITES: usize = 32;

/// Switches and pacing of the controller.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// `--skip-daemonset-pods`.
    pub skip_daemonset_pods: bool,
    /// Requeue interval while a drain is in progress or waiting on something.
    pub busy_requeue: Duration,
    /// Requeue interval when there is nothing to do (a safety net behind the watches).
    pub idle_requeue: Duration,
    /// `--max-concurrent-writes`: node writes and evictions in flight at once.
    pub max_concurrent_writes: usize,
    /// `--max-draining-nodes` (`None`: no limit).
    pub max_draining_nodes: Option<u32>,
    /// `--unmanaged-pods`.
    pub unmanaged_pods: PodPolicy,
    /// `--emptydir-pods`.
    pub emptydir_pods: PodPolicy,
    /// `--eviction-api`: whether EvictionRequests are used where the cluster serves them.
    pub eviction_api: EvictionApiChoice,
    /// `--eviction-requester`: `spec.requester` of our EvictionRequests.
    pub eviction_requester: String,
    /// `--evacuation`: evacuation by rollout of maintenances without `spec.evacuation`.
    pub evacuation: Evacuation,
    /// `--prometheus-url` and its companions: where the health gates read alerts.
    pub prometheus: PrometheusOptions,
}

impl ControllerOptions {
    /// The planner's switches among these options.
    pub fn planner(&self) -> PlannerOptions {
        PlannerOptions {
            skip_daemonset_pods: self.skip_daemonset_pods,
            unmanaged_pods: self.unmanaged_pods,
            emptydir_pods: self.emptydir_pods,
            max_draining_nodes: self.max_draining_nodes,
        }
    }
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            skip_daemonset_pods: false,
            busy_requeue: Duration::from_secs(2),
            idle_requeue: Duration::from_secs(300),
            max_concurrent_writes: DEFAULT_MAX_CONCURRENT_WRITES,
            max_draining_nodes: None,
            unmanaged_pods: PodPolicy::Evict,
            emptydir_pods: PodPolicy::Evict,
            eviction_api: EvictionApiChoice::Auto,
            eviction_requester: DEFAULT_REQUESTER.to_owned(),
            evacuation: Evacuation::Annotated,
            prometheus: PrometheusOptions::default(),
        }
    }
}

/// What the decisions and writes of a leadership term share: the client, the caches, Events,
/// metrics, eviction memory.
pub struct Context {
    /// Client for the writes.
    pub client: Client,
    /// Node cache.
    pub nodes: Store<Node>,
    /// NodeMaintenance cache.
    pub maintenances: Store<NodeMaintenance>,
    /// Pod cache (what the planner reads of each pod).
    pub pods: PodCache,
    /// Event recorder, renewed when idle.
    pub recorder: EventRecorder,
    /// Metric families.
    pub metrics: Metrics,
    /// Switches.
    pub options: ControllerOptions,
    /// Outcomes of earlier evictions.
    pub evictions: Arc<EvictionMemory>,
    /// (maintenance, pod UID) pairs whose "not evicted" Event was already emitted.
    pub reported_pods: Arc<ReportedPods>,
    /// The drain planning pass, kept while nothing it read changed.
    pub pass: SharedPass,
    /// The bound and the 429 pause of the writes.
    pub pacer: Pacer,
    /// NodeDisruptionBudget cache.
    pub budgets: Store<NodeDisruptionBudget>,
    /// Node writes not yet in the Node cache: the next decision waits for them.
    pub expectations: Expectations,
    /// Our EvictionRequests and their Evictions, watched when the cluster serves the API and
    /// `--eviction-api` allows it: evictions then go through them; `None`:
    /// the Eviction API.
    pub eviction_requests: Option<Watches>,
    /// Evacuation by rollout: its caches and memory.
    pub evacuator: EvacuationMemory,
    /// PodDisruptionBudgets (the evacuator's cache): the evictions they record as accepted
    /// that were not carried out are finished.
    pub pdbs: Store<PodDisruptionBudget>,
    /// The last answer of Prometheus for the health gates ([`super::alerts`]).
    pub alerts: tokio::sync::watch::Receiver<Arc<AlertsRead>>,
}

impl Context {
    /// What a planning pass reads and prunes, as shared handles ([`SharedPass::decision`]
    /// runs it off the async workers); `gated`: why no new eviction may start on which node.
    pub fn pass_sources(&self, gated: Arc<BTreeMap<String, Gates>>) -> PassSources {
        PassSources {
            gated,
            nodes: self.nodes.clone(),
            maintenances: self.maintenances.clone(),
            pods: self.pods.clone(),
            evictions: self.evictions.clone(),
            reported_pods: self.reported_pods.clone(),
            eviction_requests: self.eviction_requests.clone(),
            options: self.options.planner(),
            duration: self.metrics.planning_pass_duration.clone(),
        }
    }

    /// Publishes `event`, one of the catalogue ([`crate::planner::decide::events`]), about `nm`
    /// through [`Context::pacer`] (a 429 pause holds it back like every other write). Returns
    /// nothing: best effort, a failure is logged and never fails the job.
    pub async fn event(&self, nm: &NodeMaintenance, event: MaintenanceEvent) {
        let ev = event.into_event();
        if let Err(e) =
            self.pacer.run(self.recorder.recorder().publish(&ev, &kube::Resource::object_ref(nm, &()))).await
        {
            tracing::warn!(reason = %ev.reason, error = %e, "could not publish Event");
        }
    }
}

/// A write of the controller, named by what it changes on which object: what a failed
/// job reports.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Write {
    /// Adding the completion finalizer to the maintenance (SPEC 4.2).
    #[error("adding the finalizer")]
    AddFinalizer,
    /// Removing the completion finalizer once Complete is recorded (SPEC 4.2).
    #[error("removing the finalizer")]
    RemoveFinalizer,
    /// The maintenance's status.
    #[error("writing status")]
    Status,
    /// The maintenance's status recording Complete on deletion (SPEC 4.2).
    #[error("recording Complete")]
    RecordComplete,
    /// Holding and cordoning a node (SPEC 4.1).
    #[error("cordoning node {0}")]
    Cordon(String),
    /// Releasing a node: holders annotation and cordon (SPEC 4.1 Complete).
    #[error("releasing node {0}")]
    Release(String),
    /// The drain targets published on a node before the evictions they allow (SPEC 4.3).
    #[error("publishing the drain targets of {0}")]
    DrainTargets(String),
    /// The draining taint before DaemonSet evictions (SPEC 4.3).
    #[error("tainting node {0}")]
    Taint(String),
    /// Removing the draining taint on the way out.
    #[error("removing the draining taint from {0}")]
    Untaint(String),
    /// Withdrawing our EvictionRequests on a released node (SPEC 4.5).
    #[error("withdrawing the EvictionRequests on {0}")]
    WithdrawEvictionRequests(String),
    /// A node's KEP-5683 conditions (SPEC 4.3).
    #[error("setting the conditions of {0}")]
    NodeConditions(String),
    /// What a maintenance that no longer exists left on a node: our draining taint and
    /// status annotation.
    #[error("removing what a deleted maintenance left on node {0} (draining taint, status annotation)")]
    Leftovers(String),
    /// A node's `MaintenancePlanned` condition (SPEC 4.5).
    #[error("writing the MaintenancePlanned condition of node {0}")]
    MaintenancePlanned(String),
    /// A NodeDisruptionBudget's status (SPEC 4.5).
    #[error("writing the status of NodeDisruptionBudget {0}")]
    BudgetStatus(String),
}

/// A failed job: which write failed and the API's answer. Counted in
/// `node_maintenance_reconcile_errors_total{reason}` by the answer
/// ([`crate::metrics::ReconcileErrorLabels::of`]).
#[derive(Debug, thiserror::Error)]
#[error("{write}: {source}")]
pub struct ReconcileError {
    /// The write that failed.
    pub write: Write,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The result of a job's step.
pub(super) type Result<T> = std::result::Result<T, ReconcileError>;

/// Wraps an API error with the write that failed.
pub(super) fn ctx_err(write: Write) -> impl FnOnce(kube::Error) -> ReconcileError {
    move |source| ReconcileError { write, source }
}

/// The controller's own watch caches of one leadership term, beside the webhook's
/// [`ClusterCache`].
pub struct TermCaches {
    /// What the planner reads of every pod.
    pub pods: PodCache,
    /// Deployments and PodDisruptionBudgets, for evacuation by rollout.
    pub workloads: WorkloadCaches,
    /// The term's eviction memory, shared with the PodDisruptionBudget watch (a budget that
    /// refused one of our evictions wakes the loop when it allows a disruption again).
    pub evictions: Arc<EvictionMemory>,
    /// The firing alerts, kept fresh by [`super::alerts::keep_fresh`].
    pub alerts: tokio::sync::watch::Receiver<Arc<AlertsRead>>,
    /// The Pod watch's change signal (Pods on held nodes): a planning pass is planned afresh
    /// after it.
    pub pod_changes: tokio::sync::watch::Receiver<()>,
}

/// Builds the context of a leadership term: the Node and NodeMaintenance stores come from
/// `cache`, `eviction_requests` are the watches of our EvictionRequests where they are used.
pub fn context(
    client: Client,
    cache: &ClusterCache,
    caches: TermCaches,
    recorder: EventRecorder,
    metrics: Metrics,
    options: ControllerOptions,
    eviction_requests: Option<Watches>,
) -> Context {
    Context {
        client,
        nodes: cache.node_store(),
        budgets: cache.budget_store(),
        expectations: Expectations::default(),
        maintenances: cache.maintenance_store(),
        pods: caches.pods,
        recorder,
        metrics,
        evictions: caches.evictions,
        reported_pods: Arc::default(),
        pass: SharedPass::new(vec![cache.node_changes(), caches.pod_changes]),
        pacer: Pacer::new(options.max_concurrent_writes),
        eviction_requests,
        pdbs: caches.workloads.pdbs.clone(),
        alerts: caches.alerts,
        evacuator: EvacuationMemory::new(caches.workloads),
        options,
    }
}
