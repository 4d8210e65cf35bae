//! The controller (SPEC 4): one decision over the caches, then the writes.
//!
//! The shell around the pure [`crate::planner`]: it reads the caches, asks
//! [`crate::planner::decide`] what every object should look like, writes the difference
//! and runs the loop under a Lease.
//!
//! **Where to start reading**, from a watch event to a write: [`run`] (a leadership term of
//! [`leader`], the watches, the one loop that runs due jobs; [`schedule`]: when each job is
//! due and the one error policy). Jobs due together share one hold allotment ([`rolling`]).
//! A maintenance's job is [`reconcile`]: it reads what a drain needs (the planning pass of
//! [`pass`], [`evacuate`]'s plan, refusals from [`evict`] and [`eviction_requests`]), asks
//! [`crate::planner::decide::maintenance`] for the decision, plain data, and hands it to
//! [`writer`], which writes it in one documented order through [`effects`] and
//! [`writes::Writes`]. The cluster-wide job is [`cluster`]: the decision of
//! [`crate::planner::decide::cluster`] (budget statuses, `MaintenancePlanned`, leftover
//! conditions), then its writes. Every Event comes from the catalogue
//! [`crate::planner::decide::events`].
//!
//! **Adding a rule.** Whether a node may start (be held, take its first eviction) is a gate
//! of [`crate::planner::holds::START_GATES`] or [`crate::planner::from_cluster::eviction_gates`];
//! whether a pod may be evicted now is a rule of `POD_RULES` in `planner/state.rs`. What a
//! maintenance's status and nodes show is decided in [`crate::planner::decide`] only; this
//! module adds no rule of its own.
//!
//! **Layers** (`hack/module-cycles.py` checks there is no circle): state ([`writes`],
//! [`expectations`], [`pass`], [`recorder`], [`schedule`], [`memory`]); single API calls
//! ([`effects`], [`evict`], [`half_applied`]); [`context`], the composition root of a
//! leadership term; steps over it ([`writer`], [`evacuate`], [`eviction_requests`],
//! [`responders`], [`cluster`], [`rolling`], [`janitor`], [`state_metrics`], [`alerts`]);
//! [`reconcile`], then [`run`].

pub mod alerts;
pub mod cluster;
pub mod context;
pub mod effects;
pub mod evacuate;
pub mod evict;
pub mod eviction_requests;
pub mod expectations;
pub mod half_applied;
pub mod janitor;
pub mod leader;
pub mod memory;
pub mod pass;
pub mod reconcile;
pub mod recorder;
pub mod requester;
pub mod responders;
pub mod rolling;
pub mod run;
pub mod schedule;
pub mod state_metrics;
pub mod writer;
pub mod writes;
