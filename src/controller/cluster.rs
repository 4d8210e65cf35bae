//! The loop's cluster-wide job (SPEC 4.4, 4.5): the decision of
//! [`crate::planner::decide::cluster`] over the caches, then its writes, every write
//! attempted, the first failure returned so that the loop retries the job after its
//! backoff.

use super::context::{Context, ReconcileError, Write, ctx_err};
use super::effects::{self, MANAGER};
use crate::api::{GateReason, MAINTENANCE_PLANNED, NodeDisruptionBudget};
use crate::metrics::{BudgetGateLabels, BudgetLabels};
use crate::planner::decide::cluster::ClusterDecision;
use crate::planner::decide::planned::PlannedWrite;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde_json::json;
use std::collections::BTreeSet;

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
                    let set = effects::set_node_conditions(&ctx.client, &node, std::slice::from_ref(c));
                    ctx.writes.run(set).await.map(drop)
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
            let answer = ctx.writes.run(effects::set_node_conditions(&ctx.client, &node, &wanted)).await.map(drop);
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
