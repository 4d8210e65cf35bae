//! Cluster access: what the program reads from and calls on the Kubernetes API, and the
//! standalone stand-in for it.

pub mod alerts;
pub mod cache;
mod changes;
pub mod deployments;
pub mod eviction;
pub mod eviction_requests;
pub mod half_applied;
pub mod lease;
mod node_index;
pub mod pods;
pub mod rbac;
pub mod responders;
pub mod sar;
pub mod standalone;
pub mod workloads;
pub mod writes;
