//! The drain planner: a pure function from the Drain-stage maintenances, the pods and what each
//! node already reached to drain targets, cursors, messages and evictions (SPEC 4.3, KEP-4212
//! "Pod Selection" and "Pod Selection and DrainTargets Example").
//!
//! One pass, in order:
//! 0. **Pod roles** (`state.rs`, `POD_RULES`): each pod is evicted when targeted, reported
//!    instead, ignored, or left to finish (SPEC 4.6 `spec.waitForCompletion`, until its
//!    wait's deadline). Only pods to evict hold a cursor.
//! 1. **Advancing** (`proposal.rs`): each maintenance's cursor moves from its stored value to the
//!    first entry that some responsible pod on its nodes still matches (the last entry if
//!    none); several entries may be passed at once.
//! 2. **Targets**: the proposal at the cursor, one target per (podType, podSelector) group.
//! 3. **Combining** (`targets.rs`): per node, group-wise minimum of the proposals of the
//!    maintenances selecting it, then group-wise maximum with the node's floor (what it
//!    already reached), so targets never go backwards.
//! 4. A standstill between conflicting podSelector plans is broken for the oldest
//!    maintenance (`stall.rs`).
//! 5. **Drain slots** (`budget.rs`): nodes beyond
//!    `--max-draining-nodes` wait.
//! 6. **Publishing** (`publish.rs`): targeted pods, counts, messages, `reachedDrainTargets`,
//!    `Drained`, evictions, pods left to finish and fast-forward notices.
//!
//! The pass's state (`state.rs`) is one record per node and per maintenance, indexed by the
//! typed indices of `index.rs`; the other files read it through getters and only `stall`
//! changes it (through `Pass::raise`).
//!
//! The caller persists each maintenance's new `drain_plan_index` and each node's
//! `drain_targets` (as the next pass's [`NodeInput::reached`]).

mod budget;
pub mod decide;
pub mod evacuation;
pub mod forecast;
pub mod from_cluster;
pub mod holds;
mod index;
mod input;
mod messages;
mod output;
mod pods;
mod proposal;
mod publish;
mod selectors;
mod stall;
mod state;
mod targets;
pub mod wait;

#[cfg(test)]
mod operator_tests;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wait_tests;

pub use input::{CompletionWait, MaintenanceInput, NodeInput, PlannerInput, PlannerOptions, PodPolicy};
pub use messages::{
    BLOCKED, DRAINED, PLAN_COMPLETE, WAITING_FOR_COMPLETION, blocked_summary, risk_summary, waiting_summary,
};
pub use output::{
    BlockedCause, BlockedPod, DrainDecision, DrainReason, EvictionRisk, FastForward, FastForwardCause, MaintenancePlan,
    NodePlan, PodRef, RiskyPod,
};
pub use pods::{
    DO_NOT_DISRUPT_ANNOTATION, MIRROR_POD_ANNOTATION, PodLabels, PodView, SAFE_TO_EVICT_ANNOTATION, classify_pod,
    opted_out, owned_by_job, tolerates_draining_taint, wait_annotated,
};

/// Plans one pass of the Drain stage (SPEC 4.3, and 4.6 "Pods that finish"). Takes the
/// Drain-stage maintenances with their stored cursors and waits for completion, the pods, each
/// node's floor and drain start, and the time of the pass; returns per node its drain
/// targets, message, counts, pods to evict and pods left to finish, per maintenance its new
/// cursor, `reachedDrainTargets`, message, counts and `Drained`, the fast-forward notices,
/// and the next instant at which a wait ends. Pure: no I/O, never panics on input,
/// deterministic.
pub fn plan(input: &PlannerInput) -> DrainDecision {
    let mut pass = state::Pass::new(input);
    let raised = stall::break_standstills(&mut pass);
    let slots = budget::allot(&pass);
    publish::publish(&pass, &raised, slots)
}
