//! `MaintenancePlanned=True` on the nodes a maintenance will take but does not hold yet
//! (SPEC 4.5; the 1.37 Node Lifecycle Conditions): nodes selected by an Idle
//! maintenance, and nodes of a rolling maintenance waiting for a place. Removed once no
//! maintenance plans the node (it moved on, released the node, or was deleted).
//!
//! Idle maintenances have no finalizer, so a deleted one is never reconciled: this is decided
//! by the loop's cluster-wide job ([`super::cluster`]), beside the budget statuses.
//! It writes only conditions that differ from the cached Node (a steady state writes
//! nothing), and removes only the condition it set (its reason), never someone else's.

use super::nodes::conditions;
use crate::api::{MAINTENANCE_PLANNED, NodeMaintenance, Stage};
use crate::planner::holds::{Allotment, Wait};
use crate::selector::matching;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::BTreeMap;
use std::sync::Arc;

/// `reason` of the condition this controller sets.
pub const REASON: &str = "NodeMaintenanceScheduled";

/// The maintenances that plan each node, by node name: `a (Idle)`, `b (waiting for a
/// place)`, `c (waiting for NodeDisruptionBudget general)`, in maintenance name order. The
/// texts hold no counts, so a roll moving on does not rewrite every waiting node.
pub fn planners(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    allotment: &Allotment,
) -> BTreeMap<String, Vec<String>> {
    let mut by_node: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let idle = maintenances.iter().filter(|m| m.spec.stage == Stage::Idle && m.metadata.deletion_timestamp.is_none());
    for m in idle {
        for node in matching(&m.spec.node_selector, nodes) {
            by_node.entry(node.name_any()).or_default().push((m.name_any(), "Idle".into()));
        }
    }
    for (name, holds) in &allotment.maintenances {
        for (node, wait) in &holds.waiting {
            let why = match wait {
                Wait::Turn { .. } => "waiting for a place".to_owned(),
                Wait::Budget { name, .. } => format!("waiting for NodeDisruptionBudget {name}"),
            };
            by_node.entry(node.clone()).or_default().push((name.clone(), why));
        }
    }
    by_node
        .into_iter()
        .map(|(node, mut of)| {
            of.sort();
            (node, of.into_iter().map(|(m, why)| format!("{m} ({why})")).collect())
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
/// when it already shows that (times ignored). A condition set by someone else (another
/// reason) is left alone when nothing plans the node.
pub fn wanted(node: &Node, planned_by: Option<&Vec<String>>, now: &Time) -> Option<PlannedWrite> {
    match planned_by.filter(|p| !p.is_empty()) {
        None => conditions::existing(node, MAINTENANCE_PLANNED)
            .filter(|c| c.reason.as_deref() == Some(REASON))
            .map(|_| PlannedWrite::Remove),
        Some(by) => {
            let message = format!("Planned by NodeMaintenance {}.", by.join(", "));
            let c = conditions::condition(node, MAINTENANCE_PLANNED, "True", REASON, message, now);
            (!conditions::conditions_current(node, std::slice::from_ref(&c))).then_some(PlannedWrite::Set(c))
        }
    }
}

#[cfg(test)]
mod tests;
