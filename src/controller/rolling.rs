//! The controller's side of rolling maintenance and NodeDisruptionBudgets (SPEC
//! 4.5): the allotment of [`crate::planner::holds::allot`] over the caches, counting the
//! holds this controller wrote that the Node cache does not show yet. The input building and
//! the decisions are the planner's ([`crate::planner::holds::from_cluster`]).

use super::context::Context;
use crate::planner::decide::deadline;
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::{Allotment, from_cluster};
use k8s_openapi::jiff::Timestamp;

use std::time::Duration;

/// How long until the allotment's [`Allotment::next_instant`] (a window or blackout edge),
/// plus a second so that the decision then sees the edge passed; `None` when none is ahead.
pub fn until_next_edge(allotment: &Allotment) -> Option<Duration> {
    allotment.next_instant().map(|at| deadline::until(at, Timestamp::now()))
}

/// The allotment over every active maintenance, every node and every budget in the caches,
/// counting holds this controller wrote that the cache does not show yet.
pub fn allotment(ctx: &Context) -> Allotment {
    let alerts = ctx.alerts.borrow().clone();
    let (nodes, maintenances, budgets) = (ctx.nodes.state(), ctx.maintenances.state(), ctx.budgets.state());
    from_cluster::allotment(&Nodes::new(&nodes), &maintenances, &budgets, &alerts, Timestamp::now())
}
