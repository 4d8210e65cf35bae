//! The allotment's input built from the cluster's objects: what
//! [`super::allot`] reads of each maintenance, Node and NodeDisruptionBudget. Pure
//! conversions, shared by the controller (over its caches) and `review`'s roll preview (over
//! a snapshot).

use super::{Allotment, BudgetView, HoldRequest, NodeView};
use crate::api::node::{Holders, is_ready, is_unschedulable};
use crate::api::{NodeDisruptionBudget, NodeMaintenance};
use crate::planner::gates::{AlertsView, CompiledGates, GateNode};
use crate::selector::matching;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use std::sync::Arc;

fn names(nodes: Vec<Arc<Node>>) -> Vec<String> {
    nodes.iter().map(|n| n.name_any()).collect()
}

/// The allotment's view of maintenance `m` over `nodes`: its name, creation time (Unix
/// seconds), the nodes it selects, those it released, its `spec.maxUnavailable`.
pub fn hold_request(m: &NodeMaintenance, nodes: &[Arc<Node>]) -> HoldRequest {
    HoldRequest {
        name: m.name_any(),
        created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        selected: names(matching(&m.spec.node_selector, nodes)),
        released: m.released_nodes(),
        max_unavailable: m.spec.max_unavailable.clone(),
        paused: m.spec.paused == Some(true),
    }
}

/// The allotment's view of `nodes` (Ready, unschedulable, holders annotation).
pub fn node_views(nodes: &[Arc<Node>]) -> Vec<NodeView> {
    nodes
        .iter()
        .map(|n| NodeView {
            ready: is_ready(n),
            unschedulable: is_unschedulable(n),
            holders: Holders::of(n).map(|h| h.maintenances).unwrap_or_default(),
            name: n.name_any(),
        })
        .collect()
}

/// The `budgets` as the allotment reads them: name, the `nodes` each selects, its
/// `spec.maxUnavailable` / `spec.minAvailable`, and what its gates say at `now` over its
/// selected nodes (their Ready condition and holders) and the firing `alerts` (SPEC 4.6).
pub fn budget_views(
    budgets: &[Arc<NodeDisruptionBudget>],
    nodes: &[Arc<Node>],
    alerts: &AlertsView,
    now: Timestamp,
) -> Vec<BudgetView> {
    budgets
        .iter()
        .map(|b| {
            let name = b.name_any();
            let selected = matching(&b.spec.node_selector, nodes);
            let health: Vec<GateNode> =
                selected.iter().map(|n| GateNode { ready: is_ready(n), held: Holders::of(n).is_some() }).collect();
            let gates = CompiledGates::compile(&name, &b.spec).evaluate(&health, alerts, now);
            BudgetView {
                nodes: names(selected),
                max_unavailable: b.spec.max_unavailable.clone(),
                min_available: b.spec.min_available.clone(),
                gates,
                name,
            }
        })
        .collect()
}

/// The allotment over `nodes`, the active `maintenances` and `budgets` at `now`, with the
/// firing `alerts`. Pure.
pub fn allotment(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    budgets: &[Arc<NodeDisruptionBudget>],
    alerts: &AlertsView,
    now: Timestamp,
) -> Allotment {
    let requests: Vec<HoldRequest> =
        maintenances.iter().filter(|m| m.is_active()).map(|m| hold_request(m, nodes)).collect();
    let views = node_views(nodes);
    super::allot(&requests, &views, &budget_views(budgets, nodes, alerts, now))
}
