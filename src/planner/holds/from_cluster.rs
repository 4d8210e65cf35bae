//! The allotment's input built from the cluster's objects: what
//! [`super::allot`] reads of each maintenance, Node and NodeDisruptionBudget. Pure
//! conversions, shared by the controller (over its caches) and `review`'s roll preview (over
//! a snapshot).

use super::{Allotment, BudgetView, HoldRequest, NodeView};
use crate::api::node::{self, is_ready, is_unschedulable};
use crate::api::{NodeDisruptionBudget, NodeMaintenance};
use crate::gates::{AlertsRead, CompiledGates, GateNode};
use crate::planner::from_cluster::Nodes;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use rustc_hash::FxHashSet;
use std::borrow::Cow;
use std::collections::BTreeSet;

use std::sync::Arc;

fn names(nodes: Vec<Arc<Node>>) -> Vec<String> {
    nodes.iter().map(|n| n.name_any()).collect()
}

/// The allotment's view of maintenance `m` over `nodes`: its name, creation time (Unix
/// seconds), the nodes it selects, those it released, its `spec.maxUnavailable`.
pub fn hold_request(m: &NodeMaintenance, nodes: &Nodes<'_>) -> HoldRequest {
    HoldRequest {
        name: m.name_any(),
        created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        selected: names(nodes.matching(&m.spec.node_selector)),
        released: m.released_nodes(),
        max_unavailable: m.spec.max_unavailable.clone(),
        paused: m.spec.paused == Some(true),
    }
}

/// The allotment's view of every node of `nodes` (Ready, unschedulable, holders), in the
/// order of `nodes.list`.
pub fn node_views<'a>(nodes: &'a Nodes<'_>) -> Vec<NodeView<'a>> {
    static NONE: BTreeSet<String> = BTreeSet::new();
    nodes
        .list
        .iter()
        .map(|n| NodeView {
            ready: is_ready(n),
            unschedulable: is_unschedulable(n),
            holders: Cow::Borrowed(nodes.held.holders(node::name(n)).map_or(&NONE, |h| &h.maintenances)),
            name: Cow::Borrowed(node::name(n)),
        })
        .collect()
}

/// The `budgets` as the allotment reads them: name, the `nodes` each selects, its
/// `spec.maxUnavailable` / `spec.minAvailable`, and what its gates say at `now` over its
/// selected nodes (their Ready condition, and whether a maintenance of `maintenances` holds
/// them: a holders annotation naming only maintenances that are gone holds nothing) and the
/// firing `alerts` (SPEC 4.6).
pub fn budget_views(
    budgets: &[Arc<NodeDisruptionBudget>],
    nodes: &Nodes<'_>,
    maintenances: &[Arc<NodeMaintenance>],
    alerts: &AlertsRead,
    now: Timestamp,
) -> Vec<BudgetView> {
    let exists: FxHashSet<&str> = maintenances.iter().filter_map(|m| m.metadata.name.as_deref()).collect();
    let held = |n: &Node| nodes.held.holders(node::name(n)).is_some_and(|h| h.any_exists(|m| exists.contains(m)));
    budgets
        .iter()
        .map(|b| {
            let name = b.name_any();
            let selected = nodes.matching(&b.spec.node_selector);
            let health: Vec<GateNode> =
                selected.iter().map(|n| GateNode { ready: is_ready(n), held: held(n) }).collect();
            let gates = CompiledGates::compile(&name, &b.spec).unread_alerts(&b.spec, alerts).evaluate(
                &health,
                &alerts.view,
                now,
            );
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

/// What the allotment reads of the cluster, built once per snapshot: the allotment reads it,
/// and so do the forecasts of the same decision (SPEC 4.7: no second model of windows or
/// counts), which would otherwise select every node and budget again.
pub struct AllotmentInput<'a> {
    /// Every active maintenance, in the order of the snapshot's maintenances ([`hold_request`]).
    pub requests: Vec<HoldRequest>,
    /// Every Node, in the order of `nodes.list` ([`node_views`]).
    pub nodes: Vec<NodeView<'a>>,
    /// Every budget, in the order of the snapshot's budgets ([`budget_views`]).
    pub budgets: Vec<BudgetView>,
}

impl<'a> AllotmentInput<'a> {
    /// The allotment's input over `nodes`, the active `maintenances` and `budgets` at `now`,
    /// with the firing `alerts`. Pure.
    pub fn new(
        nodes: &'a Nodes<'_>,
        maintenances: &[Arc<NodeMaintenance>],
        budgets: &[Arc<NodeDisruptionBudget>],
        alerts: &AlertsRead,
        now: Timestamp,
    ) -> Self {
        AllotmentInput {
            requests: maintenances.iter().filter(|m| m.is_active()).map(|m| hold_request(m, nodes)).collect(),
            nodes: node_views(nodes),
            budgets: budget_views(budgets, nodes, maintenances, alerts, now),
        }
    }

    /// The allotment over this input ([`super::allot`]).
    pub fn allot(&self) -> Allotment {
        super::allot(&self.requests, &self.nodes, &self.budgets)
    }

    /// The request of the active maintenance named `name`, if it is one.
    pub fn request(&self, name: &str) -> Option<&HoldRequest> {
        self.requests.iter().find(|r| r.name == name)
    }
}
