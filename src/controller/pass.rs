//! One planning pass per trigger, shared by the reconciles of every Drain maintenance
//! (issue 13). The planner plans all Drain maintenances together (SPEC 4.3: maintenances that
//! share nodes hold each other back), so the reconcile of each one needs the same decision:
//! the first reconcile after a trigger computes it, the others reuse it.
//!
//! A pass is reused while nothing it was planned from changed by someone else: the same
//! trigger (a Node or Pod change seen by the watches; the run loop counts them) and the same
//! Drain-stage maintenances (uid, generation, deletion). Our own writes in between (evictions,
//! cursors, node annotations) are what carrying out that very decision produced; the
//! evictions' answers are in the eviction memory, which keeps a pod from being evicted twice,
//! and the watch events they cause are the next trigger.

use super::context::Context;
use super::drain::planner_input;
use crate::api::{NodeMaintenance, Stage};
use crate::planner::{self, DrainDecision};
use kube::ResourceExt;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Oldest a pass may be and still be reused, whatever the triggers say: a safety net behind
/// the watches (a missed event can never freeze a decision).
const MAX_AGE: Duration = Duration::from_secs(60);

/// What a pass was planned from, besides the caches' contents.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PassKey {
    trigger: u64,
    /// (uid, generation, being deleted) of each Drain-stage maintenance, sorted.
    drains: Vec<(String, i64, bool)>,
}

impl PassKey {
    fn of(trigger: u64, maintenances: &[Arc<NodeMaintenance>]) -> Self {
        let mut drains: Vec<(String, i64, bool)> = maintenances
            .iter()
            .filter(|m| m.spec.stage == Stage::Drain)
            .map(|m| {
                let uid = m.uid().unwrap_or_default();
                (uid, m.metadata.generation.unwrap_or(0), m.metadata.deletion_timestamp.is_some())
            })
            .collect();
        drains.sort();
        PassKey { trigger, drains }
    }
}

/// The last pass and the trigger count.
#[derive(Debug, Default)]
pub struct SharedPass {
    trigger: AtomicU64,
    last: Mutex<Option<(PassKey, Instant, Arc<DrainDecision>)>>,
}

impl SharedPass {
    /// Notes that the watches saw a change (the run loop calls it once per trigger, before
    /// the reconciles it starts): the next reconcile plans afresh.
    pub fn triggered(&self) {
        self.trigger.fetch_add(1, Ordering::Relaxed);
    }

    /// The decision of the current pass: the shared one when nothing it was planned from
    /// changed, else a new pass over the caches (which also forgets the eviction answers and
    /// reported blockers of pods that no longer exist).
    pub fn decision(&self, ctx: &Context) -> Arc<DrainDecision> {
        let key = PassKey::of(self.trigger.load(Ordering::Relaxed), &ctx.maintenances.state());
        // Held while planning: a second reconcile waits for this pass instead of planning too.
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, at, decision)) = last.as_ref()
            && *k == key
            && at.elapsed() < MAX_AGE
        {
            return decision.clone();
        }
        // The old decision goes first, so that its pages are returned with the input's below.
        *last = None;
        let started = Instant::now();
        let options = ctx.options.planner();
        let mut accepted = ctx.evictions.in_progress_uids();
        if let Some(watches) = &ctx.eviction_requests {
            accepted.extend(super::eviction_requests::in_progress(watches));
        }
        let input = planner_input(&ctx.nodes, &ctx.maintenances, &ctx.pods, |uid| accepted.contains(uid), options);
        let decision = Arc::new(planner::plan(&input));
        let live: HashSet<&str> = input.pods.iter().map(|p| &*p.uid).collect();
        ctx.evictions.retain(|uid| live.contains(uid));
        if let Ok(mut reported) = ctx.reported_pods.lock() {
            reported.retain(|(_, uid)| live.contains(&**uid));
        }
        ctx.metrics.planning_pass_duration.observe(started.elapsed().as_secs_f64());
        for w in &decision.warnings {
            tracing::warn!(warning = %w, "drain planner");
        }
        drop(input);
        return_freed_memory();
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
