//! One reconcile of one NodeMaintenance (SPEC 4): decide from the caches, then carry out
//! the decision with the smallest writes. Every step is idempotent and reads its state from
//! the API objects (node annotations, status), so a restart at any point converges.

use super::effects::{self, event, set_draining_taint, set_finalizer, write_status};
use super::evict::{EvictionMemory, evict};
use super::gauges::{self, PendingSeries};
use super::holders::{Holders, is_unschedulable};
use super::node_state::{self, NodePhase};
use super::nodes::{cordon, held_by, mark_held, release_all, release_unselected};
use super::status::{self, record_stage, recorded};
use crate::api::{FINALIZER, NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceStatus, Stage};
use crate::cluster::pods::PodCache;
use crate::metrics::{EvictionLabels, Metrics, ReconcileErrorLabels};
use crate::planner::{self, DrainPlan, MaintenanceInput, NodeInput, PlannerInput, PlannerOptions, selector_label_keys};
use crate::selector::NodeMatcher;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Switches and pacing of the controller.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// `--skip-daemonset-pods`.
    pub skip_daemonset_pods: bool,
    /// Requeue interval while a drain is in progress or waiting on something.
    pub busy_requeue: Duration,
    /// Requeue interval when there is nothing to do (a safety net behind the watches).
    pub idle_requeue: Duration,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            skip_daemonset_pods: false,
            busy_requeue: Duration::from_secs(2),
            idle_requeue: Duration::from_secs(300),
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
    /// Which maintenances have a `pods_pending_eviction` series.
    pub pending_series: PendingSeries,
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
    if nm.spec.stage.is_active() {
        set_finalizer(&ctx.client, nm, true).await.map_err(ctx_err("adding the finalizer"))?;
        cordon(nm, ctx, &selected).await?;
        release_unselected(nm, ctx, &selected, &now).await?;
        st.stage_statuses = record_stage(&st.stage_statuses, Stage::Cordon, &now);
        let cordoned = selected.iter().all(|n| held_by(n, &name) && is_unschedulable(n));
        if nm.spec.stage == Stage::Drain && cordoned && recorded(&recorded_stages, Stage::Cordon) {
            st.stage_statuses = record_stage(&st.stage_statuses, Stage::Drain, &now);
            let (drain_plan, nodes, blockers) = drain(nm, ctx, &selected, &now).await?;
            st.node_statuses = nodes;
            in_the_way = blockers;
            plan = drain_plan.maintenance(&name).cloned();
            st.drain_status = plan.as_ref().map(status::drain_status);
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
    if plan.as_ref().is_some_and(|p| p.drained) && previous_drained.is_none_or(|c| c.status != "True") {
        event(&ctx.recorder, nm, None, false, "Drained", format!("All {} selected nodes are drained.", selected.len()))
            .await;
    }
    write_status(&ctx.client, nm, &st).await.map_err(ctx_err("writing status"))?;
    Ok(Action::requeue(requeue))
}

/// Joins the present parts of a blocker description with `; `.
fn join_parts(parts: impl IntoIterator<Item = Option<String>>) -> Option<String> {
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Nodes the maintenance's selector matches now (an invalid selector matches none).
fn selected_nodes(nm: &NodeMaintenance, nodes: &Store<Node>) -> Vec<Arc<Node>> {
    match NodeMatcher::compile(&nm.spec.node_selector) {
        Some(m) => nodes.state().into_iter().filter(|n| m.matches(n)).collect(),
        None => Vec::new(),
    }
}

/// The planner input over every Drain-stage maintenance (SPEC 4.3: intersecting
/// maintenances hold each other back, so they are planned together), built from the caches.
/// `in_progress(uid)` says whether an eviction of that pod was already accepted. Also what
/// `benches/controller_rss.rs` times.
pub fn planner_input(
    nodes: &Store<Node>,
    maintenances: &Store<NodeMaintenance>,
    pods: &PodCache,
    in_progress: impl Fn(&str) -> bool,
    options: PlannerOptions,
) -> PlannerInput {
    let all_nodes = nodes.state();
    let mut drains = Vec::new();
    let mut node_names = BTreeSet::new();
    for m in
        maintenances.state().iter().filter(|m| m.spec.stage == Stage::Drain && m.metadata.deletion_timestamp.is_none())
    {
        let Some(matcher) = NodeMatcher::compile(&m.spec.node_selector) else { continue };
        let nodes: Vec<String> = all_nodes.iter().filter(|n| matcher.matches(n)).map(|n| n.name_any()).collect();
        node_names.extend(nodes.iter().cloned());
        drains.push(MaintenanceInput {
            name: m.name_any(),
            created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
            drain_plan: m.spec.drain_plan.clone(),
            drain_plan_index: m.status.as_ref().and_then(|s| s.drain_status.as_ref()).map_or(0, |d| d.drain_plan_index),
            nodes,
        });
    }
    let nodes: Vec<NodeInput> = all_nodes
        .iter()
        .filter(|n| node_names.contains(&n.name_any()))
        .map(|n| NodeInput {
            name: n.name_any(),
            reached: node_state::reached_targets(n),
            draining_taint: node_state::has_draining_taint(n),
        })
        .collect();
    // Pod labels matter only to podSelectors: views keep just the keys those mention.
    let label_keys = selector_label_keys(
        drains.iter().flat_map(|m| &m.drain_plan).chain(nodes.iter().flat_map(|n: &NodeInput| &n.reached)),
    );
    let pods = pods.views(|n| node_names.contains(n), in_progress, Some(&label_keys));
    PlannerInput { maintenances: drains, pods, nodes, options }
}

/// How many pods a blocker summary names per cause.
const NAMED_BLOCKERS: usize = 5;

/// SPEC 4.3 Drain: plan every Drain maintenance together, then for this maintenance's nodes
/// persist the targets (the floor) before evicting, taint before DaemonSet evictions, set
/// the Node conditions, and evict. Returns the whole plan, this maintenance's node statuses
/// and a bounded summary of what is in the way on all its nodes, by cause.
async fn drain(
    nm: &NodeMaintenance,
    ctx: &Context,
    selected: &[Arc<Node>],
    now: &Time,
) -> Result<(DrainPlan, Vec<NodeMaintenanceNodeStatus>, Option<String>)> {
    let name = nm.name_any();
    let options = PlannerOptions { skip_daemonset_pods: ctx.options.skip_daemonset_pods };
    let input = planner_input(&ctx.nodes, &ctx.maintenances, &ctx.pods, |uid| ctx.evictions.in_progress(uid), options);
    let plan = planner::plan(&input);
    for w in &plan.warnings {
        tracing::warn!(maintenance = %name, warning = %w, "drain planner");
    }
    let live_uids: HashSet<&str> = input.pods.iter().map(|p| p.uid.as_str()).collect();
    ctx.evictions.retain(|uid| live_uids.contains(uid));
    let mut statuses = Vec::with_capacity(selected.len());
    let mut all_blocked = Vec::new();
    let mut refused = BTreeSet::new();
    for node in selected {
        let node_name = node.name_any();
        let Some(np) = plan.node(&node_name) else { continue };
        let evictions_refused = ctx.evictions.blockers(&node_name);
        refused.extend(evictions_refused.clone());
        all_blocked.extend(np.blocked.iter().cloned());
        let extra = join_parts([evictions_refused, planner::blocked_summary(&np.blocked, NAMED_BLOCKERS)]);
        let published = status::node_status(np, extra.as_deref());
        if node_state::published_status(node).as_ref() != Some(&published) {
            effects::publish_node_status(&ctx.client, &node_name, Some(&published))
                .await
                .map_err(ctx_err(format!("publishing the drain targets of {node_name}")))?;
        }
        if np.needs_daemonset_taint && !node_state::has_draining_taint(node) {
            set_draining_taint(&ctx.client, node, true).await.map_err(ctx_err(format!("tainting node {node_name}")))?;
        }
        let holders =
            Holders::of(node).map(|h| h.maintenances.into_iter().collect::<Vec<_>>().join(", ")).unwrap_or_default();
        let phase = if np.drained { NodePhase::Drained } else { NodePhase::Draining };
        let conditions = node_state::conditions(node, phase, &holders, now);
        if !node_state::conditions_current(node, &conditions) {
            effects::set_node_conditions(&ctx.client, &node_name, &conditions)
                .await
                .map_err(ctx_err(format!("setting the conditions of {node_name}")))?;
        }
        evict_pods(nm, ctx, node, &np.evict).await;
        statuses.push(published);
    }
    announce_fast_forwards(nm, ctx, &plan).await;
    let refused =
        (!refused.is_empty()).then(|| refused.into_iter().take(NAMED_BLOCKERS).collect::<Vec<_>>().join("; "));
    let in_the_way = join_parts([refused, planner::blocked_summary(&all_blocked, NAMED_BLOCKERS)]);
    Ok((plan, statuses, in_the_way))
}

async fn evict_pods(nm: &NodeMaintenance, ctx: &Context, node: &Node, pods: &[planner::PodRef]) {
    let node_name = node.name_any();
    for pod in pods {
        if !ctx.evictions.may_try(&pod.uid, Instant::now()) {
            continue;
        }
        let outcome = evict(&ctx.client, pod).await;
        ctx.metrics.evictions.get_or_create(&EvictionLabels { result: outcome.label() }).inc();
        if let super::evict::EvictionOutcome::BlockedByPdb(pdb) = &outcome {
            event(
                &ctx.recorder,
                nm,
                Some(node),
                true,
                "EvictionBlocked",
                format!(
                    "Eviction of {}/{} on {node_name} is blocked by PodDisruptionBudget {}/{pdb}; retrying.",
                    pod.namespace, pod.name, pod.namespace
                ),
            )
            .await;
        }
        tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), node = %node_name, outcome = outcome.label(), "eviction");
        ctx.evictions.record(pod, &node_name, outcome, Instant::now());
    }
}

/// One Event per (maintenance, node) fast-forward (SPEC 4.3, KEP "maintenance-c").
async fn announce_fast_forwards(nm: &NodeMaintenance, ctx: &Context, plan: &DrainPlan) {
    let name = nm.name_any();
    for ff in plan.fast_forwards.iter().filter(|f| f.maintenance == name) {
        let fresh =
            ctx.announced.lock().map(|mut a| a.insert((ff.maintenance.clone(), ff.node.clone()))).unwrap_or(false);
        if fresh {
            event(
                &ctx.recorder,
                nm,
                None,
                false,
                "FastForwarded",
                format!(
                    "Node {} already drained further than {name}'s plan; its drain targets there are fast-forwarded.",
                    ff.node
                ),
            )
            .await;
        }
    }
}

/// Builds a context (used by the runner and by tests).
pub fn context(
    client: Client,
    nodes: Store<Node>,
    maintenances: Store<NodeMaintenance>,
    pods: PodCache,
    recorder: Recorder,
    metrics: Metrics,
    options: ControllerOptions,
) -> Context {
    Context {
        client,
        nodes,
        maintenances,
        pods,
        recorder,
        metrics,
        options,
        evictions: EvictionMemory::default(),
        announced: Mutex::new(HashSet::new()),
        pending_series: PendingSeries::default(),
    }
}
