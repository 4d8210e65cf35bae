//! The controller's side of rolling maintenance and NodeDisruptionBudgets (issue 20, SPEC
//! 4.5): builds the input of [`crate::planner::holds::allot`] from the caches and reads the
//! per-node facts a release depends on. The decisions are the planner's.

use super::context::Context;
use super::holders::{Holders, is_unschedulable};
use crate::api::{NodeDisruptionBudget, NodeMaintenance, NodePhase};
use crate::planner::holds::{self, Allotment, BudgetView, HoldRequest, NodeView};
use crate::selector::NodeMatcher;
use k8s_openapi::api::core::v1::{Node, NodeSelector};
use kube::ResourceExt;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Whether `m` holds nodes by its own stage: in Cordon or Drain and not being deleted.
pub fn is_active(m: &NodeMaintenance) -> bool {
    m.spec.stage.is_active() && m.metadata.deletion_timestamp.is_none()
}

/// The nodes `m` released (rolling): its stored `nodeStatuses` in phase Released.
pub fn released(m: &NodeMaintenance) -> BTreeSet<String> {
    let statuses = m.status.as_ref().map(|s| s.node_statuses.as_slice()).unwrap_or_default();
    statuses.iter().filter(|s| s.phase == Some(NodePhase::Released)).map(|s| s.node_ref.name.clone()).collect()
}

/// Whether the node's `Ready` condition is True.
pub fn is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node's `status.nodeInfo.bootID`, if reported.
pub fn boot_id(node: &Node) -> Option<&str> {
    let id = node.status.as_ref()?.node_info.as_ref()?.boot_id.as_str();
    (!id.is_empty()).then_some(id)
}

/// The `nodes` that `selector` matches (an invalid selector matches none).
pub fn matching(selector: &NodeSelector, nodes: &[Arc<Node>]) -> Vec<Arc<Node>> {
    let Some(m) = NodeMatcher::compile(selector) else { return Vec::new() };
    nodes.iter().filter(|n| m.matches(n)).cloned().collect()
}

fn names(nodes: Vec<Arc<Node>>) -> Vec<String> {
    nodes.iter().map(|n| n.name_any()).collect()
}

/// The allotment's view of `m` over `nodes`.
pub fn hold_request(m: &NodeMaintenance, nodes: &[Arc<Node>]) -> HoldRequest {
    HoldRequest {
        name: m.name_any(),
        created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        selected: names(matching(&m.spec.node_selector, nodes)),
        released: released(m),
        max_unavailable: m.spec.max_unavailable.clone(),
    }
}

/// The allotment's view of `nodes`; `in_flight(name, holders)` adds holders written but not
/// yet in the cache.
pub fn node_views(
    nodes: &[Arc<Node>],
    in_flight: impl Fn(&str, &BTreeSet<String>) -> BTreeSet<String>,
) -> Vec<NodeView> {
    nodes
        .iter()
        .map(|n| {
            let name = n.name_any();
            let mut holders = Holders::of(n).map(|h| h.maintenances).unwrap_or_default();
            holders.extend(in_flight(&name, &holders));
            NodeView { ready: is_ready(n), unschedulable: is_unschedulable(n), holders, name }
        })
        .collect()
}

/// The allotment over every active maintenance, every node and every budget in the caches,
/// counting holds this controller wrote that the cache does not show yet.
pub fn allotment(ctx: &Context) -> Allotment {
    let nodes = ctx.nodes.state();
    let maintenances = ctx.maintenances.state();
    let requests: Vec<HoldRequest> =
        maintenances.iter().filter(|m| is_active(m)).map(|m| hold_request(m, &nodes)).collect();
    let views = node_views(&nodes, |name, holders| ctx.holds_in_flight.holders(name, holders));
    holds::allot(&requests, &views, &budget_views(&ctx.budgets.state(), &nodes))
}

/// The budgets as the allotment reads them.
pub fn budget_views(budgets: &[Arc<NodeDisruptionBudget>], nodes: &[Arc<Node>]) -> Vec<BudgetView> {
    budgets
        .iter()
        .map(|b| BudgetView {
            name: b.name_any(),
            nodes: names(matching(&b.spec.node_selector, nodes)),
            max_unavailable: b.spec.max_unavailable.clone(),
            min_available: b.spec.min_available.clone(),
        })
        .collect()
}
