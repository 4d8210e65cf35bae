//! The controller's side of rolling maintenance and NodeDisruptionBudgets (SPEC
//! 4.5): the allotment of [`crate::planner::holds::allot`] over the caches, counting the
//! holds this controller wrote that the Node cache does not show yet. The input building and
//! the decisions are the planner's ([`crate::planner::holds::from_cluster`]).

use super::context::Context;
use super::deadline;
use crate::planner::holds::from_cluster::{budget_views, hold_request, node_views};
use crate::planner::holds::{self, Allotment, HoldRequest};
use k8s_openapi::jiff::Timestamp;
use std::time::Duration;

/// How long until the allotment's [`Allotment::next_instant`] (a window or blackout edge),
/// plus a second so that the decision then sees the edge passed; `None` when none is ahead.
pub fn until_next_edge(allotment: &Allotment) -> Option<Duration> {
    allotment.next_instant().map(deadline::until)
}

/// The allotment over every active maintenance, every node and every budget in the caches,
/// counting holds this controller wrote that the cache does not show yet.
pub fn allotment(ctx: &Context) -> Allotment {
    let nodes = ctx.nodes.state();
    let maintenances = ctx.maintenances.state();
    let requests: Vec<HoldRequest> =
        maintenances.iter().filter(|m| m.is_active()).map(|m| hold_request(m, &nodes)).collect();
    let views = node_views(&nodes, |name, holders| ctx.holds_in_flight.holders(name, holders));
    let alerts = ctx.alerts.borrow().clone();
    let budgets = budget_views(&ctx.budgets.state(), &nodes, &alerts, Timestamp::now());
    holds::allot(&requests, &views, &budgets)
}
