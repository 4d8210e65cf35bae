//! Cluster access: what the program reads from and calls on the Kubernetes API, and the
//! standalone stand-in for it.

pub mod alerts;
pub mod cache;
mod changes;
pub mod deployments;
mod node_index;
pub mod pods;
pub mod rbac;
pub mod sar;
pub mod standalone;
pub mod workloads;
