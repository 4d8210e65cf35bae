//! The forecast's input built from the cluster's objects (SPEC 4.7), with the allotment's own
//! conversions ([`crate::planner::holds::from_cluster`]): shared by the controller (over its
//! snapshot) and `kubectl maintenance forecast` (over a LIST or a file).

use super::{Basis, BudgetTimeline, ForecastInput, NodeFact};
use crate::api::{NodeDisruptionBudget, NodeMaintenance, NodeMaintenanceNodeStatus, NodePhase, Stage};
use crate::gates::{AlertsRead, AlertsView, CompiledGates};
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::from_cluster::{budget_views, hold_request, node_views};
use k8s_openapi::jiff::Timestamp;
use rustc_hash::FxHashSet;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// When a node's part began: its `heldTime`, or its `drainStartTime` when that came later (a
/// group maintenance held in Cordon before its Drain).
fn started(s: &NodeMaintenanceNodeStatus) -> Option<Timestamp> {
    [&s.held_time, &s.drain_start_time].into_iter().flatten().map(|t| t.0).max()
}

/// Whether a node of `m` in `phase` is done: released (rolling maintenance), or drained
/// (group maintenance, which gives its nodes back only at Complete).
fn done(m: &NodeMaintenance, phase: Option<NodePhase>) -> bool {
    match phase {
        Some(NodePhase::Released) => true,
        Some(NodePhase::Drained) => m.spec.max_unavailable.is_none(),
        _ => false,
    }
}

/// `m`'s stored `status.nodeStatuses`.
pub fn stored_statuses(m: &NodeMaintenance) -> &[NodeMaintenanceNodeStatus] {
    m.status.as_ref().map(|s| s.node_statuses.as_slice()).unwrap_or_default()
}

/// The times from start to done of `m`'s finished nodes among `statuses` (its
/// `status.nodeStatuses`, stored or about to be written): released nodes of a rolling
/// maintenance, drained nodes of a group one, each with a recorded start (`heldTime`, or a
/// later `drainStartTime`) and `finishedTime`.
pub fn finished_durations(m: &NodeMaintenance, statuses: &[NodeMaintenanceNodeStatus]) -> Vec<Duration> {
    statuses
        .iter()
        .filter(|s| done(m, s.phase))
        .filter_map(|s| Duration::try_from(s.finished_time.as_ref()?.0.duration_since(started(s)?)).ok())
        .collect()
}

/// Where each node of `m` in `statuses` (its `status.nodeStatuses`, stored or about to be
/// written) stands now (SPEC 4.7 "nodes already done or draining"), by name; a node missing
/// from the result waits. A Complete maintenance (or one being
/// deleted) has every node of `selected` done; an Idle one has none started. A node whose
/// start was not recorded (a status written before `heldTime` existed) started `now`.
pub fn node_facts(
    m: &NodeMaintenance,
    statuses: &[NodeMaintenanceNodeStatus],
    selected: &[String],
    now: Timestamp,
) -> BTreeMap<String, NodeFact> {
    if m.spec.stage == Stage::Complete || m.metadata.deletion_timestamp.is_some() {
        let at: BTreeMap<&str, Timestamp> =
            statuses.iter().filter_map(|s| Some((s.node_ref.name.as_str(), s.finished_time.as_ref()?.0))).collect();
        return selected.iter().map(|n| (n.clone(), NodeFact::Done(at.get(n.as_str()).copied()))).collect();
    }
    if !m.is_active() {
        return BTreeMap::new();
    }
    let cordon_ends = m.spec.max_unavailable.is_some() && m.spec.stage == Stage::Cordon;
    statuses
        .iter()
        .map(|s| {
            let fact = match s.phase {
                _ if done(m, s.phase) => NodeFact::Done(s.finished_time.as_ref().map(|t| t.0)),
                Some(NodePhase::Draining | NodePhase::Drained) => NodeFact::Started(started(s).unwrap_or(now)),
                Some(NodePhase::Cordoning | NodePhase::Cordoned) if cordon_ends => {
                    NodeFact::Started(started(s).unwrap_or(now))
                }
                Some(NodePhase::Cordoning | NodePhase::Cordoned) => NodeFact::Held,
                Some(NodePhase::Waiting | NodePhase::Released) | None => NodeFact::Waiting,
            };
            (s.node_ref.name.clone(), fact)
        })
        .collect()
}

/// Every budget as the forecasts over one snapshot read them: the allotment's view of each
/// over `nodes` at `now` (who holds what from `maintenances`; no alerts: health gates are
/// assumed open), with its gates compiled to be evaluated at every simulated instant. Built
/// once and shared by the forecasts of every maintenance ([`input`]).
pub fn budget_timelines(
    budgets: &[Arc<NodeDisruptionBudget>],
    nodes: &Nodes<'_>,
    maintenances: &[Arc<NodeMaintenance>],
    now: Timestamp,
) -> Vec<BudgetTimeline> {
    let no_alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let views = budget_views(budgets, nodes, maintenances, &no_alerts, now);
    budgets
        .iter()
        .zip(views)
        .map(|(b, view)| BudgetTimeline {
            gates: CompiledGates::compile(&view.name, &b.spec),
            health_gate: b.spec.health_gate.as_ref().is_some_and(|g| g.max_unhealthy.is_some() || g.alerts.is_some()),
            view,
        })
        .collect()
}

/// The forecast's input for `m` (stored or a manifest) with its node `statuses` (stored:
/// [`stored_statuses`], or those a decision is about to write) over `nodes` and the budgets
/// of [`budget_timelines`] (`timelines`) at `now`: the allotment's views of the maintenance,
/// of the Nodes its budgets count and of those budgets over its nodes, the node facts, and
/// the basis (its finished nodes, else `node_duration`).
pub fn input<'a>(
    m: &NodeMaintenance,
    statuses: &[NodeMaintenanceNodeStatus],
    nodes: &'a Nodes<'_>,
    timelines: &[BudgetTimeline],
    node_duration: Option<Duration>,
    now: Timestamp,
) -> ForecastInput<'a> {
    let request = hold_request(m, nodes);
    let mine: FxHashSet<&str> = request.selected.iter().map(String::as_str).collect();
    let budgets: Vec<BudgetTimeline> =
        timelines.iter().filter(|b| b.view.nodes.iter().any(|n| mine.contains(n.as_str()))).cloned().collect();
    let counted: FxHashSet<&str> =
        mine.iter().copied().chain(budgets.iter().flat_map(|b| b.view.nodes.iter().map(String::as_str))).collect();
    let views = node_views(nodes, |n| counted.contains(n));
    ForecastInput {
        facts: node_facts(m, statuses, &request.selected, now),
        request,
        nodes: views,
        budgets,
        basis: Basis::new(&finished_durations(m, statuses), node_duration),
        now,
    }
}
