//! The controller's decision (SPEC 4): pure functions from what the caches show, the hold
//! allotment ([`super::holds`]), the drain planning pass ([`super::plan`]) and the clock to
//! everything the objects should look like, as data. The controller
//! (`crate::controller`) reads the caches, calls these and writes the difference.
//!
//! - [`maintenance`]: one NodeMaintenance's decision: finalizer, releases, holds, node
//!   writes, status, Events (from the transition between the stored status and the wanted
//!   one), evictions and rollouts, when to look again. [`maintenance::scope`] first says
//!   which nodes it works on and whether it drains, so the shell reads a drain's inputs only
//!   then.
//! - [`cluster`]: the cluster-wide decision: NodeDisruptionBudget statuses and gauges,
//!   `MaintenancePlanned`, conditions left by a maintenance that no longer exists.
//! - The rules they are made of: [`holders`] (hold and release a node), [`conditions`]
//!   (KEP-5683 Node conditions), [`status`] and [`progress`] (a maintenance's status and its
//!   nodes' entries), [`deadline`] (`drainTimeout`, wake-ups), [`planned`]
//!   (`MaintenancePlanned`), [`budgets`] (a budget's status), [`events`] (the Event
//!   catalogue).

pub mod budgets;
pub mod cluster;
pub mod conditions;
pub mod deadline;
pub mod drain;
pub mod events;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod holders;
pub mod maintenance;
pub mod planned;
pub mod progress;
pub mod status;
