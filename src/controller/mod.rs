//! The reconcile loop (SPEC 4).
//!
//! The shell around the pure [`crate::planner`]: it builds the planner's input from the
//! caches, carries out the returned [`crate::planner::DrainDecision`] (cordon, evict, taint,
//! status, Events) and runs the loop under a Lease.
//!
//! **Where to start reading**, from a watch event to a write: [`run`] (a leadership term
//! of [`leader`], the watches, the one loop that runs due jobs, [`schedule`]: when each job
//! is due and the one error policy) -> [`reconcile`] (one maintenance: deletion, stages,
//! status) -> [`nodes`] (hold, release, Node conditions) and [`drain`] (the Drain step:
//! [`pass`] plans every draining maintenance together, then targets, taints, conditions and
//! evictions through [`evict`], [`eviction_requests`], [`half_applied`], [`evacuate`]) ->
//! [`effects`] (the API writes themselves), each run through [`writes::Writes`]. Every
//! Event those steps emit is built by [`events`], the catalogue of reasons, types and notes.
//!
//! **Layers, bottom to top** (`hack/module-cycles.py` checks there is no circle):
//! 1. Below the context (none imports it): state ([`writes`], [`in_flight`], [`pass`],
//!    [`recorder`], [`schedule`], [`memory`], `evacuate::evacuator`, `eviction_requests::watches`),
//!    pure decisions (`nodes::holders`, `nodes::conditions`, [`status`], [`progress`],
//!    [`deadline`], [`requester`], [`state_metrics`], [`responders`], the Event catalogue
//!    [`events`]), single API calls taking a client ([`effects`], [`evict`], [`half_applied`])
//!    and [`leader`].
//! 2. [`context`]: what every reconcile shares; it imports only layer 1.
//! 3. Steps over the context: [`nodes`], [`drain`], [`eviction_requests`], [`evacuate`],
//!    [`rolling`], [`planned`], [`budgets`], [`janitor`].
//! 4. [`reconcile`], then [`run`] on top.
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
