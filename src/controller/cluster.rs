//! The loop's cluster-wide job (SPEC 4.4, 4.5): the decision of
//! [`crate::planner::decide::cluster`] over the caches, then its writes, every write
//! attempted, the first failure returned so that the loop retries the job after its
//! backoff.

use super::context::{Context, ReconcileError, Write, ctx_err};
use crate::api::MAINTENANCE_PLANNED;
use crate::cluster::writes;
use crate::planner::decide::cluster::ClusterDecision;
use crate::planner::decide::planned::PlannedWrite;
use kube::ResourceExt;

/// Carries out `decision`: its budget gauges published ([`crate::metrics::BudgetGaugesView`]),
/// the budget statuses (server-side apply, conditional), then the Node conditions and what a
/// gone maintenance left on its nodes, concurrently within `--max-concurrent-writes`. Every
/// write is attempted.
///
/// # Errors
/// The first write that failed.
pub async fn write(ctx: &Context, decision: ClusterDecision) -> Result<(), ReconcileError> {
    ctx.metrics.budgets.set(decision.budget_gauges);
    let statuses = ctx
        .pacer
        .each(decision.budget_statuses, |(name, resource_version, status)| async move {
            let write = writes::write_budget_status(&ctx.client, &name, resource_version.as_deref(), &status);
            ctx.pacer.run(write).await.map_err(ctx_err(Write::BudgetStatus(name.clone())))
        })
        .await;
    let planned = ctx
        .pacer
        .each(decision.planned, |(node, write)| async move {
            let answer = match &write {
                PlannedWrite::Set(c) => {
                    let set = writes::set_node_conditions(&ctx.client, &node, std::slice::from_ref(c));
                    ctx.pacer.run(set).await.map(drop)
                }
                PlannedWrite::Remove => {
                    ctx.pacer.run(writes::remove_node_condition(&ctx.client, &node, MAINTENANCE_PLANNED)).await
                }
            };
            answer.map_err(ctx_err(Write::MaintenancePlanned(node.clone())))
        })
        .await;
    let orphaned = ctx
        .pacer
        .each(decision.orphaned, |(node, wanted)| async move {
            let answer = ctx.pacer.run(writes::set_node_conditions(&ctx.client, &node, &wanted)).await.map(drop);
            answer.map_err(ctx_err(Write::NodeConditions(node.clone())))
        })
        .await;
    let leftovers = ctx
        .pacer
        .each(decision.leftovers, |node| async move {
            let answer = ctx.pacer.run(writes::remove_leftovers(&ctx.client, &node)).await.map(drop);
            answer.map_err(ctx_err(Write::Leftovers(node.name_any())))
        })
        .await;
    statuses.into_iter().chain(planned).chain(orphaned).chain(leftovers).collect()
}
