//! The one writer of a decision ([`crate::planner::decide::Decision`]): job by job, each
//! maintenance's part, then the cluster-wide part ([`super::cluster`]); each job's outcome
//! goes through the one error policy ([`super::schedule`]). Of each part, the difference
//! between the decision and what is stored, in one documented order, each write
//! conditional or server-side applied ([`crate::cluster::writes`]), concurrent within
//! `--max-concurrent-writes` and paced on a 429 ([`super::pacer::Pacer`]).
//!
//! A maintenance's writes, in order, and why:
//! 1. the finalizer, alone (every later write is conditional on the copy it creates);
//! 2. releases of nodes no longer held, then holds and cordons (a node leaves one rolling
//!    turn before the next one starts);
//! 3. the node writes of a drain: published targets (the floor) before the evictions they
//!    allow, the draining taint before DaemonSet evictions, the Node conditions;
//! 4. the status, so progress shows while evictions run; on deletion, the finalizer goes
//!    only from the copy that shows Complete;
//! 5. the nodes the status records as released (a crash before leaves them held, and the
//!    next decision releases them again);
//! 6. Events, rollouts and evictions, best effort.
//!
//! A failed write of steps 1-5 stops the steps after it (each depends on the ones before)
//! and is returned; the loop retries the maintenance after its backoff. Every write of a
//! step is attempted. Each node write's answer becomes an expectation
//! ([`super::expectations`]): the next decision waits until the cache shows it.

use super::cluster;
use super::context::{Context, Result, Write, ctx_err};
use super::evacuate;
use super::eviction_requests::{self, withdraw_on_node};
use super::janitor;
use super::memory::locked;
use super::schedule::{Job, Schedule};
use crate::api::node::{Holders, is_unschedulable};
use crate::api::{DONE_ANNOTATION, NodeMaintenance};
use crate::cluster::deployments::pdb_disruptions_allowed;
use crate::cluster::eviction::{EvictionOutcome, evict};
use crate::cluster::half_applied::{self, Recorded};
use crate::cluster::writes::{self, apply_node_change, set_draining_taint, set_finalizer, write_status};
use crate::metrics::{EvictionLabels, ReconcileErrorLabels};
use crate::planner::decide::drain::NodeWrite;
use crate::planner::decide::drain::{Eviction, Evictions};
use crate::planner::decide::events::MaintenanceEvent;
use crate::planner::decide::maintenance::{FRESH_COPY_REQUEUE, Hold, MaintenanceDecision, Release};
use crate::planner::decide::{Decision, deadline};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Look again at once when a round left due evictions for the next one.
const MORE_EVICTIONS_REQUEUE: Duration = Duration::from_millis(100);

/// Evictions one round sends at most, per unit of `--max-concurrent-writes`: a drain of
/// thousands of pods goes out in rounds of a few seconds, each followed by a fresh status,
/// instead of one that publishes nothing for minutes.
const EVICTIONS_PER_WRITE_SLOT: usize = 8;

/// Writes `d`, decided for `nm` at `now`, in the order of the module doc. Returns when to
/// look at the maintenance again (`None`: at the next change only).
///
/// # Errors
/// [`super::context::ReconcileError`] naming the first write of the first failed step.
async fn write_maintenance(
    ctx: &Context,
    nm: &NodeMaintenance,
    d: MaintenanceDecision,
    now: &Time,
) -> Result<Option<Duration>> {
    let name = nm.name_any();
    if d.finalizer == Some(true) {
        ctx.pacer.run(set_finalizer(&ctx.client, nm, true)).await.map_err(ctx_err(Write::AddFinalizer))?;
        return Ok(d.again);
    }
    all(ctx.pacer.each(d.releases, |r| release(ctx, nm, r)).await)?;
    all(ctx.pacer.each(d.holds, |h| hold(ctx, nm, h)).await)?;
    if d.retry_eviction_requests {
        eviction_requests::retry_failed(ctx).await;
    }
    all(ctx.pacer.each(d.node_writes, |w| node_write(ctx, w)).await)?;
    if let Some(status) = &d.status {
        let deleting = d.finalizer == Some(false);
        let kind = if deleting { Write::RecordComplete } else { Write::Status };
        let wrote = ctx.pacer.run(write_status(&ctx.client, nm, status)).await.map_err(ctx_err(kind))?;
        if deleting {
            if wrote {
                // The finalizer goes from the version that shows Complete (its removal is
                // conditional too); the status write's watch event brings it.
                return Ok(Some(FRESH_COPY_REQUEUE));
            }
            ctx.pacer.run(set_finalizer(&ctx.client, nm, false)).await.map_err(ctx_err(Write::RemoveFinalizer))?;
            janitor::forget(ctx, &name);
            tracing::info!(maintenance = %name, "maintenance deleted; nodes released");
            return Ok(None);
        }
    }
    all(ctx.pacer.each(d.releases_after_status, |r| release(ctx, nm, r)).await)?;
    if d.timed_out {
        ctx.metrics.drain_timeouts.inc();
    }
    for event in d.events {
        ctx.event(nm, event).await;
    }
    for pod in d.not_evicted {
        if locked(&ctx.reported_pods).insert((name.clone(), pod.uid)) {
            ctx.event(nm, pod.event).await;
        }
    }
    let stored_evacuations = nm.status.as_ref().map(|s| s.evacuations.as_slice()).unwrap_or_default();
    evacuate::carry_out(nm, ctx, &d.evacuation, stored_evacuations, now).await;
    if evict_all(nm, ctx, &d.evictions).await {
        return Ok(Some(MORE_EVICTIONS_REQUEUE));
    }
    Ok(d.again)
}

/// Writes `decision`, one job at a time: each maintenance's (in the order of the module
/// doc), then the cluster-wide one ([`cluster::write`]), and schedules each job again: when it asks, or
/// after its backoff if it failed. A maintenance whose decision writes a node that an
/// earlier one of this decision wrote is decided again at once instead (its conditional
/// writes were computed from the node as it was before), once the cache shows those writes.
/// `started` is when the decision began.
pub async fn write(
    ctx: &Context,
    schedule: &mut Schedule,
    decision: Decision,
    started: std::time::Instant,
    stop: &CancellationToken,
) {
    let mut written: HashSet<String> = HashSet::new();
    let Decision { maintenances, cluster, next_edge, now } = decision;
    for (nm, d) in maintenances {
        if stop.is_cancelled() {
            return;
        }
        let job = Job::Maintenance(nm.name_any());
        let nodes: Vec<String> = d.nodes().map(|n| n.name_any()).collect();
        if nodes.iter().any(|n| written.contains(n)) {
            schedule.all_due([job], tokio::time::Instant::now());
            continue;
        }
        written.extend(nodes);
        let outcome = write_maintenance(ctx, &nm, d, &now).await;
        finish(ctx, schedule, job, outcome, started);
    }
    if let Some(c) = cluster {
        let outcome = cluster::write(ctx, c).await;
        let again = next_edge.map(|at| deadline::until(at, Timestamp::now()));
        finish(ctx, schedule, Job::Cluster, outcome.map(|()| again), started);
    }
}

/// Counts `job`'s `outcome` (its latency from `started`, the decision's start) and schedules
/// it again: when it asks, or after its backoff if it failed.
fn finish(
    ctx: &Context,
    schedule: &mut Schedule,
    job: Job,
    outcome: Result<Option<Duration>>,
    started: std::time::Instant,
) {
    ctx.metrics.reconciles.inc();
    ctx.metrics.reconcile_duration.observe(started.elapsed().as_secs_f64());
    match outcome {
        Ok(again) => schedule.succeeded(job, again, tokio::time::Instant::now()),
        Err(e) => {
            ctx.metrics.reconcile_errors.get_or_create(&ReconcileErrorLabels::of(&e.source)).inc();
            let retry = schedule.failed(job.clone(), tokio::time::Instant::now());
            tracing::warn!(job = ?job, error = %e, retry_in = ?retry, "reconcile failed; retrying");
        }
    }
}

/// The first error of the writes of one step, after all of them ran.
fn all(results: Vec<Result<()>>) -> Result<()> {
    results.into_iter().collect()
}

/// Holds and cordons one node, then its Event.
async fn hold(ctx: &Context, nm: &NodeMaintenance, h: Hold) -> Result<()> {
    let written = apply_node_change(&ctx.client, &h.node, &h.change);
    let node = ctx.pacer.run(written).await.map_err(ctx_err(Write::Cordon(h.node.name_any())))?;
    ctx.expectations.expect(&node);
    if let Some(event) = h.event {
        ctx.event(nm, event).await;
    }
    Ok(())
}

/// Releases one node: the taint and our EvictionRequests when no drainer is left, its
/// conditions when the last holder goes, then the release patch (which also removes the
/// status annotation), then its Event. Each conditional write carries the resourceVersion
/// of the node as the write before it left it: the conditions' write is not conditional, so
/// the node it returns is taken only when the fields the release was computed from
/// (holders, cordon, done annotation) are as the release read them; else the release keeps
/// the older version and a change by someone else in between makes it fail with 409 and be
/// decided again.
async fn release(ctx: &Context, nm: &NodeMaintenance, r: Release) -> Result<()> {
    let name = r.node.name_any();
    let mut current = (*r.node).clone();
    if r.undrain {
        let untainted = set_draining_taint(&ctx.client, &r.node, false);
        if let Some(updated) = ctx.pacer.run(untainted).await.map_err(ctx_err(Write::Untaint(name.clone())))? {
            current = updated;
        }
        withdraw_on_node(ctx, &name).await.map_err(ctx_err(Write::WithdrawEvictionRequests(name.clone())))?;
    }
    if let Some(wanted) = &r.conditions {
        let wanted = wanted.build(&r.node);
        let set = writes::set_node_conditions(&ctx.client, &name, &wanted);
        let written = ctx.pacer.run(set).await.map_err(ctx_err(Write::NodeConditions(name.clone())))?;
        if same_hold(&written, &current) {
            current = written;
        }
    }
    let patch = apply_node_change(&ctx.client, &current, &r.change);
    let released = ctx.pacer.run(patch).await.map_err(ctx_err(Write::Release(name.clone())))?;
    ctx.expectations.expect(&released);
    if let Some(event) = r.event {
        ctx.event(nm, event).await;
    }
    Ok(())
}

/// Whether `a` and `b` show the same hold: holders annotation, `spec.unschedulable` and
/// done annotation, what a release is computed from.
fn same_hold(a: &Node, b: &Node) -> bool {
    let done = |n: &Node| n.annotations().get(DONE_ANNOTATION).cloned();
    Holders::of(a) == Holders::of(b) && is_unschedulable(a) == is_unschedulable(b) && done(a) == done(b)
}

/// One node's writes before the status: targets, taint, conditions, each only when wanted.
/// The taint's write (the taint list replaced whole, conditional) is computed from the node
/// the targets' write returned, and carries its resourceVersion.
async fn node_write(ctx: &Context, w: NodeWrite) -> Result<()> {
    let name = w.node.name_any();
    let mut current = None;
    if let Some(published) = &w.published {
        let publish = writes::publish_node_status(&ctx.client, &name, published);
        current = Some(ctx.pacer.run(publish).await.map_err(ctx_err(Write::DrainTargets(name.clone())))?);
    }
    if w.taint {
        let taint = set_draining_taint(&ctx.client, current.as_ref().unwrap_or(&w.node), true);
        let tainted = ctx.pacer.run(taint).await.map_err(ctx_err(Write::Taint(name.clone())))?;
        current = tainted.or(current);
    }
    if let Some(wanted) = &w.conditions {
        let wanted = wanted.build(&w.node);
        let set = writes::set_node_conditions(&ctx.client, &name, &wanted);
        current = Some(ctx.pacer.run(set).await.map_err(ctx_err(Write::NodeConditions(name.clone())))?);
    }
    if let Some(written) = &current {
        ctx.expectations.expect(written);
    }
    Ok(())
}

/// Requests the evictions that are due (not in progress, past any backoff), concurrently
/// within `--max-concurrent-writes`, at most `EVICTIONS_PER_WRITE_SLOT x
/// --max-concurrent-writes` of them. Returns whether some were left for the next round.
/// Evictions never fail the maintenance: refusals are remembered, retried after their
/// backoff and reported (SPEC 4.3).
async fn evict_all(nm: &NodeMaintenance, ctx: &Context, evictions: &Evictions) -> bool {
    let now = Instant::now();
    // Refused pods go again at most as many per budget as it allows now.
    let mut left: HashMap<(String, String), i32> = HashMap::new();
    let mut take = |namespace: &str, pdb: &str| {
        let key = (namespace.to_owned(), pdb.to_owned());
        let left = match left.get_mut(&key) {
            Some(n) => n,
            None => left.entry(key).or_insert(pdb_disruptions_allowed(&ctx.pdbs, namespace, pdb)?),
        };
        let taken = *left > 0;
        *left -= i32::from(taken);
        Some(taken)
    };
    let mut due = evictions.iter().filter(|e| ctx.evictions.may_try(&e.pod.uid, now, &mut take));
    let round: Vec<_> =
        due.by_ref().take(EVICTIONS_PER_WRITE_SLOT * ctx.options.max_concurrent_writes.max(1)).collect();
    // Evictions accepted earlier and not carried out, from the budgets' status.
    let accepted = if round.is_empty() { HashMap::new() } else { half_applied::recorded(&ctx.pdbs.state()) };
    ctx.pacer
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
async fn evict_pod(nm: &NodeMaintenance, ctx: &Context, eviction: Eviction<'_>, recorded: Option<&Recorded>) {
    let (node, pod) = (&**eviction.node, eviction.pod);
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
    let outcome = ctx.pacer.run_with(write, EvictionOutcome::throttle).await;
    ctx.metrics.evictions.get_or_create(&EvictionLabels { result: outcome.label() }).inc();
    let risks = || eviction.risks.iter().map(|&risk| MaintenanceEvent::evicted_at_risk(node, pod, risk));
    let events: Vec<MaintenanceEvent> = match &outcome {
        EvictionOutcome::BlockedByPdb(pdb) => vec![MaintenanceEvent::eviction_blocked(node, pod, pdb)],
        EvictionOutcome::Completed(pdb) => {
            std::iter::once(MaintenanceEvent::eviction_completed(node, pod, pdb)).chain(risks()).collect()
        }
        EvictionOutcome::Accepted | EvictionOutcome::Intercepted(_) => risks().collect(),
        _ => Vec::new(),
    };
    for event in events {
        ctx.event(nm, event).await;
    }
    tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), node = %node_name, outcome = outcome.label(), "eviction");
    ctx.evictions.record(pod, &node_name, outcome, Instant::now());
}
