//! The controller's gauges (SPEC 4.4): nodes under maintenance, read from the node cache,
//! and pods pending eviction, one series per Drain-stage maintenance. A series exists only
//! while its maintenance is in the Drain stage: it is removed when the maintenance leaves
//! Drain, completes, is deleted or is no longer found.

use super::context::Context;
use super::deadline::DRAIN_TIMED_OUT;
use super::holders::is_held;
use super::rolling::is_active;
use super::status::DRAINED;
use crate::api::{NodeMaintenance, Stage};
use crate::metrics::MaintenanceLabels;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The names of the maintenances that have a `pods_pending_eviction` series (a `Family`
/// cannot list its label sets).
#[derive(Debug, Default)]
pub struct PendingSeries(Mutex<BTreeSet<String>>);

impl PendingSeries {
    /// Number of series (issue 25: a gauge, flat over time).
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |s| s.len())
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Nodes whose holders annotation names at least one maintenance.
pub fn nodes_under_maintenance(nodes: &Store<Node>) -> usize {
    nodes.state().iter().filter(|n| is_held(n)).count()
}

fn draining(maintenances: &Store<NodeMaintenance>, name: &str) -> bool {
    maintenances.state().iter().any(|m| m.name_any() == name && m.spec.stage == Stage::Drain && is_active(m))
}

/// Drain-stage maintenances whose stored `Drained` condition reports a timeout (issue 14).
fn timed_out(maintenances: &Store<NodeMaintenance>) -> usize {
    let reports = |m: &NodeMaintenance| {
        let conditions = m.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == DRAINED && c.reason == DRAIN_TIMED_OUT)
    };
    let draining = |m: &NodeMaintenance| m.spec.stage == Stage::Drain && is_active(m);
    maintenances.state().iter().filter(|m| draining(m) && reports(m)).count()
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
