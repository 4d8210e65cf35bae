//! `MaintenancePlanned=True` on the nodes a maintenance will take but does not hold yet
//! (SPEC 4.5; the 1.37 Node Lifecycle Conditions): nodes selected by an Idle
//! maintenance, and nodes of a rolling maintenance waiting for a place. Removed once no
//! maintenance plans the node (it moved on, released the node, or was deleted).
//!
//! Idle maintenances have no finalizer, so a deleted one is never decided: this is decided
//! by the loop's cluster-wide job ([`super::cluster`]), beside the budget statuses.
//! It writes only conditions that differ from the cached Node (a steady state writes
//! nothing), and removes only the condition it set, never someone else's. Ours is told by its
//! reason ([`REASON`]) or, for the `MaintenanceWindow` reason that other tools may set too
//! (KEP-5683), by its message, which only this controller writes (`Planned by
//! NodeMaintenance …`).

use super::conditions;
use crate::api::{MAINTENANCE_PLANNED, NodeMaintenance, Stage};
use crate::planner::holds::Allotment;
use crate::planner::wait::Gates;
use crate::selector::matching;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `reason` of the condition this controller sets.
pub const REASON: &str = "NodeMaintenanceScheduled";
/// `reason` while a maintenance waits for the node's maintenance window (KEP-5683's
/// documented reason; SPEC 4.6).
pub const WINDOW_REASON: &str = "MaintenanceWindow";
/// How the message of our condition starts.
const MESSAGE_PREFIX: &str = "Planned by NodeMaintenance ";

/// What plans one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planners {
    /// `a (Idle)`, `b (waiting for a place)`, `c (waiting for NodeDisruptionBudget
    /// general)`, in maintenance name order.
    pub by: Vec<String>,
    /// Some maintenance waits for the node only for a maintenance window.
    pub window: bool,
}

/// The maintenances that plan each node, by node name. The texts hold no counts or times,
/// so a roll moving on or a window coming closer does not rewrite every waiting node.
pub fn planners(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    allotment: &Allotment,
) -> BTreeMap<String, Planners> {
    let mut by_node: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut window = BTreeSet::new();
    let idle = maintenances.iter().filter(|m| m.spec.stage == Stage::Idle && m.metadata.deletion_timestamp.is_none());
    for m in idle {
        for node in matching(&m.spec.node_selector, nodes) {
            by_node.entry(node.name_any()).or_default().push((m.name_any(), "Idle".into()));
        }
    }
    for (name, holds) in &allotment.maintenances {
        for (node, wait) in &holds.waiting {
            if wait.gates().is_some_and(Gates::for_window) {
                window.insert(node.clone());
            }
            by_node.entry(node.clone()).or_default().push((name.clone(), wait.summary()));
        }
    }
    by_node
        .into_iter()
        .map(|(node, mut of)| {
            of.sort();
            let by = of.into_iter().map(|(m, why)| format!("{m} ({why})")).collect();
            let window = window.contains(&node);
            (node, Planners { by, window })
        })
        .collect()
}

/// The write a node needs for its `MaintenancePlanned` condition.
#[derive(Clone, Debug, PartialEq)]
pub enum PlannedWrite {
    /// Set this condition (True, [`REASON`]).
    Set(NodeCondition),
    /// Remove the condition this controller set.
    Remove,
}

/// What `node` needs, given the maintenances that plan it (`None` or empty: none); `None`
/// when it already shows that (times ignored). A condition set by someone else is left alone
/// when nothing plans the node.
pub fn wanted(node: &Node, planned: Option<&Planners>, now: &Time) -> Option<PlannedWrite> {
    match planned.filter(|p| !p.by.is_empty()) {
        None => conditions::existing(node, MAINTENANCE_PLANNED).filter(|c| ours(c)).map(|_| PlannedWrite::Remove),
        Some(p) => {
            let message = format!("{MESSAGE_PREFIX}{}.", p.by.join(", "));
            let reason = if p.window { WINDOW_REASON } else { REASON };
            let c = conditions::condition(node, MAINTENANCE_PLANNED, "True", reason, message, now);
            (!conditions::conditions_current(node, std::slice::from_ref(&c))).then_some(PlannedWrite::Set(c))
        }
    }
}

/// Whether this controller set `c`.
fn ours(c: &NodeCondition) -> bool {
    match c.reason.as_deref() {
        Some(REASON) => true,
        Some(WINDOW_REASON) => c.message.as_deref().is_some_and(|m| m.starts_with(MESSAGE_PREFIX)),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
