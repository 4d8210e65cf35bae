//! The controller's gauges (SPEC 4.4): nodes under maintenance, read from the node cache,
//! and pods pending eviction, one series per Drain-stage maintenance. A series exists only
//! while its maintenance is in the Drain stage: it is removed when the maintenance leaves
//! Drain, completes, is deleted or is no longer found.

pub mod series;

use super::context::Context;
use super::deadline::DRAIN_TIMED_OUT;
use super::status::DRAINED;
use crate::api::NodeMaintenance;
use crate::api::node::is_held;
use crate::metrics::MaintenanceLabels;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;

/// Nodes whose holders annotation names at least one maintenance.
pub fn nodes_under_maintenance(nodes: &Store<Node>) -> usize {
    nodes.state().iter().filter(|n| is_held(n)).count()
}

fn draining(maintenances: &Store<NodeMaintenance>, name: &str) -> bool {
    maintenances.state().iter().any(|m| m.name_any() == name && m.is_draining())
}

/// Draining maintenances whose stored `Drained` condition reports a timeout.
fn timed_out(maintenances: &Store<NodeMaintenance>) -> usize {
    let reports = |m: &NodeMaintenance| {
        let conditions = m.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == DRAINED && c.reason == DRAIN_TIMED_OUT)
    };
    maintenances.state().iter().filter(|m| m.is_draining() && reports(m)).count()
}

/// After a reconcile of `name`: sets `nodes_under_maintenance` and `drains_timed_out`,
/// sets its pods pending eviction (`Some` while it drains) or removes its series (`None`),
/// and removes the series of maintenances that are no longer draining or no longer exist.
pub fn update(ctx: &Context, name: &str, pending: Option<i32>) {
    let m = &ctx.metrics;
    m.nodes_under_maintenance.set(i64::try_from(nodes_under_maintenance(&ctx.nodes)).unwrap_or(i64::MAX));
    m.drains_timed_out.set(i64::try_from(timed_out(&ctx.maintenances)).unwrap_or(i64::MAX));
    let Ok(mut series) = ctx.pending_series.0.lock() else { return };
    match pending {
        Some(p) => {
            m.pods_pending_eviction.get_or_create(&labels(name)).set(i64::from(p));
            series.insert(name.to_owned());
        }
        None => {
            m.pods_pending_eviction.remove(&labels(name));
            series.remove(name);
        }
    }
    series.retain(|other| {
        let keep = other == name || draining(&ctx.maintenances, other);
        if !keep {
            m.pods_pending_eviction.remove(&labels(other));
        }
        keep
    });
}

/// Removes the series of a maintenance that is gone (the controller found no object).
pub fn forget(ctx: &Context, name: &str) {
    ctx.metrics.pods_pending_eviction.remove(&labels(name));
    if let Ok(mut series) = ctx.pending_series.0.lock() {
        series.remove(name);
    }
}

fn labels(name: &str) -> MaintenanceLabels {
    MaintenanceLabels { maintenance: name.to_owned() }
}
