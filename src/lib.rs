//! node-maintenance: KEP-4212 Declarative Node Maintenance for any Kubernetes cluster.
//!
//! Read top-down: [`api`] (the CRD types), [`selector`] (node and pod selectors),
//! [`admission`] (pure admission decisions), [`server`] (HTTPS, TLS, metrics),
//! [`planner`] (the pure drain planner and the controller's decision), [`cluster`] (kube
//! client, caches, authorization, every single API call and the Lease) and [`controller`]
//! (the loop that decides over the caches and writes the difference).

pub mod admission;
pub mod api;
pub mod app;
pub mod cli;
pub mod cluster;
pub mod controller;
pub mod field;
pub mod gates;
pub mod metrics;
pub mod planner;
pub mod selector;
pub mod server;
