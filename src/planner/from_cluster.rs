//! The drain planner's input built from the cluster's objects (SPEC 4.3): what [`super::plan`]
//! reads of each draining maintenance and each node. Pure conversions, shared by the
//! controller (over its caches, `controller::pass`) and `review`'s drain preview (over a
//! snapshot).

use super::{MaintenanceInput, NodeInput};
use crate::api::NodeMaintenance;
use crate::api::node::{has_draining_taint, held_by, is_unschedulable, published_status, reached_targets};
use crate::selector::NodeMatcher;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use std::sync::Arc;

/// Which selected nodes a Drain maintenance drains, for [`drain_maintenances`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// The nodes it holds and that are observed cordoned (SPEC 3.3): what the controller
    /// plans.
    Held,
    /// Every selected node, as if held: what `review`'s drain preview plans with, since a
    /// Drain maintenance holds its nodes as soon as the controller gets to it.
    Selected,
}

/// The maintenances that drain ([`NodeMaintenance::is_draining`]: Drain stage, not being
/// deleted), as planner input: each with its plan, its
/// stored cursor (`status.drainStatus.drainPlanIndex`) and the nodes it drains: those of the
/// `nodes` it selects (and, with [`Drained::Held`], holds cordoned), not released. With
/// [`Drained::Held`], a node that joins a drain (no published drain targets yet:
/// held by a rolling maintenance after an earlier one was released, or let through by a
/// budget) starts at the first entry: the cursor restarts at 0, so the new node's pods leave
/// in plan order too, while the nodes that reached further keep their floor.
pub fn drain_maintenances(
    maintenances: &[Arc<NodeMaintenance>],
    nodes: &[Arc<Node>],
    which: Drained,
) -> Vec<MaintenanceInput> {
    let drains = maintenances.iter().filter(|m| m.is_draining());
    drains
        .filter_map(|m| {
            let matcher = NodeMatcher::compile(&m.spec.node_selector)?;
            let name = m.name_any();
            let released = m.released_nodes();
            let drained: Vec<&Arc<Node>> = nodes
                .iter()
                .filter(|n| {
                    matcher.matches(n) && (which == Drained::Selected || (held_by(n, &name) && is_unschedulable(n)))
                })
                .filter(|n| !released.contains(n.metadata.name.as_deref().unwrap_or_default()))
                .collect();
            let joined = which == Drained::Held && drained.iter().any(|n| published_status(n).is_none());
            let stored = m.status.as_ref().and_then(|s| s.drain_status.as_ref()).map_or(0, |d| d.drain_plan_index);
            Some(MaintenanceInput {
                created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
                drain_plan: m.spec.drain_plan.clone(),
                drain_plan_index: if joined { 0 } else { stored },
                nodes: drained.iter().map(|n| n.name_any()).collect(),
                name,
            })
        })
        .collect()
}

/// The planner input of the `nodes` whose name `wanted` accepts: what each already reached
/// (the persisted floor) and whether it carries the draining taint (SPEC 4.3).
pub fn node_inputs(nodes: &[Arc<Node>], wanted: impl Fn(&str) -> bool) -> Vec<NodeInput> {
    nodes
        .iter()
        .filter(|n| wanted(n.metadata.name.as_deref().unwrap_or_default()))
        .map(|n| NodeInput { name: n.name_any(), reached: reached_targets(n), draining_taint: has_draining_taint(n) })
        .collect()
}
