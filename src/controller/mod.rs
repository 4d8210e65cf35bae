//! The controller (SPEC 4): one decision over the caches, then the writes.
//!
//! The shell around the pure [`crate::planner`]: it reads the caches into one snapshot, asks
//! [`crate::planner::decide`] what every object should look like, writes the difference and
//! runs the loop under a Lease.
//!
//! **Where to start reading**, from a watch event to a write: [`run`] (a leadership term of
//! [`leader`], the watches, the one loop; [`schedule`]: when each job is due and the one
//! error policy). The jobs due together are one decision, [`decide`]: it reads the caches
//! into a [`crate::planner::decide::Snapshot`], reads what the draining maintenances need
//! (the planning pass of [`pass`], [`evacuate`]'s plan, refusals from [`evict`] and
//! [`responders`]) and calls the planner; the result is plain data. [`writer`] writes each
//! maintenance's part in one documented order through [`effects`] and [`writes::Writes`];
//! [`cluster`] writes the cluster-wide part (budget statuses, `MaintenancePlanned`,
//! leftover conditions). Every Event comes from the catalogue
//! [`crate::planner::decide::events`].
//!
//! **Adding a rule** is a change to the planner only (see [`crate::planner::decide`]): this
//! module adds no rule of its own.
//!
//! **Layers** (`hack/module-cycles.py` checks there is no circle): state ([`writes`],
//! [`expectations`], [`pass`], [`recorder`], [`schedule`], [`memory`]); single API calls
//! ([`effects`], [`evict`], [`half_applied`]); [`context`], the composition root of a
//! leadership term; steps over it ([`decide`], [`writer`], [`evacuate`],
//! [`eviction_requests`], [`responders`], [`cluster`], [`janitor`],
//! [`alerts`]); then [`run`].

pub mod alerts;
pub mod cluster;
pub mod context;
pub mod decide;
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
pub mod recorder;
pub mod requester;
pub mod responders;
pub mod run;
pub mod schedule;
pub mod writer;
pub mod writes;
