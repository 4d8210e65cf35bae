//! node-maintenance: KEP-4212 Declarative Node Maintenance for any Kubernetes cluster.
//!
//! Read top-down: [`api`] (the CRD types), [`selector`] (node and pod selectors),
//! [`admission`] (pure admission decisions), [`server`] (HTTPS, TLS, metrics),
//! [`cluster`] (kube client, caches, authorization) and [`controller`] (the reconcile loop).

pub mod admission;
pub mod api;
pub mod field;
pub mod selector;
pub mod metrics;
pub mod server;
pub mod cluster;
