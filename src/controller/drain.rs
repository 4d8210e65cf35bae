//! The Drain step of a reconcile (SPEC 4.3): the planning pass over every draining
//! maintenance (shared: [`super::pass`]), and carrying
//! out this maintenance's part of the decision on its nodes, in parallel within
//! `--max-concurrent-writes`: the published targets (the floor) before evicting, the
//! draining taint before DaemonSet evictions, the KEP-5683 Node conditions, evictions, and
//! fast-forward Events.

use super::context::{Context, Result, Write, ctx_err};
use super::effects::{self, set_draining_taint};
use super::evacuate::{self, EvacuationPlan};
use super::events::MaintenanceEvent;
use super::evict::{EvictionOutcome, evict};
use super::eviction_requests;
use super::half_applied::{self, Recorded};
use super::memory::locked;
use super::nodes::conditions::NodePhase;
use super::nodes::set_conditions;
use super::responders;
use super::status;
use crate::api::node::{has_draining_taint, published_status};
use crate::api::{NodeMaintenance, NodeMaintenanceNodeStatus};
use crate::metrics::EvictionLabels;
use crate::planner::from_cluster::eviction_gates;
use crate::planner::holds::Wait;
use crate::planner::{self, DrainDecision, EvictionRisk, NodePlan};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// How many pods a blocker summary names per cause.
const NAMED_BLOCKERS: usize = 5;

/// What one Drain step of one maintenance produced.
pub struct DrainOutcome {
    /// The decision of the planning pass over every Drain maintenance.
    pub decision: Arc<DrainDecision>,
    /// This maintenance's node statuses by node name, one per held node the pass covered,
    /// each with whether the node is drained.
    pub node_statuses: BTreeMap<String, (NodeMaintenanceNodeStatus, bool)>,
    /// A bounded summary of what is in the way on all its nodes, by cause; `None` if nothing.
    pub in_the_way: Option<String>,
    /// The evictions to request ([`evict_all`]) once the status of this pass is published:
    /// targeted pods on nodes whose targets and conditions were written, less those a
    /// rollout moves.
    pub evictions: Vec<Eviction>,
    /// Evacuation by rollout: rollouts to start and their status.
    pub evacuation: EvacuationPlan,
    /// The earliest instant ahead at which a wait for a pod left to finish ends on one of its
    /// nodes (SPEC 4.6): the reconcile must run again then, as that pod may have to be evicted.
    pub wait_deadline: Option<Timestamp>,
    /// Why no new eviction may start on which of its nodes (a pause, a closed gate before the
    /// node's drain started; SPEC 4.6), by node name.
    pub gated: BTreeMap<String, String>,
}

/// One eviction to request.
pub struct Eviction {
    /// The node the pod runs on.
    pub node: Arc<Node>,
    /// The pod.
    pub pod: planner::PodRef,
    /// What the eviction loses: each one gets a Warning Event once it is accepted.
    pub risks: Vec<EvictionRisk>,
}

/// SPEC 4.3 Drain: the shared planning pass over every Drain maintenance
/// ([`super::pass::SharedPass`]; no new eviction on nodes a pause or a closed gate of
/// `node_gates` stops, SPEC 4.6), then for this maintenance's nodes, concurrently within
/// `--max-concurrent-writes`: persist the targets (the floor), taint before DaemonSet
/// evictions and set the Node conditions. Returns the statuses and the evictions to request
/// on every node whose writes succeeded: the caller publishes the status first, so progress
/// shows while the evictions run ([`evict_all`]).
///
/// # Errors
/// [`super::context::ReconcileError`] naming a node write that failed; the other nodes'
/// writes are still carried out.
pub async fn drain(
    nm: &NodeMaintenance,
    ctx: &Context,
    held: &[Arc<Node>],
    node_gates: &BTreeMap<String, Wait>,
    now: &Time,
) -> Result<DrainOutcome> {
    eviction_requests::retry_failed(ctx).await;
    let gated = eviction_gates(&ctx.maintenances.state(), &ctx.nodes.state(), node_gates);
    let decision = ctx.pass.decision(ctx.pass_sources(gated.clone())).await;
    let evacuation = evacuate::plan(nm, ctx, &decision, held);
    let mut statuses = BTreeMap::new();
    let mut all_blocked = Vec::new();
    let mut all_waiting = Vec::new();
    let mut wait_deadline: Option<Timestamp> = None;
    let mut refused = BTreeSet::new();
    let mut work = Vec::new();
    for node in held {
        let node_name = node.name_any();
        let Some(np) = decision.node(&node_name) else { continue };
        let responding = ctx.eviction_requests.as_ref().and_then(|w| responders::progress(w, &node_name));
        let evictions_refused = join_parts([ctx.evictions.blockers(&node_name), responding]);
        refused.extend(evictions_refused.clone());
        all_blocked.extend(np.blocked.iter().cloned());
        all_waiting.extend(np.waiting_for_completion.iter().cloned());
        wait_deadline = wait_deadline.into_iter().chain(np.wait_deadline).min();
        let extra = join_parts([
            evictions_refused,
            evacuation.note(&node_name),
            planner::blocked_summary(&np.blocked, NAMED_BLOCKERS),
            planner::waiting_summary(&np.waiting_for_completion, NAMED_BLOCKERS),
        ]);
        let mut published = status::node_status(np, extra.as_deref());
        // The drain starts on a node when it may first evict (SPEC 4.6: the start of a
        // waitForCompletion timeout; gates no longer stop it after). A gated node with
        // nothing to evict (only pods left to finish, say) has not started: its wait's
        // timeout must not run out behind a closed gate.
        let may_evict = !np.waiting_for_slot && !gated.contains_key(&node_name);
        published.drain_start_time =
            published_status(node).and_then(|s| s.drain_start_time).or_else(|| may_evict.then(|| now.clone()));
        if let (Some(message), Some(risks)) =
            (published.drain_message.as_mut(), planner::risk_summary(&np.at_risk, NAMED_BLOCKERS))
        {
            message.push_str("; ");
            message.push_str(&risks);
        }
        work.push((node, np, published.clone()));
        statuses.insert(node_name, (published, np.drained));
    }
    let written = ctx.writes.each(work, |(node, np, published)| async move {
        prepare_node(ctx, node, np, &published, now).await.map(|()| (node, np))
    });
    let mut failed = None;
    let mut ready = Vec::new();
    for result in written.await {
        match result {
            Ok(ready_node) => ready.push(ready_node),
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    let mut evictions = Vec::new();
    for (node, np) in ready {
        evictions.extend(np.evict.iter().filter(|pod| !evacuation.withholds(&pod.uid)).map(|pod| Eviction {
            node: node.clone(),
            pod: pod.clone(),
            risks: np.at_risk.iter().filter(|r| r.pod == *pod).map(|r| r.risk).collect(),
        }));
    }
    if let Some(e) = failed {
        return Err(e);
    }
    announce_fast_forwards(nm, ctx, &decision).await;
    announce_blocked(nm, ctx, held, &decision).await;
    let refused =
        (!refused.is_empty()).then(|| refused.into_iter().take(NAMED_BLOCKERS).collect::<Vec<_>>().join("; "));
    let in_the_way = join_parts([
        refused,
        evacuation.summary(NAMED_BLOCKERS),
        planner::blocked_summary(&all_blocked, NAMED_BLOCKERS),
        planner::waiting_summary(&all_waiting, NAMED_BLOCKERS),
    ]);
    let gated = held
        .iter()
        .filter_map(|h| {
            let name = h.name_any();
            gated.get(&name).map(|why| (name, why.clone()))
        })
        .collect();
    Ok(DrainOutcome { decision, node_statuses: statuses, in_the_way, evictions, evacuation, wait_deadline, gated })
}

/// A node's writes before its evictions, each skipped when the node already shows it: the
/// published targets (the floor), the draining taint, the Node conditions.
async fn prepare_node(
    ctx: &Context,
    node: &Node,
    np: &NodePlan,
    published: &NodeMaintenanceNodeStatus,
    now: &Time,
) -> Result<()> {
    let node_name = node.name_any();
    if published_status(node).as_ref() != Some(published) {
        ctx.writes
            .run(effects::publish_node_status(&ctx.client, &node_name, published))
            .await
            .map_err(ctx_err(Write::DrainTargets(node_name.clone())))?;
    }
    if np.needs_daemonset_taint && !has_draining_taint(node) {
        ctx.writes
            .run(set_draining_taint(&ctx.client, node, true))
            .await
            .map_err(ctx_err(Write::Taint(node_name.clone())))?;
    }
    let phase = if np.drained { NodePhase::Drained } else { NodePhase::Draining };
    set_conditions(ctx, node, phase, now).await
}

/// Evictions one reconcile sends at most, per unit of `--max-concurrent-writes`: a drain of
/// thousands of pods goes out in rounds of a few seconds, each followed by a fresh status,
/// instead of one reconcile that publishes nothing for minutes.
const EVICTIONS_PER_WRITE_SLOT: usize = 8;

/// Requests the evictions of a Drain step that are due (not in progress, past any backoff),
/// concurrently within `--max-concurrent-writes`, and at most
/// `EVICTIONS_PER_WRITE_SLOT x --max-concurrent-writes` of them. Returns whether some were
/// left for the next reconcile. Evictions never fail the step: refusals are remembered,
/// retried after their backoff and reported (SPEC 4.3).
pub async fn evict_all(nm: &NodeMaintenance, ctx: &Context, evictions: &[Eviction]) -> bool {
    let now = Instant::now();
    let mut due = evictions.iter().filter(|e| ctx.evictions.may_try(&e.pod.uid, now));
    let round: Vec<_> =
        due.by_ref().take(EVICTIONS_PER_WRITE_SLOT * ctx.options.max_concurrent_writes.max(1)).collect();
    // Evictions accepted earlier and not carried out, from the budgets' status.
    let accepted = if round.is_empty() { HashMap::new() } else { half_applied::recorded(&ctx.pdbs.state()) };
    ctx.writes
        .each(round, |e| {
            let recorded = accepted.get(&(e.pod.namespace.to_string(), e.pod.name.to_string()));
            evict_pod(nm, ctx, e, recorded)
        })
        .await;
    due.next().is_some()
}

/// Evicts one pod: through an EvictionRequest where they are used, else the Eviction API,
/// unless a PodDisruptionBudget records an accepted eviction of it (`recorded`) that can be
/// finished by deleting the pod ([`half_applied::finish`]).
async fn evict_pod(nm: &NodeMaintenance, ctx: &Context, eviction: &Eviction, recorded: Option<&Recorded>) {
    let (node, pod) = (&*eviction.node, &eviction.pod);
    let node_name = node.name_any();
    let write = async {
        match (&ctx.eviction_requests, recorded) {
            (Some(w), _) => eviction_requests::request(ctx, w, pod, &node_name).await,
            (None, Some(r)) => match half_applied::finish(&ctx.client, pod, r).await {
                Some(outcome) => outcome,
                None => evict(&ctx.client, pod).await,
            },
            (None, None) => evict(&ctx.client, pod).await,
        }
    };
    let outcome = ctx.writes.run_with(write, EvictionOutcome::throttle).await;
    ctx.metrics.evictions.get_or_create(&EvictionLabels { result: outcome.label() }).inc();
    match &outcome {
        EvictionOutcome::BlockedByPdb(pdb) => {
            ctx.event(nm, MaintenanceEvent::eviction_blocked(node, pod, pdb)).await;
        }
        EvictionOutcome::Completed(pdb) => {
            ctx.event(nm, MaintenanceEvent::eviction_completed(node, pod, pdb)).await;
            risk_events(nm, ctx, eviction).await;
        }
        EvictionOutcome::Accepted | EvictionOutcome::Intercepted(_) => risk_events(nm, ctx, eviction).await,
        _ => {}
    }
    tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), node = %node_name, outcome = outcome.label(), "eviction");
    ctx.evictions.record(pod, &node_name, outcome, Instant::now());
}

/// One Warning Event per risk of an eviction that went through.
async fn risk_events(nm: &NodeMaintenance, ctx: &Context, eviction: &Eviction) {
    for &risk in &eviction.risks {
        ctx.event(nm, MaintenanceEvent::evicted_at_risk(&eviction.node, &eviction.pod, risk)).await;
    }
}

/// One Event per (maintenance, node) fast-forward (SPEC 4.3, KEP "maintenance-c").
async fn announce_fast_forwards(nm: &NodeMaintenance, ctx: &Context, decision: &DrainDecision) {
    let name = nm.name_any();
    for ff in decision.fast_forwards.iter().filter(|f| f.maintenance == name) {
        let fresh = locked(&ctx.announced).insert((ff.maintenance.clone(), ff.node.clone()));
        if fresh {
            ctx.event(nm, MaintenanceEvent::fast_forwarded(ff)).await;
        }
    }
}

/// One Warning Event per (maintenance, pod) that holds the drain without being evicted
/// (opted out, or blocked by `--unmanaged-pods`/`--emptydir-pods`); the status
/// names them on every pass.
async fn announce_blocked(nm: &NodeMaintenance, ctx: &Context, selected: &[Arc<Node>], decision: &DrainDecision) {
    let name = nm.name_any();
    for node in selected {
        let Some(np) = decision.node(&node.name_any()) else { continue };
        for b in &np.blocked {
            let Some(event) = MaintenanceEvent::not_evicted(node, &b.pod, b.cause) else { continue };
            let fresh = locked(&ctx.reported_pods).insert((name.clone(), b.pod.uid.clone()));
            if fresh {
                ctx.event(nm, event).await;
            }
        }
    }
}

/// Joins the present parts of a blocker description with `; `.
fn join_parts(parts: impl IntoIterator<Item = Option<String>>) -> Option<String> {
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}
