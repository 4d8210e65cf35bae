//! One planning pass per trigger, shared by the reconciles of every Drain maintenance.
//! The planner plans all Drain maintenances together (SPEC 4.3: maintenances that
//! share nodes hold each other back), so the reconcile of each one needs the same decision:
//! the first reconcile after a trigger computes it, the others reuse it.
//!
//! A pass is reused while nothing it was planned from changed by someone else: the same
//! trigger (a Node or Pod change seen by the watches; the run loop counts them) and the same
//! draining maintenances (uid, generation), and while no wait for a pod left to finish
//! (SPEC 4.6) that it saw running has reached its deadline. Our own writes in between (evictions, cursors,
//! node annotations) are what carrying out that very decision produced; the evictions'
//! answers are in the eviction memory, which keeps a pod from being evicted twice, and the
//! watch events they cause are the next trigger.
//!
//! The pass's input comes from the caches ([`planner_input`], over the planner's own
//! conversions in [`crate::planner::from_cluster`]); the pass runs off the async workers.

use super::evict::EvictionMemory;
use super::eviction_requests::{self, Watches};
use super::memory::locked;
use crate::api::NodeMaintenance;
use crate::cluster::pods::PodCache;
use crate::planner::from_cluster::{Drained, drain_maintenances, node_inputs};
use crate::planner::{self, DrainDecision, PlannerInput, PlannerOptions};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The planner input over every draining maintenance (SPEC 4.3: intersecting
/// maintenances hold each other back, so they are planned together), built from the caches.
/// `in_progress(uid)` says whether an eviction of that pod was already accepted; `gated`
/// says why no new eviction may start on a node
/// ([`crate::planner::from_cluster::eviction_gates`]). Also what `benches/controller_rss.rs`
/// times.
pub fn planner_input(
    nodes: &Store<Node>,
    maintenances: &Store<NodeMaintenance>,
    pods: &PodCache,
    in_progress: impl Fn(&str) -> bool,
    gated: &BTreeMap<String, String>,
    options: PlannerOptions,
) -> PlannerInput {
    let all_nodes = nodes.state();
    let drains = drain_maintenances(&maintenances.state(), &all_nodes, Drained::Held);
    let node_names: HashSet<&str> = drains.iter().flat_map(|m| m.nodes.iter().map(String::as_str)).collect();
    let nodes = node_inputs(&all_nodes, |n| node_names.contains(n), gated);
    let pods = pods.views(|n| node_names.contains(n), in_progress);
    PlannerInput { maintenances: drains, pods, nodes, options, now: Timestamp::now() }
}

/// (maintenance, pod UID) pairs whose "not evicted" Event was already emitted;
/// shared with the planning pass, which forgets pods that no longer exist.
pub type ReportedPods = Mutex<HashSet<(String, Arc<str>)>>;

/// Oldest a pass may be and still be reused, whatever the triggers say: a safety net behind
/// the watches (a missed event can never freeze a decision).
const MAX_AGE: Duration = Duration::from_secs(60);

/// What a pass was planned from, besides the caches' contents.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PassKey {
    trigger: u64,
    /// (uid, generation) of each draining maintenance ([`NodeMaintenance::is_draining`]),
    /// sorted: one that starts being deleted leaves the list, so the key changes.
    drains: Vec<(String, i64)>,
    /// Why no new eviction may start on which node: a gate that opens or closes (a window
    /// edge, a pause) plans afresh.
    gated: Arc<BTreeMap<String, String>>,
}

impl PassKey {
    fn of(trigger: u64, maintenances: &[Arc<NodeMaintenance>], gated: Arc<BTreeMap<String, String>>) -> Self {
        let mut drains: Vec<(String, i64)> = maintenances
            .iter()
            .filter(|m| m.is_draining())
            .map(|m| (m.uid().unwrap_or_default(), m.metadata.generation.unwrap_or(0)))
            .collect();
        drains.sort();
        PassKey { trigger, drains, gated }
    }
}

/// Everything a pass reads and prunes, owned (every field is a shared handle), so that the
/// pass runs on tokio's blocking pool rather than on a worker that answers admission.
/// Built from the controller's context by
/// [`crate::controller::context::Context::pass_sources`]; `benches/pass_admission.rs` builds
/// one over synthetic caches.
#[derive(Clone)]
pub struct PassSources {
    /// Node cache.
    pub nodes: Store<Node>,
    /// NodeMaintenance cache.
    pub maintenances: Store<NodeMaintenance>,
    /// Pod cache.
    pub pods: PodCache,
    /// Outcomes of earlier evictions: accepted ones count as in progress; the pass forgets
    /// those of pods that no longer exist.
    pub evictions: Arc<EvictionMemory>,
    /// (maintenance, pod UID) pairs already reported; the pass forgets vanished pods.
    pub reported_pods: Arc<ReportedPods>,
    /// Our EvictionRequests, where used: those still asking count as in progress.
    pub eviction_requests: Option<Watches>,
    /// Why no new eviction may start on which node (SPEC 4.6).
    pub gated: Arc<BTreeMap<String, String>>,
    /// The planner's switches.
    pub options: PlannerOptions,
    /// `node_maintenance_planning_pass_duration_seconds`.
    pub duration: Histogram,
}

impl PassSources {
    /// One pass: the planner input built from the caches, the decision, the memories pruned
    /// to the pods that exist, the freed pages given back. CPU-bound (~40-70 ms and ~9 ms of
    /// `malloc_trim` at 100,000 pods): call it off the async workers.
    fn plan(&self) -> DrainDecision {
        let started = Instant::now();
        let mut accepted = self.evictions.in_progress_uids();
        if let Some(w) = &self.eviction_requests {
            accepted.extend(eviction_requests::in_progress(w));
        }
        let in_progress = |uid: &str| accepted.contains(uid);
        let input = planner_input(&self.nodes, &self.maintenances, &self.pods, in_progress, &self.gated, self.options);
        let decision = planner::plan(&input);
        let live: HashSet<&str> = input.pods.iter().map(|p| &*p.uid).collect();
        self.evictions.retain(|uid| live.contains(uid));
        locked(&self.reported_pods).retain(|(_, uid)| live.contains(&**uid));
        self.duration.observe(started.elapsed().as_secs_f64());
        for w in &decision.warnings {
            tracing::warn!(warning = %w, "drain planner");
        }
        drop(live);
        drop(input);
        return_freed_memory();
        decision
    }
}

/// The last pass and the trigger count.
#[derive(Debug, Default)]
pub struct SharedPass {
    trigger: AtomicU64,
    /// An async lock, held while a pass runs on the blocking pool: a second reconcile awaits
    /// this pass (its worker free for admission meanwhile) instead of planning too.
    last: tokio::sync::Mutex<Option<(PassKey, Instant, Arc<DrainDecision>)>>,
}

impl SharedPass {
    /// Notes that the watches saw a change (the run loop calls it once per trigger, before
    /// the reconciles it starts): the next reconcile plans afresh.
    pub fn triggered(&self) {
        self.trigger.fetch_add(1, Ordering::Relaxed);
    }

    /// The decision of the current pass: the shared one when nothing it was planned from
    /// changed and its [`DrainDecision::wait_deadline`] is ahead, else a new pass over
    /// `sources` (which also forgets the eviction answers and reported blockers of pods that
    /// no longer exist), run on tokio's blocking pool
    /// (a pass at 100,000 pods takes tens of milliseconds, and the async workers
    /// also answer admission). If this future is dropped mid-pass the pass still finishes
    /// on the pool and its decision is dropped with it.
    ///
    /// # Panics
    /// Re-raises a panic of the planner (a bug, never input: the planner does not panic on
    /// any input, `planner/proptests.rs`).
    pub async fn decision(&self, sources: PassSources) -> Arc<DrainDecision> {
        let trigger = self.trigger.load(Ordering::Relaxed);
        let key = PassKey::of(trigger, &sources.maintenances.state(), sources.gated.clone());
        let mut last = self.last.lock().await;
        if let Some((k, at, decision)) = last.as_ref()
            && *k == key
            && at.elapsed() < MAX_AGE
            && decision.wait_deadline.is_none_or(|d| Timestamp::now() < d)
        {
            return decision.clone();
        }
        // The old decision is dropped on the pool, first, so that its pages are returned
        // with the input's.
        let old = last.take();
        let planned = tokio::task::spawn_blocking(move || {
            drop(old);
            Arc::new(sources.plan())
        })
        .await;
        let decision = match planned {
            Ok(decision) => decision,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // Cancelled: only when the runtime shuts down, which drops this future too.
            Err(_) => std::future::pending().await,
        };
        *last = Some((key, Instant::now(), decision.clone()));
        decision
    }
}

/// Gives the pages a pass freed back to the system. A pass over 100,000 pods builds and
/// drops ~24 MiB of input; glibc keeps such pages, and RSS would settle ~40 MiB above the
/// live heap after the first drain (docs/benchmarks.md, "Controller: planning pass and
/// memory"). `malloc_trim` takes ~9 ms at that size, once per pass, not per reconcile. A
/// no-op where the allocator is not glibc's.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own allocator state; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
