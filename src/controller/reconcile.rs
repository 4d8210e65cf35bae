//! One job of one NodeMaintenance (SPEC 4): read, decide, write. The decision is
//! [`crate::planner::decide::maintenance`]'s, pure over what the caches show; this file reads what a drain's
//! decision needs (the shared planning pass, evacuation by rollout, what refuses our
//! evictions) and hands the decision to [`super::writer`]. Every write is idempotent and
//! every input is read from the API objects (node annotations, status), so a restart at
//! any point converges.

use super::context::{Context, Result};
use super::evacuate;
use super::responders;
use super::writer;
use crate::api::NodeMaintenance;
use crate::planner::decide::drain::join_parts;
use crate::planner::decide::maintenance::{self, DrainView, Observed, Scope};
use crate::planner::from_cluster::{Nodes, eviction_gates};
use crate::planner::holds::Allotment;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Runs the job of one NodeMaintenance (SPEC 4.1 to 4.3, 4.6) with the hold `allotment` of
/// the jobs due together. Returns when to look again (`None`: at the next change only).
///
/// # Errors
/// [`super::context::ReconcileError`] naming the write that failed; the loop retries the
/// maintenance after its backoff (`schedule.rs`).
pub async fn reconcile(nm: &NodeMaintenance, ctx: &Context, allotment: &Allotment) -> Result<Option<Duration>> {
    let (nodes, maintenances) = (ctx.nodes.state(), ctx.maintenances.state());
    let now = now();
    let nodes = Nodes::new(&nodes);
    let observed = Observed {
        nodes: &nodes,
        maintenances: &maintenances,
        allotment,
        busy_requeue: ctx.options.busy_requeue,
        idle_requeue: ctx.options.idle_requeue,
        now: &now,
    };
    let scope = maintenance::scope(nm, &observed);
    let drain = if scope.draining { Some(drain_view(nm, ctx, &observed, &scope).await) } else { None };
    let decision = maintenance::decide(nm, &observed, scope, drain);
    writer::write(ctx, nm, decision, &now).await
}

/// What the drain decision of `nm` reads beyond the caches: the planning pass shared by
/// every draining maintenance (run off the async workers when it must be planned afresh),
/// evacuation by rollout of the pods it would evict, and what refuses our evictions on each
/// node it holds.
async fn drain_view(nm: &NodeMaintenance, ctx: &Context, o: &Observed<'_>, scope: &Scope) -> DrainView {
    let gated = Arc::new(eviction_gates(o.maintenances, o.nodes.list, &o.allotment.node_gates));
    let decision = ctx.pass.decision(ctx.pass_sources(gated.clone())).await;
    let evacuation = evacuate::plan(nm, ctx, &decision, &scope.held);
    let refused: BTreeMap<String, String> = scope
        .held
        .iter()
        .filter_map(|n| {
            let name = n.name_any();
            let responding = ctx.eviction_requests.as_ref().and_then(|w| responders::progress(w, &name));
            join_parts([ctx.evictions.blockers(&name), responding]).map(|why| (name, why))
        })
        .collect();
    DrainView { decision, gated, evacuation, refused }
}

/// The current time truncated to whole seconds: `metav1.Time` is stored at second
/// precision, so a time written with more would never compare equal to what is read back
/// (and the status would be rewritten on every reconcile, SPEC 4.3). Every time the
/// controller writes comes from here.
pub fn now() -> Time {
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

#[cfg(test)]
mod tests {
    #[test]
    fn now_has_whole_seconds() {
        assert_eq!(super::now().0.subsec_nanosecond(), 0);
    }
}
