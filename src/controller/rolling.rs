//! The controller's side of rolling maintenance and NodeDisruptionBudgets (SPEC
//! 4.5): the allotment of [`crate::planner::holds::allot`] over the caches, counting the
//! holds this controller wrote that the Node cache does not show yet. The input building and
//! the decisions are the planner's ([`crate::planner::holds::from_cluster`]).

use super::context::Context;
use super::deadline;
use crate::api::{NodeDisruptionBudget, NodeMaintenance};
use crate::planner::gates::AlertsView;
use crate::planner::holds::from_cluster::{budget_views, hold_request, node_views};
use crate::planner::holds::{self, Allotment, HoldRequest};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// How long until the allotment's [`Allotment::next_instant`] (a window or blackout edge),
/// plus a second so that the decision then sees the edge passed; `None` when none is ahead.
pub fn until_next_edge(allotment: &Allotment) -> Option<Duration> {
    allotment.next_instant().map(deadline::until)
}

/// The allotment over every active maintenance, every node and every budget in the caches,
/// counting holds this controller wrote that the cache does not show yet.
pub fn allotment(ctx: &Context) -> Allotment {
    let alerts = ctx.alerts.borrow().clone();
    let in_flight = |name: &str, holders: &BTreeSet<String>| ctx.holds_in_flight.holders(name, holders);
    let (nodes, maintenances, budgets) = (ctx.nodes.state(), ctx.maintenances.state(), ctx.budgets.state());
    allotment_over(&nodes, &maintenances, &budgets, &alerts, in_flight, Timestamp::now())
}

/// The allotment over `nodes`, the active `maintenances` and `budgets` at `now`, with the
/// firing `alerts`; `in_flight(node, cached holders)` names the maintenances holding the node
/// by writes the cache may not show yet. Pure.
pub fn allotment_over(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    budgets: &[Arc<NodeDisruptionBudget>],
    alerts: &AlertsView,
    in_flight: impl Fn(&str, &BTreeSet<String>) -> BTreeSet<String>,
    now: Timestamp,
) -> Allotment {
    let requests: Vec<HoldRequest> =
        maintenances.iter().filter(|m| m.is_active()).map(|m| hold_request(m, nodes)).collect();
    let views = node_views(nodes, in_flight);
    holds::allot(&requests, &views, &budget_views(budgets, nodes, alerts, now))
}
