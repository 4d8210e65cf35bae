//! The controller's gauges (SPEC 4.4): nodes under maintenance, read from the node cache,
//! and pods pending eviction, one series per Drain-stage maintenance. A series exists only
//! while its maintenance is in the Drain stage: it is removed when the maintenance leaves
//! Drain, completes, is deleted or is no longer found.

use super::context::Context;
use super::deadline::DRAIN_TIMED_OUT;
use super::holders::is_held;
use super::rolling::is_active;
use super::status::DRAINED;
use crate::api::{NodeCounts, NodeMaintenance, Stage};
use crate::metrics::{MaintenanceLabels, MaintenancePhaseLabels};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::BTreeSet;
use std::sync::Mutex;

/// The names of the maintenances that have a `pods_pending_eviction` or
/// `maintenance_nodes` series (a `Family` cannot list its label sets).
#[derive(Debug, Default)]
pub struct PendingSeries(Mutex<BTreeSet<String>>);

/// Nodes whose holders annotation names at least one maintenance.
pub fn nodes_under_maintenance(nodes: &Store<Node>) -> usize {
    nodes.state().iter().filter(|n| is_held(n)).count()
}

/// Drain-stage maintenances whose stored `Drained` condition reports a timeout (issue 14).
fn timed_out(maintenances: &Store<NodeMaintenance>) -> usize {
    let reports = |m: &NodeMaintenance| {
        let conditions = m.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == DRAINED && c.reason == DRAIN_TIMED_OUT)
    };
    let draining = |m: &NodeMaintenance| m.spec.stage == Stage::Drain && m.metadata.deletion_timestamp.is_none();
    maintenances.state().iter().filter(|m| draining(m) && reports(m)).count()
}

/// After a reconcile of `name`: sets `nodes_under_maintenance` and `drains_timed_out`,
/// sets its pods pending eviction (`Some` while it drains) and its nodes by phase (`Some`
/// while in Cordon or Drain, issue 20), or removes those series (`None`), and removes the
/// series of maintenances that are no longer active or no longer exist.
pub fn update(ctx: &Context, name: &str, pending: Option<i32>, counts: Option<&NodeCounts>) {
    let m = &ctx.metrics;
    m.nodes_under_maintenance.set(i64::try_from(nodes_under_maintenance(&ctx.nodes)).unwrap_or(i64::MAX));
    m.drains_timed_out.set(i64::try_from(timed_out(&ctx.maintenances)).unwrap_or(i64::MAX));
    let Ok(mut series) = ctx.pending_series.0.lock() else { return };
    match pending {
        Some(p) => _ = m.pods_pending_eviction.get_or_create(&labels(name)).set(i64::from(p)),
        None => _ = m.pods_pending_eviction.remove(&labels(name)),
    }
    match counts {
        Some(c) => {
            for (phase, n) in phases(c) {
                m.maintenance_nodes.get_or_create(&phase_labels(name, phase)).set(i64::from(n));
            }
        }
        None => remove_phases(ctx, name),
    }
    if pending.is_some() || counts.is_some() {
        series.insert(name.to_owned());
    } else {
        series.remove(name);
    }
    let all = ctx.maintenances.state();
    series.retain(|other| {
        let keep = other == name || all.iter().any(|x| x.name_any() == *other && is_active(x));
        if !keep {
            m.pods_pending_eviction.remove(&labels(other));
            remove_phases(ctx, other);
        }
        keep
    });
}

/// The phase label and count of each phase.
fn phases(c: &NodeCounts) -> [(&'static str, i32); 5] {
    [
        ("waiting", c.waiting),
        ("cordoned", c.cordoned),
        ("draining", c.draining),
        ("drained", c.drained),
        ("released", c.released),
    ]
}

fn remove_phases(ctx: &Context, name: &str) {
    for (phase, _) in phases(&NodeCounts::default()) {
        ctx.metrics.maintenance_nodes.remove(&phase_labels(name, phase));
    }
}

/// Removes the series of a maintenance that is gone (the controller found no object).
pub fn forget(ctx: &Context, name: &str) {
    ctx.metrics.pods_pending_eviction.remove(&labels(name));
    remove_phases(ctx, name);
    if let Ok(mut series) = ctx.pending_series.0.lock() {
        series.remove(name);
    }
}

fn labels(name: &str) -> MaintenanceLabels {
    MaintenanceLabels { maintenance: name.to_owned() }
}

fn phase_labels(name: &str, phase: &'static str) -> MaintenancePhaseLabels {
    MaintenancePhaseLabels { maintenance: name.to_owned(), phase }
}
