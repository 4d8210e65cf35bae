//! Keeps the controller's long-lived memories bounded: the pods already reported as
//! held back, the eviction answers, the rollouts started, the holds in flight, and the Event
//! recorder's map once it is idle ([`super::recorder`]). Each is
//! pruned where it is used when that is cheap (a planning pass forgets the pods it no longer
//! sees); what is keyed by a maintenance, a pod or a node that went away while nothing
//! asked about it again is swept here, every [`EVERY`], against the caches. The sizes are
//! published as `node_maintenance_controller_memory_entries{memory}`, so a soak (and an
//! SRE) can see that they stay flat.

use super::context::Context;
use super::memory::locked;
use crate::metrics::MemoryLabels;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use std::collections::HashSet;
use std::time::Duration;

/// How often the memories are swept and their sizes published.
pub const EVERY: Duration = Duration::from_secs(30);

/// The `memory` label of each long-lived memory, in the order [`sweep`] returns them.
pub const MEMORIES: [&str; 5] =
    ["reported_pods", "evictions", "evacuations_started", "evacuation_events", "expectations"];

/// Forgets every entry of a maintenance that is gone, pod UIDs the Pod cache no longer
/// holds and holds in flight past their time; returns the sizes, as in [`MEMORIES`], and
/// publishes them.
pub fn sweep(ctx: &Context) -> [usize; MEMORIES.len()] {
    let live_name = |name: &str| ctx.maintenances.get(&ObjectRef::new(name)).is_some();
    let live_uids: HashSet<String> = ctx.maintenances.state().iter().filter_map(|m| m.uid()).collect();
    let pods = ctx.pods.uids();
    ctx.evictions.retain(|uid| pods.contains(uid));
    let reported = {
        let mut r = locked(&ctx.reported_pods);
        r.retain(|(m, uid)| live_name(m) && pods.contains(uid));
        r.len()
    };
    let (started, events) = ctx.evacuator.prune(|uid| live_uids.contains(uid), live_name);
    ctx.recorder.renew_if_idle(std::time::Instant::now());
    let sizes = [reported, ctx.evictions.len(), started, events, ctx.expectations.len()];
    publish(ctx, sizes);
    sizes
}

/// Forgets at once what was kept for the maintenance `name`, whose finalizer was just
/// removed: a maintenance created next under the same name gets its own Events.
pub fn forget(ctx: &Context, name: &str) {
    locked(&ctx.reported_pods).retain(|(m, _)| m != name);
    ctx.evacuator.forget(name);
}

/// Sets the size gauges (all 0 when `ctx` is the context of a term that ended).
pub fn publish(ctx: &Context, sizes: [usize; MEMORIES.len()]) {
    for (memory, n) in MEMORIES.into_iter().zip(sizes) {
        let gauge = ctx.metrics.memory_entries.get_or_create(&MemoryLabels { memory });
        gauge.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}
