//! One reconcile of one NodeMaintenance (SPEC 4): decide from the caches, then carry out
//! the decision with the smallest writes. Every step is idempotent and reads its state from
//! the API objects (node annotations, status), so a restart at any point converges.

use super::deadline;
use super::drain::{drain, evict_all};
use super::effects::{event, set_finalizer, write_status};
use super::evacuate::{self, Evacuator};
use super::evict::EvictionMemory;
use super::eviction_requests::{DEFAULT_REQUESTER, EvictionApiChoice};
use super::gauges::{self, PendingSeries};
use super::holders::is_unschedulable;
use super::nodes::{cordon, held_by, mark_held, release_all, release_unselected};
use super::pass::SharedPass;
use super::status::{self, record_stage, recorded};
use super::writes::Writes;
use crate::api::{Evacuation, FINALIZER, NodeMaintenance, NodeMaintenanceStatus, Stage};
use crate::cluster::cache::ClusterCache;
use crate::cluster::deployments::WorkloadCaches;
use crate::cluster::pods::PodCache;
use crate::metrics::{Metrics, ReconcileErrorLabels};
use crate::planner::{PlannerOptions, PodPolicy};
use crate::selector::NodeMatcher;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::lifecycle::v1alpha1::EvictionRequest;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default of `--max-concurrent-writes`: enough to keep a drain bounded by the apiserver
/// rather than by our round trips, well below the apiserver's default of 200 mutating
/// requests in flight (docs/benchmarks.md, "Controller at scale").
pub const DEFAULT_MAX_CONCURRENT_WRITES: usize = 32;

/// Requeue when a Drain reconcile left due evictions for the next round.
const MORE_EVICTIONS_REQUEUE: Duration = Duration::from_millis(100);

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
        }
    }
}

/// What every reconcile shares: the client, the caches, Events, metrics, eviction memory.
pub struct Context {
    /// Client for the writes.
    pub client: Client,
    /// Node cache.
    pub nodes: Store<Node>,
    /// NodeMaintenance cache.
    pub maintenances: Store<NodeMaintenance>,
    /// Pod cache (what the planner reads of each pod).
    pub pods: PodCache,
    /// Event recorder.
    pub recorder: Recorder,
    /// Metric families.
    pub metrics: Metrics,
    /// Switches.
    pub options: ControllerOptions,
    /// Outcomes of earlier evictions.
    pub evictions: EvictionMemory,
    /// (maintenance, node) pairs whose fast-forward Event was already emitted.
    pub announced: Mutex<HashSet<(String, String)>>,
    /// (maintenance, pod UID) pairs whose "not evicted" Event was already emitted (issue 14).
    pub reported_pods: Mutex<HashSet<(String, Arc<str>)>>,
    /// Which maintenances have a `pods_pending_eviction` series.
    pub pending_series: PendingSeries,
    /// The planning pass shared by the reconciles of one trigger.
    pub pass: SharedPass,
    /// The bound and the 429 pause of the writes.
    pub writes: Writes,
    /// Our EvictionRequests, watched when the cluster serves the API and `--eviction-api`
    /// allows it: evictions then go through them (issue 14); `None`: the Eviction API.
    pub eviction_requests: Option<Store<EvictionRequest>>,
    /// Evacuation by rollout (issue 21): its caches and memory.
    pub evacuator: Evacuator,
}

/// A failed reconcile: which write failed and why.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub struct ReconcileError {
    /// The write that failed (`cordoning node worker-1`).
    pub what: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The result of a reconcile step.
pub(super) type Result<T> = std::result::Result<T, ReconcileError>;

/// Wraps an API error with the name of the write that failed.
pub(super) fn ctx_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ReconcileError {
    let what = what.into();
    move |source| ReconcileError { what, source }
}

/// Reconciles one NodeMaintenance (SPEC 4.1 to 4.3). Returns when to look again.
///
/// # Errors
/// [`ReconcileError`] naming the write that failed; the controller retries with backoff.
pub async fn reconcile(nm: Arc<NodeMaintenance>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    ctx.metrics.reconciles.inc();
    let result = reconcile_inner(&nm, &ctx).await;
    ctx.metrics.reconcile_duration.observe(started.elapsed().as_secs_f64());
    if let Err(e) = &result {
        ctx.metrics.reconcile_errors.get_or_create(&ReconcileErrorLabels::of(&e.source)).inc();
        tracing::warn!(maintenance = %nm.name_any(), error = %e, "reconcile failed");
    }
    result
}

async fn reconcile_inner(nm: &NodeMaintenance, ctx: &Context) -> Result<Action> {
    let name = nm.name_any();
    let now = status::now();
    let recorded_stages = nm.status.as_ref().map(|s| s.stage_statuses.clone()).unwrap_or_default();
    // Deletion first: once the finalizer is gone nothing may cordon a node again (SPEC 4.2).
    // kube-runtime's `finalizer` helper is not used: it adds the finalizer before every
    // apply, but SPEC 4.2 adds it only outside Idle (an Idle maintenance holds nothing), and
    // its cleanup cannot record `Complete` in the status before letting go.
    if nm.metadata.deletion_timestamp.is_some() {
        gauges::update(ctx, &name, None);
        if !nm.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(Action::await_change());
        }
        release_all(nm, ctx, &now).await?;
        let selected = selected_nodes(nm, &ctx.nodes).len();
        let st = status::complete_status(nm.status.as_ref(), nm.metadata.generation, selected, &now);
        write_status(&ctx.client, nm, &st).await.map_err(ctx_err("recording Complete"))?;
        set_finalizer(&ctx.client, nm, false).await.map_err(ctx_err("removing the finalizer"))?;
        tracing::info!(maintenance = %name, "maintenance deleted; nodes released");
        return Ok(Action::await_change());
    }
    let selected = selected_nodes(nm, &ctx.nodes);
    if nm.spec.stage == Stage::Complete {
        set_finalizer(&ctx.client, nm, true).await.map_err(ctx_err("adding the finalizer"))?;
        release_all(nm, ctx, &now).await?;
        gauges::update(ctx, &name, None);
        let st = status::complete_status(nm.status.as_ref(), nm.metadata.generation, selected.len(), &now);
        write_status(&ctx.client, nm, &st).await.map_err(ctx_err("writing status"))?;
        return Ok(Action::requeue(ctx.options.idle_requeue));
    }
    let mut st = NodeMaintenanceStatus {
        observed_generation: nm.metadata.generation,
        stage_statuses: recorded_stages.clone(),
        selected_nodes: Some(i32::try_from(selected.len()).unwrap_or(i32::MAX)),
        ..Default::default()
    };
    let previous_drained = nm.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == status::DRAINED));
    let mut requeue = ctx.options.idle_requeue;
    let mut plan = None;
    let mut in_the_way = None;
    let mut evictions = Vec::new();
    let mut evacuation = evacuate::EvacuationPlan::default();
    if nm.spec.stage.is_active() {
        set_finalizer(&ctx.client, nm, true).await.map_err(ctx_err("adding the finalizer"))?;
        cordon(nm, ctx, &selected).await?;
        release_unselected(nm, ctx, &selected, &now).await?;
        st.stage_statuses = record_stage(&st.stage_statuses, Stage::Cordon, &now);
        let cordoned = selected.iter().all(|n| held_by(n, &name) && is_unschedulable(n));
        if nm.spec.stage == Stage::Drain && cordoned && recorded(&recorded_stages, Stage::Cordon) {
            st.stage_statuses = record_stage(&st.stage_statuses, Stage::Drain, &now);
            let outcome = drain(nm, ctx, &selected, &now).await?;
            st.node_statuses = outcome.node_statuses;
            in_the_way = outcome.in_the_way;
            evictions = outcome.evictions;
            evacuation = outcome.evacuation;
            st.evacuations = evacuation.statuses.clone();
            plan = outcome.decision.maintenance(&name).cloned();
            let stored = nm.status.as_ref().and_then(|s| s.drain_status.as_ref());
            st.drain_status = plan.as_ref().map(|p| status::drain_status(p, stored, &now));
            requeue = if plan.as_ref().is_some_and(|p| p.drained) {
                ctx.options.idle_requeue
            } else {
                ctx.options.busy_requeue
            };
        } else {
            mark_held(nm, ctx, &selected, &now).await?;
            let message = if cordoned { "Cordoned." } else { "Cordoning." };
            st.node_statuses = selected.iter().map(|n| status::idle_node_status(&n.name_any(), message)).collect();
            if !cordoned || nm.spec.stage == Stage::Drain {
                requeue = ctx.options.busy_requeue;
            }
        }
    }
    gauges::update(ctx, &name, plan.as_ref().map(|p| p.pods_pending_eviction_request));
    st.conditions = vec![status::drained_condition(
        previous_drained,
        nm.spec.stage,
        plan.as_ref(),
        in_the_way.as_deref(),
        nm.metadata.generation,
        &now,
    )];
    if nm.spec.stage == Stage::Drain {
        requeue = deadline::report(&nm.spec, &mut st, &now, requeue);
    }
    if plan.as_ref().is_some_and(|p| p.drained) && previous_drained.is_none_or(|c| c.status != "True") {
        event(&ctx.recorder, nm, None, false, "Drained", format!("All {} selected nodes are drained.", selected.len()))
            .await;
    }
    write_status(&ctx.client, nm, &st).await.map_err(ctx_err("writing status"))?;
    // After the write: a failed write reports the timeout again on the next try.
    if let Some(c) = st.conditions.first().filter(|c| deadline::newly_timed_out(previous_drained, Some(c))) {
        ctx.metrics.drain_timeouts.inc();
        event(&ctx.recorder, nm, None, true, deadline::DRAIN_TIMED_OUT, deadline::event_note(&c.message)).await;
    }
    let stored_evacuations = nm.status.as_ref().map(|s| s.evacuations.as_slice()).unwrap_or_default();
    evacuate::carry_out(nm, ctx, &evacuation, stored_evacuations, &now).await;
    if evict_all(nm, ctx, &evictions).await {
        // More are due: the next round right away (the status of this one is out).
        return Ok(Action::requeue(MORE_EVICTIONS_REQUEUE));
    }
    Ok(Action::requeue(requeue))
}

/// Nodes the maintenance's selector matches now (an invalid selector matches none).
pub(super) fn selected_nodes(nm: &NodeMaintenance, nodes: &Store<Node>) -> Vec<Arc<Node>> {
    match NodeMatcher::compile(&nm.spec.node_selector) {
        Some(m) => nodes.state().into_iter().filter(|n| m.matches(n)).collect(),
        None => Vec::new(),
    }
}

/// The controller's own watch caches of one leadership term, beside the webhook's
/// [`ClusterCache`].
pub struct Watches {
    /// What the planner reads of every pod.
    pub pods: PodCache,
    /// Deployments and PodDisruptionBudgets, for evacuation by rollout (issue 21).
    pub workloads: WorkloadCaches,
}

/// Builds the context of a leadership term: the Node and NodeMaintenance stores come from
/// `cache`, `eviction_requests` is the watch of our EvictionRequests where they are used.
pub fn context(
    client: Client,
    cache: &ClusterCache,
    watches: Watches,
    recorder: Recorder,
    metrics: Metrics,
    options: ControllerOptions,
    eviction_requests: Option<Store<EvictionRequest>>,
) -> Context {
    Context {
        client,
        nodes: cache.node_store(),
        maintenances: cache.maintenance_store(),
        pods: watches.pods,
        recorder,
        metrics,
        evictions: EvictionMemory::default(),
        announced: Mutex::new(HashSet::new()),
        reported_pods: Mutex::new(HashSet::new()),
        pending_series: PendingSeries::default(),
        pass: SharedPass::default(),
        writes: Writes::new(options.max_concurrent_writes),
        eviction_requests,
        evacuator: Evacuator::new(watches.workloads),
        options,
    }
}
