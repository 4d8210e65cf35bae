//! The forecast's input built from the cluster's objects (SPEC 4.7), from the allotment's own
//! views ([`crate::planner::holds::from_cluster`]): shared by the controller's decision (over
//! its snapshot, with the views its allotment read), `kubectl maintenance forecast` (over a
//! LIST or a file) and admission's warnings ([`forecast_alone`]).

use super::{Basis, BudgetTimeline, Forecast, ForecastInput, NodeFact};
use crate::api::{NodeDisruptionBudget, NodeMaintenance, NodeMaintenanceNodeStatus, NodePhase, Stage};
use crate::gates::{AlertsRead, AlertsView, CompiledGates};
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::from_cluster::{budget_views, hold_request, node_views};
use crate::planner::holds::{BudgetView, HoldRequest, NodeView};
use k8s_openapi::jiff::Timestamp;
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
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

/// The cluster as the forecasts over one snapshot read it: every Node's and every budget's
/// view as the allotment of the same snapshot reads them
/// ([`AllotmentInput`](crate::planner::holds::from_cluster::AllotmentInput)), the budgets'
/// gates compiled to be evaluated at every simulated instant, and each Node's position by
/// name. Built once and shared by the forecasts of every maintenance ([`ForecastCluster::input`]).
pub struct ForecastCluster<'v, 'a> {
    nodes: &'v [NodeView<'a>],
    position: FxHashMap<&'v str, usize>,
    timelines: Vec<BudgetTimeline>,
}

impl<'v, 'a> ForecastCluster<'v, 'a> {
    /// Over the allotment's views of the Nodes (`nodes`) and of `budgets` (`views`, in the
    /// same order as `budgets`). The views' gate verdicts are not read: a forecast evaluates
    /// the gates at each instant it simulates, with no alert firing and no node unhealthy
    /// (health gates are assumed open).
    pub fn new(nodes: &'v [NodeView<'a>], budgets: &[Arc<NodeDisruptionBudget>], views: &[BudgetView]) -> Self {
        let timelines = budgets
            .iter()
            .zip(views)
            .map(|(b, view)| BudgetTimeline {
                gates: CompiledGates::compile(&view.name, &b.spec),
                health_gate: b
                    .spec
                    .health_gate
                    .as_ref()
                    .is_some_and(|g| g.max_unhealthy.is_some() || g.alerts.is_some()),
                view: view.clone(),
            })
            .collect();
        let position = nodes.iter().enumerate().map(|(i, n)| (&*n.name, i)).collect();
        ForecastCluster { nodes, position, timelines }
    }

    /// The forecast's input for `m` (stored or a manifest) as the allotment reads it
    /// (`request`: [`hold_request`], or the snapshot's own) with its node `statuses` (stored:
    /// [`stored_statuses`], or those a decision is about to write) at `now`: the views of the
    /// Nodes its budgets count, the budgets over its nodes, the node facts, and the basis (its
    /// finished nodes, else `node_duration`).
    pub fn input(
        &self,
        m: &NodeMaintenance,
        statuses: &[NodeMaintenanceNodeStatus],
        request: HoldRequest,
        node_duration: Option<Duration>,
        now: Timestamp,
    ) -> ForecastInput<'_> {
        let mine: FxHashSet<&str> = request.selected.iter().map(String::as_str).collect();
        let budgets: Vec<Cow<'_, BudgetTimeline>> = self
            .timelines
            .iter()
            .filter(|b| b.view.nodes.iter().any(|n| mine.contains(n.as_str())))
            .map(Cow::Borrowed)
            .collect();
        let mut counted: Vec<usize> = mine
            .iter()
            .copied()
            .chain(budgets.iter().flat_map(|b| b.view.nodes.iter().map(String::as_str)))
            .filter_map(|n| self.position.get(n).copied())
            .collect();
        counted.sort_unstable();
        counted.dedup();
        ForecastInput {
            facts: node_facts(m, statuses, &request.selected, now),
            request,
            nodes: counted.into_iter().map(|i| self.nodes[i].clone()).collect(),
            budgets,
            basis: Basis::new(&finished_durations(m, statuses), node_duration),
            now,
        }
    }
}

/// The forecast of `m` (stored or a manifest) with its node `statuses` over the cluster's
/// `nodes`, `budgets` and other `maintenances` at `now`, made on its own (the CLI, admission
/// warnings): the allotment's views with no alert firing, then
/// [`ForecastCluster::input`] and [`super::forecast`].
pub fn forecast_alone(
    m: &NodeMaintenance,
    statuses: &[NodeMaintenanceNodeStatus],
    nodes: &Nodes<'_>,
    budgets: &[Arc<NodeDisruptionBudget>],
    maintenances: &[Arc<NodeMaintenance>],
    node_duration: Option<Duration>,
    now: Timestamp,
) -> Forecast {
    let no_alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let views = node_views(nodes);
    let cluster = ForecastCluster::new(&views, budgets, &budget_views(budgets, nodes, maintenances, &no_alerts, now));
    super::forecast(&cluster.input(m, statuses, hold_request(m, nodes), node_duration, now))
}
