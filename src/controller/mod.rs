//! The controller (SPEC 4): one decision over the caches, then the writes.
//!
//! The shell around the pure [`crate::planner`]: it reads the caches into one snapshot, asks
//! [`crate::planner::decide`] what every object should look like, writes the difference and
//! runs the loop under a Lease.
//!
//! **Where to start reading**, from a watch event to a write: [`run`] (a leadership term
//! under the Lease of [`crate::cluster::lease`], the watches, the one loop; [`schedule`]: when
//! each job is due and the one error policy). The jobs due together are one decision,
//! [`decide`]: it reads the caches into a [`crate::planner::decide::Snapshot`], reads what the
//! draining maintenances need (the planning pass of [`pass`], [`evacuate`]'s plan, refusals
//! from [`eviction_memory`] and [`crate::cluster::responders`]) and calls the planner; the
//! result is plain data. [`writer`] writes each maintenance's part in one documented order,
//! each write one call of [`crate::cluster::writes`] paced by [`pacer::Pacer`]; [`cluster`]
//! writes the cluster-wide part (budget statuses, `MaintenancePlanned`, leftover
//! conditions). Every Event comes from the catalogue [`crate::planner::decide::events`].
//!
//! **Adding a rule** is a change to the planner only (see [`crate::planner::decide`]): this
//! module adds no rule of its own. **Talking to the API** (a new call, a new watch) is
//! [`crate::cluster`]'s: this module says when, not how.
//!
//! **Layers** (`hack/module-cycles.py` checks there is no circle): state ([`pacer`],
//! [`expectations`], [`pass`], [`recorder`], [`schedule`], [`memory`], [`eviction_memory`]);
//! [`context`], the composition root of a leadership term; steps over it ([`decide`],
//! [`writer`], [`evacuate`], [`eviction_requests`], [`cluster`], [`janitor`], [`alerts`]);
//! then [`run`].

pub mod alerts;
pub mod cluster;
pub mod context;
pub mod decide;
pub mod evacuate;
pub mod evacuation_memory;
pub mod eviction_memory;
pub mod eviction_requests;
pub mod expectations;
pub mod janitor;
pub mod memory;
pub mod pacer;
pub mod pass;
pub mod recorder;
pub mod run;
pub mod schedule;
pub mod writer;
