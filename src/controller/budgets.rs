//! NodeDisruptionBudget status (SPEC 4.5): what each budget allows now, written with
//! server-side apply only when it changed (a steady state writes nothing), and its gauges.
//! The loop's cluster-wide job, with the MaintenancePlanned conditions (`planned.rs`).

use super::context::{Context, ReconcileError, ctx_err};
use super::effects::MANAGER;
use super::status::{condition, now};
use crate::api::{NodeDisruptionBudget, NodeDisruptionBudgetStatus};
use crate::metrics::BudgetLabels;
use crate::planner::holds::{Allotment, BudgetState};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;
use std::collections::BTreeSet;

/// Condition type of a budget's status, as a PodDisruptionBudget's.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The status of a budget in `state` (the stored one in `previous`, for the condition's
/// transition time).
pub fn budget_status(
    previous: Option<&NodeDisruptionBudgetStatus>,
    state: &BudgetState,
    generation: Option<i64>,
    now: &Time,
) -> NodeDisruptionBudgetStatus {
    let allowed = state.allowed();
    let (status, reason, message) = match &state.invalid {
        Some(why) => ("False", "InvalidSpec", format!("The budget allows no disruption: {why}.")),
        None if allowed > 0 => ("True", "SufficientNodes", format!("{allowed} more selected nodes may be disrupted.")),
        None => (
            "False",
            "InsufficientNodes",
            format!(
                "{} of {} selected nodes unavailable; at most {} may be.",
                state.unavailable, state.expected, state.max_unavailable
            ),
        ),
    };
    let before = previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == DISRUPTION_ALLOWED));
    NodeDisruptionBudgetStatus {
        observed_generation: generation,
        expected_nodes: count(state.expected),
        current_available: count(state.available()),
        current_unavailable: count(state.unavailable),
        desired_available: count(state.desired_available),
        disruptions_allowed: count(allowed),
        conditions: vec![condition(DISRUPTION_ALLOWED, before, status, reason, message, generation, now)],
    }
}

/// Writes every budget's status that changed per `allotment` (over the caches of `ctx`) and
/// sets the budget gauges (removing those of budgets in `known` that are gone; `known` is
/// updated). Every write is attempted.
///
/// # Errors
/// The first write that failed (the loop retries the job after its backoff).
pub async fn publish(ctx: &Context, allotment: &Allotment, known: &mut BTreeSet<String>) -> Result<(), ReconcileError> {
    let api = Api::<NodeDisruptionBudget>::all(ctx.client.clone());
    let m = &ctx.metrics;
    let budgets = ctx.budgets.state();
    let at = now();
    let mut failed = Ok(());
    for b in &budgets {
        let name = b.name_any();
        let Some(state) = allotment.budgets.get(&name) else { continue };
        let labels = BudgetLabels { budget: name.clone() };
        m.budget_disruptions_allowed.get_or_create(&labels).set(i64::from(count(state.allowed())));
        m.budget_unavailable_nodes.get_or_create(&labels).set(i64::from(count(state.unavailable)));
        let waiting = allotment.budget_waiting.get(&name).copied().unwrap_or(0);
        m.budget_waiting_nodes.get_or_create(&labels).set(i64::from(count(waiting)));
        let status = budget_status(b.status.as_ref(), state, b.metadata.generation, &at);
        if b.status.as_ref() == Some(&status) {
            continue;
        }
        let body = json!({
            "apiVersion": NodeDisruptionBudget::api_version(&()),
            "kind": NodeDisruptionBudget::kind(&()),
            // Conditional: a status from a budget that changed since is refused, and the
            // change's watch event publishes again.
            "metadata": {"name": name, "resourceVersion": b.resource_version()},
            "status": status,
        });
        let params = PatchParams::apply(MANAGER).force();
        let written = ctx.writes.run(api.patch_status(&name, &params, &Patch::Apply(&body))).await;
        if let Err(e) = written.map_err(ctx_err(format!("writing the status of NodeDisruptionBudget {name}"))) {
            failed = failed.and(Err(e));
        }
    }
    let live: BTreeSet<String> = budgets.iter().map(|b| b.name_any()).collect();
    for gone in known.difference(&live) {
        let labels = BudgetLabels { budget: gone.clone() };
        m.budget_disruptions_allowed.remove(&labels);
        m.budget_unavailable_nodes.remove(&labels);
        m.budget_waiting_nodes.remove(&labels);
    }
    *known = live;
    failed
}
