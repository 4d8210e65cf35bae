//! NodeDisruptionBudget status (SPEC 4.5): what each budget allows now, in the style of a
//! PodDisruptionBudget's. Decided and written by the loop's cluster-wide job
//! ([`super::cluster`]) only when it changed (a steady state writes nothing).

use super::status::condition;
use crate::api::{ClosedGate, NodeDisruptionBudgetStatus};
use crate::planner::holds::BudgetState;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Condition type of a budget's status, as a PodDisruptionBudget's.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// The status of a budget in `state` (the stored one in `previous`, for the condition's
/// transition time and since when each gate has been closed). While a gate is closed the
/// condition's reason is the first closed gate's and its message lists every one (SPEC 4.6).
pub fn budget_status(
    previous: Option<&NodeDisruptionBudgetStatus>,
    state: &BudgetState,
    generation: Option<i64>,
    now: &Time,
) -> NodeDisruptionBudgetStatus {
    let allowed = state.allowed();
    let closed = &state.gates.closed;
    let gates: Vec<&str> = closed.iter().map(|g| g.message.as_str()).collect();
    let (status, reason, message) = match (&state.invalid, closed.first()) {
        (Some(why), _) => ("False", "InvalidSpec", format!("The budget allows no disruption: {why}.")),
        (None, Some(first)) => ("False", first.reason.as_str(), format!("{}.", gates.join("; "))),
        (None, None) if !state.counted => {
            ("True", "SufficientNodes", "No count limits it and no gate is closed.".to_owned())
        }
        (None, None) if allowed > 0 => {
            ("True", "SufficientNodes", format!("{allowed} more selected nodes may be disrupted."))
        }
        (None, None) => (
            "False",
            "InsufficientNodes",
            format!(
                "{} of {} selected nodes unavailable; at most {} may be.",
                state.unavailable, state.expected, state.max_unavailable
            ),
        ),
    };
    let before = previous.and_then(|p| p.conditions.iter().find(|c| c.type_ == DISRUPTION_ALLOWED));
    let stored = previous.map(|p| p.closed_gates.as_slice()).unwrap_or_default();
    let closed_gates = closed
        .iter()
        .map(|g| ClosedGate {
            reason: g.reason,
            message: g.message.clone(),
            since: stored.iter().find(|s| s.reason == g.reason).map_or_else(|| now.clone(), |s| s.since.clone()),
        })
        .collect();
    NodeDisruptionBudgetStatus {
        observed_generation: generation,
        expected_nodes: count(state.expected),
        current_available: count(state.available()),
        current_unavailable: count(state.unavailable),
        desired_available: count(state.desired_available),
        disruptions_allowed: count(allowed),
        conditions: vec![condition(DISRUPTION_ALLOWED, before, status, reason, message, generation, now)],
        maintenance_window: state.gates.maintenance_window.clone(),
        closed_gates,
    }
}
