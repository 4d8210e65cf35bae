//! One decision of the loop (SPEC 4): the caches read into one
//! [`Snapshot`], what the draining maintenances read beyond it (the shared planning pass,
//! evacuation by rollout, what refuses our evictions), and the planner's
//! [`crate::planner::decide::decide`]. Every input is read from the API objects (node
//! annotations, status), so a restart at any point converges.

use super::context::Context;
use super::evacuate;
use super::schedule::Job;
use crate::cluster::responders;
use crate::planner::decide::drain::DrainView;
use crate::planner::decide::drain::join_parts;
use crate::planner::decide::{self, Decision, Snapshot};
use crate::planner::from_cluster::Nodes;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};

/// The decision for the `due` jobs over one snapshot of the caches taken now: each due
/// maintenance's, and the cluster-wide one when [`Job::Cluster`] is due. Synchronous and
/// CPU-bound (tens of milliseconds at 5,000 nodes and 100,000 pods, docs/benchmarks.md "The
/// decision"): the loop runs it on tokio's blocking pool, since the async workers also
/// answer admission.
pub fn decide(ctx: &Context, due: &[Job]) -> Decision {
    let (nodes, maintenances, budgets) = (ctx.nodes.state(), ctx.maintenances.state(), ctx.budgets.state());
    let alerts = ctx.alerts.borrow().clone();
    let snapshot = Snapshot {
        nodes: Nodes::for_selectors(&nodes, &maintenances, &budgets),
        maintenances: &maintenances,
        budgets: &budgets,
        alerts: &alerts,
        busy_requeue: ctx.options.busy_requeue,
        idle_requeue: ctx.options.idle_requeue,
        now: now(),
    };
    let names: BTreeSet<&str> =
        due.iter().filter_map(|j| if let Job::Maintenance(name) = j { Some(name.as_str()) } else { None }).collect();
    let scopes = decide::scopes(&snapshot, |name| names.contains(name));
    let mut drains = BTreeMap::new();
    if scopes.draining().next().is_some() {
        let pass = ctx.pass.decision(ctx.pass_sources(scopes.gated.clone()));
        for (nm, scope) in scopes.draining() {
            let refused = scope
                .held
                .iter()
                .filter_map(|n| {
                    let name = n.name_any();
                    let responding = ctx.eviction_requests.as_ref().and_then(|w| responders::progress(w, &name));
                    join_parts([ctx.evictions.blockers(&name), responding]).map(|why| (name, why))
                })
                .collect();
            let view = DrainView {
                decision: pass.clone(),
                gated: scopes.gated.clone(),
                evacuation: evacuate::plan(nm, ctx, &pass, &scope.held),
                refused,
            };
            drains.insert(nm.name_any(), view);
        }
    }
    decide::decide(&snapshot, scopes, drains, due.contains(&Job::Cluster))
}

/// The current time truncated to whole seconds: `metav1.Time` is stored at second
/// precision, so a time written with more would never compare equal to what is read back
/// (and the status would be rewritten on every decision, SPEC 4.3). Every time the
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
