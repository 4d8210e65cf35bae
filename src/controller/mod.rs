//! The controller (SPEC 4): one cluster-wide decision over the caches, then the writes.
//!
//! The shell around the pure [`crate::planner`]: it reads the caches, decides what every
//! object should look like, writes the difference and runs the loop under a Lease.
//!
//! **Where to start reading**, from a watch event to a write: [`run`] (a leadership term of
//! [`leader`], the watches, the one loop that runs due jobs; [`schedule`]: when each job is
//! due and the one error policy). Jobs due together share one hold allotment ([`rolling`]).
//! A maintenance's job is [`reconcile`]: it reads what a drain needs (the planning pass of
//! [`pass`], [`evacuate`]'s plan, refusals from [`evict`] and [`eviction_requests`]), asks
//! [`maintenance`] for the decision, pure data, and hands it to [`writer`], which writes it
//! in one documented order through [`effects`] and [`writes::Writes`]. The cluster-wide job
//! is [`cluster`] (budget statuses, `MaintenancePlanned`, leftover conditions), the same
//! shape. Every Event is built by [`events`], the catalogue of reasons, types and notes.
//!
//! **Adding a rule.** Whether a node may start (be held, take its first eviction) is a gate
//! of [`crate::planner::holds::START_GATES`] or [`crate::planner::from_cluster::eviction_gates`];
//! whether a pod may be evicted now is a rule of `POD_RULES` in `planner/state.rs`.
//! What a maintenance's status and nodes show is decided in [`maintenance`] only.
//!
//! **Layers** (`hack/module-cycles.py` checks there is no circle): pure decisions
//! ([`maintenance`], `nodes::holders`, `nodes::conditions`, [`status`], [`progress`],
//! [`deadline`], [`planned`], [`budgets`], [`requester`], [`responders`], [`events`]);
//! state ([`writes`], [`in_flight`], [`pass`], [`recorder`], [`schedule`], [`memory`]);
//! single API calls ([`effects`], [`evict`], [`half_applied`]); [`context`], the composition
//! root of a leadership term; steps over it ([`writer`], [`evacuate`], [`eviction_requests`],
//! [`cluster`], [`rolling`], [`janitor`], [`state_metrics`]); [`reconcile`], then [`run`].
//!
//! Parsers of what is recorded on a Node live in [`crate::api::node`]; the planner's input
//! builders in [`crate::planner::from_cluster`] and [`crate::planner::holds::from_cluster`].

pub mod alerts;
pub mod budgets;
pub mod cluster;
pub mod context;
pub mod deadline;
pub mod effects;
pub mod evacuate;
pub mod events;
pub mod evict;
pub mod eviction_requests;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod half_applied;
pub mod in_flight;
pub mod janitor;
pub mod leader;
pub mod maintenance;
pub mod memory;
pub mod nodes;
pub mod pass;
pub mod planned;
pub mod progress;
pub mod reconcile;
pub mod recorder;
pub mod requester;
pub mod responders;
pub mod rolling;
pub mod run;
pub mod schedule;
pub mod state_metrics;
pub mod status;
pub mod writer;
pub mod writes;
