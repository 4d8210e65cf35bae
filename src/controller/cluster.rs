//! The loop's cluster-wide job (SPEC 4.4, 4.5): one decision over the caches, then the
//! writes. [`decide`] is pure: from the Nodes, NodeMaintenances, NodeDisruptionBudgets, the
//! hold allotment and the clock it says which objects must change and how;
//! [`write()`] carries that out, every write attempted, the first failure returned so that
//! the loop retries the job after its backoff. A steady state decides nothing to write.
//!
//! What it decides: each NodeDisruptionBudget's status (written by server-side apply,
//! conditional on the resourceVersion it was computed from) and gauges; the
//! `MaintenancePlanned` condition of every node ([`super::planned`]); and the conditions a
//! maintenance that no longer exists left on its nodes (set as for a released node).

use super::budgets::budget_status;
use super::context::{Context, ReconcileError, Write, ctx_err};
use super::effects::{self, MANAGER};
use super::nodes::conditions::{self, NodePhase};
use super::planned::{self, PlannedWrite};
use crate::api::{GateReason, MAINTENANCE_PLANNED, NodeDisruptionBudget, NodeDisruptionBudgetStatus, NodeMaintenance};
use crate::metrics::{BudgetGateLabels, BudgetLabels};
use crate::planner::holds::Allotment;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
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
        self.budget_statuses.is_empty() && self.planned.is_empty() && self.orphaned.is_empty()
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
        if conditions::orphaned(n, |m| exists.contains(m)) {
            // A released node's conditions name no holder.
            decision.orphaned.push((name, conditions::conditions(n, NodePhase::Released, "", now)));
        }
    }
    decision
}

/// Carries out `decision`: the budget statuses (server-side apply, conditional) and gauges
/// (removing those of budgets in `known` that are gone; `known` is updated), then the Node
/// conditions, concurrently within `--max-concurrent-writes`. Every write is attempted.
///
/// # Errors
/// The first write that failed.
pub async fn write(
    ctx: &Context,
    decision: ClusterDecision,
    known: &mut BTreeSet<String>,
) -> Result<(), ReconcileError> {
    let m = &ctx.metrics;
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    for (budget, g) in &decision.budget_gauges {
        let labels = BudgetLabels { budget: budget.clone() };
        m.budget_disruptions_allowed.get_or_create(&labels).set(count(g.allowed));
        m.budget_unavailable_nodes.get_or_create(&labels).set(count(g.unavailable));
        m.budget_waiting_nodes.get_or_create(&labels).set(count(g.waiting));
        m.budget_pause_requests.get_or_create(&labels).set(count(g.pause_requests));
        if let Some(at) = g.next_open {
            m.budget_window_next_open.get_or_create(&labels).set(at);
        } else {
            m.budget_window_next_open.remove(&labels);
        }
        for gate in GateReason::ALL {
            let labels = BudgetGateLabels { budget: budget.clone(), gate: gate.as_str() };
            let since = g.closed.iter().find(|(r, _)| *r == gate).map(|(_, since)| *since);
            m.budget_gate_closed.get_or_create(&labels).set(i64::from(since.is_some()));
            if let Some(at) = since {
                m.budget_gate_closed_since.get_or_create(&labels).set(at);
            } else {
                m.budget_gate_closed_since.remove(&labels);
            }
        }
    }
    let live: BTreeSet<String> = decision.budget_gauges.keys().cloned().collect();
    forget_budgets(m, known.difference(&live));
    *known = live;
    let api = Api::<NodeDisruptionBudget>::all(ctx.client.clone());
    let statuses = ctx
        .writes
        .each(decision.budget_statuses, |(name, resource_version, status)| {
            let api = api.clone();
            async move {
                let body = json!({
                    "apiVersion": NodeDisruptionBudget::api_version(&()),
                    "kind": NodeDisruptionBudget::kind(&()),
                    // Conditional: a status from a budget that changed since is refused, and
                    // the change's watch event decides again.
                    "metadata": {"name": name, "resourceVersion": resource_version},
                    "status": status,
                });
                let params = PatchParams::apply(MANAGER).force();
                let written = ctx.writes.run(api.patch_status(&name, &params, &Patch::Apply(&body))).await;
                written.map(drop).map_err(ctx_err(Write::BudgetStatus(name.clone())))
            }
        })
        .await;
    let planned = ctx
        .writes
        .each(decision.planned, |(node, write)| async move {
            let answer = match &write {
                PlannedWrite::Set(c) => {
                    ctx.writes.run(effects::set_node_conditions(&ctx.client, &node, std::slice::from_ref(c))).await
                }
                PlannedWrite::Remove => {
                    ctx.writes.run(effects::remove_node_condition(&ctx.client, &node, MAINTENANCE_PLANNED)).await
                }
            };
            answer.map_err(ctx_err(Write::MaintenancePlanned(node.clone())))
        })
        .await;
    let orphaned = ctx
        .writes
        .each(decision.orphaned, |(node, wanted)| async move {
            let answer = ctx.writes.run(effects::set_node_conditions(&ctx.client, &node, &wanted)).await;
            answer.map_err(ctx_err(Write::NodeConditions(node.clone())))
        })
        .await;
    statuses.into_iter().chain(planned).chain(orphaned).collect()
}

/// Removes every series of the budgets `gone`: budgets deleted, or all of them when this
/// replica stops leading (a former leader's last values must not page anyone).
pub fn forget_budgets<'a>(m: &crate::metrics::Metrics, gone: impl IntoIterator<Item = &'a String>) {
    for budget in gone {
        let labels = BudgetLabels { budget: budget.clone() };
        m.budget_disruptions_allowed.remove(&labels);
        m.budget_unavailable_nodes.remove(&labels);
        m.budget_waiting_nodes.remove(&labels);
        m.budget_pause_requests.remove(&labels);
        m.budget_window_next_open.remove(&labels);
        for gate in GateReason::ALL {
            let labels = BudgetGateLabels { budget: budget.clone(), gate: gate.as_str() };
            m.budget_gate_closed.remove(&labels);
            m.budget_gate_closed_since.remove(&labels);
        }
    }
}

#[cfg(test)]
mod tests;
