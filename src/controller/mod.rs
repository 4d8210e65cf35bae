//! The reconcile loop (SPEC 4).
//!
//! The shell around the pure [`crate::planner`]: it builds a [`crate::planner::PlannerInput`]
//! from the caches, carries out the returned [`crate::planner::DrainDecision`] (cordon, evict,
//! taint, status, Events) and runs the loop under a Lease.

pub mod budgets;
pub mod context;
pub mod deadline;
pub mod drain;
pub mod effects;
pub mod evacuate;
pub mod evict;
pub mod eviction_requests;
pub mod gauges;
pub mod half_applied;
pub mod holders;
pub mod in_flight;
pub mod janitor;
pub mod node_state;
pub mod nodes;
pub mod pass;
pub mod planned;
pub mod progress;
pub mod reconcile;
pub mod requester;
pub mod responders;
pub mod rolling;
pub mod run;
pub mod state_metrics;
pub mod status;
pub mod writes;
