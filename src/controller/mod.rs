//! The reconcile loop (SPEC 4).
//!
//! [`planner`] is the pure heart of the Drain stage: given the Drain-stage maintenances, the
//! pods and what each node already reached, it decides drain targets, cursors, messages and
//! which pods to evict (SPEC 4.3). Everything that talks to the API server builds a
//! [`planner::PlannerInput`] and carries out the returned [`planner::DrainPlan`].

pub mod effects;
pub mod evict;
pub mod gauges;
pub mod holders;
pub mod node_state;
pub mod nodes;
pub mod planner;
pub mod reconcile;
pub mod run;
pub mod status;
