//! The drain planning pass (SPEC 4.3), shared by the decisions of the loop. The planner plans
//! every Drain maintenance together (maintenances that share nodes hold each other back),
//! and the loop decides often while evictions go out in rounds, so a pass is kept and
//! reused while nothing it was planned from changed: no change signal of the Node or Pod
//! watches (Pods on held nodes only) since it was planned, the same draining maintenances
//! (uid, generation) under the same eviction gates, and no wait for a pod left to finish
//! (SPEC 4.6) that it saw running past its deadline. Our own evictions in between are in the
//! eviction memory, which keeps a pod from being evicted twice; the watch events they cause
//! plan afresh.
//!
//! The pass's input comes from the caches ([`planner_input`], over the planner's own
//! conversions in [`crate::planner::from_cluster`]).

use super::eviction_memory::EvictionMemory;
use super::memory::locked;
use crate::api::NodeMaintenance;
use crate::cluster::eviction_requests::{self, Watches};
use crate::cluster::pods::PodCache;
use crate::planner::from_cluster::{Drained, drain_maintenances, node_inputs};
use crate::planner::wait::Gates;
use crate::planner::{self, DrainDecision, PlannerInput, PlannerOptions};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::metrics::histogram::Histogram;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

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
    gated: &BTreeMap<String, Gates>,
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
    /// (uid, generation) of each draining maintenance ([`NodeMaintenance::is_draining`]),
    /// sorted: one that starts being deleted leaves the list, so the key changes.
    drains: Vec<(String, i64)>,
    /// Why no new eviction may start on which node: a gate that opens or closes (a window
    /// edge, a pause) plans afresh.
    gated: Arc<BTreeMap<String, Gates>>,
}

impl PassKey {
    fn of(maintenances: &[Arc<NodeMaintenance>], gated: Arc<BTreeMap<String, Gates>>) -> Self {
        let mut drains: Vec<(String, i64)> = maintenances
            .iter()
            .filter(|m| m.is_draining())
            .map(|m| (m.uid().unwrap_or_default(), m.metadata.generation.unwrap_or(0)))
            .collect();
        drains.sort();
        PassKey { drains, gated }
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
    pub gated: Arc<BTreeMap<String, Gates>>,
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

/// The last pass and the change signals of what it reads.
#[derive(Debug)]
pub struct SharedPass {
    last: Mutex<Last>,
}

#[derive(Debug)]
struct Last {
    /// The watches' change signals of the pass's inputs (Nodes, Pods on held nodes): a
    /// change since the last pass was planned plans afresh.
    inputs: Vec<watch::Receiver<()>>,
    pass: Option<(PassKey, Instant, Arc<DrainDecision>)>,
}

impl SharedPass {
    /// A pass planned afresh whenever one of `inputs` (the caches' change signals of what a
    /// pass reads) changed since the last one.
    pub fn new(inputs: Vec<watch::Receiver<()>>) -> Self {
        SharedPass { last: Mutex::new(Last { inputs, pass: None }) }
    }

    /// The decision of the current pass: the last one when none of its inputs changed, the
    /// same maintenances drain under the same gates, it is younger than a minute and its
    /// [`DrainDecision::wait_deadline`] is ahead; else a new pass over `sources` (which also
    /// forgets the eviction answers and reported blockers of pods that no longer exist).
    /// CPU-bound (tens of milliseconds at 100,000 pods): call it off the async workers, as
    /// the loop calls the whole decision.
    pub fn decision(&self, sources: PassSources) -> Arc<DrainDecision> {
        let key = PassKey::of(&sources.maintenances.state(), sources.gated.clone());
        let mut last = locked(&self.last);
        let changed = last.inputs.iter().any(|rx| rx.has_changed().unwrap_or(true));
        if !changed
            && let Some((k, at, decision)) = last.pass.as_ref()
            && *k == key
            && at.elapsed() < MAX_AGE
            && decision.wait_deadline.is_none_or(|d| Timestamp::now() < d)
        {
            return decision.clone();
        }
        // Seen before the caches are read: a change during the pass plans again next time.
        for rx in &mut last.inputs {
            rx.mark_unchanged();
        }
        // The old decision goes first, so that its pages are returned with the input's.
        drop(last.pass.take());
        let decision = Arc::new(sources.plan());
        last.pass = Some((key, Instant::now(), decision.clone()));
        decision
    }
}

/// Gives the pages a pass freed back to the system. A pass over 100,000 pods builds and
/// drops ~24 MiB of input; glibc keeps such pages, and RSS would settle ~40 MiB above the
/// live heap after the first drain (docs/benchmarks.md, "Controller: planning pass and
/// memory"). `malloc_trim` takes ~9 ms at that size, once per pass, not per decision. A
/// no-op where the allocator is not glibc's.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own allocator state; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
