//! The cluster-wide decision (SPEC 4.4, 4.5): from the Nodes, NodeMaintenances,
//! NodeDisruptionBudgets, the hold allotment and the clock, which objects must change and
//! how. Pure; `crate::controller::cluster` writes it. A steady state decides nothing to
//! write.
//!
//! What it decides: each NodeDisruptionBudget's status (written by server-side apply,
//! conditional on the resourceVersion it was computed from) and gauges; the
//! `MaintenancePlanned` condition of every node ([`super::planned`]); and what a
//! maintenance that no longer exists left on its nodes: its conditions (set as for a
//! released node), our draining taint and our status annotation (removed; the cordon and
//! the holders annotation stay under the orphaned-hold rule and its alert).

use super::budgets::budget_status;
use super::conditions::{self, NodePhase};
use super::planned::{self, PlannedWrite};
use crate::api::node::{Holders, has_draining_taint};
use crate::api::{
    GateReason, MAINTENANCE_STATUS_ANNOTATION, NodeDisruptionBudget, NodeDisruptionBudgetStatus, NodeMaintenance,
};
use crate::planner::holds::Allotment;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the cluster-wide job wants written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterDecision {
    /// Budget statuses that differ from the stored ones: (name, the resourceVersion they
    /// were computed from, the status).
    pub budget_statuses: Vec<(String, Option<String>, NodeDisruptionBudgetStatus)>,
    /// Every budget's gauges, by name.
    pub budget_gauges: BTreeMap<String, BudgetGauges>,
    /// `MaintenancePlanned` writes, by node name.
    pub planned: Vec<(String, PlannedWrite)>,
    /// Nodes left with our conditions by a maintenance that no longer exists, with the
    /// conditions of a released node.
    pub orphaned: Vec<(String, Vec<NodeCondition>)>,
    /// Nodes that no existing maintenance holds but that carry our draining taint or our
    /// status annotation (a maintenance deleted with its finalizer removed by hand, or
    /// while no replica ran): both removed, conditional on the node read.
    pub leftovers: Vec<Arc<Node>>,
}

/// What the gauges of one NodeDisruptionBudget say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetGauges {
    /// Disruptions allowed now.
    pub allowed: usize,
    /// Selected nodes unavailable.
    pub unavailable: usize,
    /// Nodes waiting for it.
    pub waiting: usize,
    /// Its closed gates, each with since when (Unix seconds).
    pub closed: Vec<(GateReason, i64)>,
    /// Its pause requests.
    pub pause_requests: usize,
    /// While its windows are closed: when one next opens (Unix seconds).
    pub next_open: Option<i64>,
}

impl ClusterDecision {
    /// Whether nothing is to be written (the gauges aside).
    pub fn is_quiet(&self) -> bool {
        self.budget_statuses.is_empty()
            && self.planned.is_empty()
            && self.orphaned.is_empty()
            && self.leftovers.is_empty()
    }
}

/// Decides the cluster-wide writes from the caches' contents, the hold `allotment` over
/// them and `now`. Pure; never panics on input.
pub fn decide(
    nodes: &[Arc<Node>],
    maintenances: &[Arc<NodeMaintenance>],
    budgets: &[Arc<NodeDisruptionBudget>],
    allotment: &Allotment,
    now: &Time,
) -> ClusterDecision {
    let mut decision = ClusterDecision::default();
    for b in budgets {
        let name = b.name_any();
        let Some(state) = allotment.budgets.get(&name) else { continue };
        let waiting = allotment.budget_waiting.get(&name).copied().unwrap_or(0);
        let status = budget_status(b.status.as_ref(), state, b.metadata.generation, now);
        let window = status.maintenance_window.as_ref().filter(|w| !w.open);
        let gauges = BudgetGauges {
            allowed: state.allowed(),
            unavailable: state.unavailable,
            waiting,
            closed: status.closed_gates.iter().map(|g| (g.reason, g.since.0.as_second())).collect(),
            pause_requests: b.spec.pause_requests.len(),
            next_open: window.and_then(|w| w.next_opens_at.as_ref()).map(|t| t.0.as_second()),
        };
        decision.budget_gauges.insert(name.clone(), gauges);
        if b.status.as_ref() != Some(&status) {
            decision.budget_statuses.push((name, b.resource_version(), status));
        }
    }
    let planners = planned::planners(nodes, maintenances, allotment);
    let exists: BTreeSet<String> = maintenances.iter().map(|m| m.name_any()).collect();
    for n in nodes {
        let name = n.name_any();
        if let Some(write) = planned::wanted(n, planners.get(&name), now) {
            decision.planned.push((name.clone(), write));
        }
        let ours = has_draining_taint(n) || n.annotations().contains_key(MAINTENANCE_STATUS_ANNOTATION);
        // The holders annotation is parsed only for a node that carries something of ours.
        if ours && !Holders::of(n).is_some_and(|h| h.any_exists(|m| exists.contains(m))) {
            decision.leftovers.push(n.clone());
        }
        if conditions::orphaned(n, |m| exists.contains(m)) {
            // A released node's conditions name no holder.
            decision.orphaned.push((name, conditions::conditions(n, NodePhase::Released, "", now)));
        }
    }
    decision
}

#[cfg(test)]
mod tests;
