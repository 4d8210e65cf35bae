//! The controller's decision (SPEC 4): pure functions from one consistent snapshot of the
//! caches and the clock ([`Snapshot`]) to everything the objects should look like, as data
//! ([`Decision`]). The controller (`crate::controller`) reads the caches into a snapshot,
//! calls [`scopes`] then [`decide`], and writes the difference.
//!
//! Two steps, because a drain's inputs are costly to read: [`scopes`] gives the hold
//! allotment ([`super::holds`]), the eviction gates and, for each maintenance decided now,
//! which nodes it works on and whether it drains; the shell reads the drain's inputs
//! ([`drain::DrainView`]: the planning pass of [`super::plan`], evacuation, refusals)
//! for those that drain; [`decide`] says the rest:
//! - [`maintenance`]: one NodeMaintenance's decision: finalizer, releases, holds, node
//!   writes, status, Events (from the transition between the stored status and the wanted
//!   one), evictions and rollouts, when to look again.
//! - [`cluster`]: the cluster-wide decision: NodeDisruptionBudget statuses and gauges,
//!   `MaintenancePlanned`, conditions left by a maintenance that no longer exists.
//! - The rules they are made of: [`holders`] (hold and release a node), [`conditions`]
//!   (KEP-5683 Node conditions), [`status`] and [`progress`] (a maintenance's status and its
//!   nodes' entries), [`deadline`] (`drainTimeout`, wake-ups), [`planned`]
//!   (`MaintenancePlanned`), [`budgets`] (a budget's status), [`events`] (the Event
//!   catalogue).
//!
//! **Adding a rule.** Whether a node may start (be held, take its first eviction) is a gate
//! of [`super::holds::START_GATES`] (a pause or a gate: [`super::wait::Gates`]); whether a pod
//! may be evicted now is a rule of `POD_RULES` in `planner/state.rs`. Each is one function
//! over the snapshot plus its API field; the decision reads them, the shell does not.

pub mod budgets;
pub mod cluster;
pub mod conditions;
pub mod deadline;
pub mod drain;
pub mod events;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod holders;
pub mod maintenance;
pub mod planned;
pub mod progress;
pub mod status;

use crate::api::{
    ForecastStatus, NodeDisruptionBudget, NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceStatus, NodePhase,
};
use crate::gates::AlertsRead;
use crate::planner::forecast::{self, from_cluster::ForecastCluster};
use crate::planner::from_cluster::{Nodes, eviction_gates};
use crate::planner::holds::Allotment;
use crate::planner::holds::from_cluster::{AllotmentInput, hold_request};
use crate::planner::wait::Gates;
use drain::DrainView;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use maintenance::{MaintenanceDecision, Observed, Scope};
use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// One consistent view of the caches and the clock: everything one decision reads besides
/// a drain's inputs ([`DrainView`]).
pub struct Snapshot<'a> {
    /// Every Node, with their holders and selector index, read once.
    pub nodes: Nodes<'a>,
    /// Every NodeMaintenance.
    pub maintenances: &'a [Arc<NodeMaintenance>],
    /// Every NodeDisruptionBudget.
    pub budgets: &'a [Arc<NodeDisruptionBudget>],
    /// The firing alerts the health gates read, and for which budgets they were read.
    pub alerts: &'a AlertsRead,
    /// Look again after this while a drain is in progress or waits on something.
    pub busy_requeue: Duration,
    /// Look again after this when nothing is to do (a safety net behind the watches).
    pub idle_requeue: Duration,
    /// Now, in whole seconds (`metav1.Time` is stored at second precision).
    pub now: Time,
}

/// The first step of a decision ([`scopes`]), borrowing the snapshot's Nodes.
pub struct Scopes<'a> {
    /// What the allotment read of the cluster: the forecasts of the same decision read it too.
    pub input: AllotmentInput<'a>,
    /// Which nodes each maintenance may hold, what waits and why.
    pub allotment: Allotment,
    /// Why no new eviction may start on which node, by node name; empty unless a
    /// maintenance decided now drains.
    pub gated: Arc<BTreeMap<String, Gates>>,
    /// Each maintenance decided now, with its scope, in the snapshot's order.
    pub maintenances: Vec<(Arc<NodeMaintenance>, Scope)>,
}

impl Scopes<'_> {
    /// The maintenances decided now that drain: those whose [`DrainView`] [`decide`] reads.
    pub fn draining(&self) -> impl Iterator<Item = &(Arc<NodeMaintenance>, Scope)> {
        self.maintenances.iter().filter(|(_, s)| s.draining)
    }
}

/// Everything one decision wants written.
pub struct Decision {
    /// Each maintenance decided, with its decision, in the order of [`Scopes::maintenances`].
    pub maintenances: Vec<(Arc<NodeMaintenance>, MaintenanceDecision)>,
    /// The cluster-wide decision, when it was asked for.
    pub cluster: Option<cluster::ClusterDecision>,
    /// The next instant at which time alone changes the allotment (a window or blackout
    /// edge), if any.
    pub next_edge: Option<Timestamp>,
    /// The snapshot's now: what the writes record as the time of this decision.
    pub now: Time,
}

impl Snapshot<'_> {
    fn observed<'b>(&'b self, allotment: &'b Allotment) -> Observed<'b> {
        Observed {
            nodes: &self.nodes,
            maintenances: self.maintenances,
            allotment,
            busy_requeue: self.busy_requeue,
            idle_requeue: self.idle_requeue,
            now: &self.now,
        }
    }
}

/// The first step of a decision over `s`: the hold allotment over every maintenance, node
/// and budget, and the scope of each maintenance `decided` names (by name); the eviction
/// gates when one of them drains. Pure; never panics on input.
pub fn scopes<'a>(s: &'a Snapshot<'_>, decided: impl Fn(&str) -> bool) -> Scopes<'a> {
    let input = AllotmentInput::new(&s.nodes, s.maintenances, s.budgets, s.alerts, s.now.0);
    let allotment = input.allot();
    let observed = s.observed(&allotment);
    let maintenances: Vec<(Arc<NodeMaintenance>, Scope)> = s
        .maintenances
        .iter()
        .filter(|m| decided(&m.name_any()))
        .map(|m| (m.clone(), maintenance::scope(m, &observed)))
        .collect();
    let gated = if maintenances.iter().any(|(_, scope)| scope.draining) {
        Arc::new(eviction_gates(&s.nodes, &allotment.node_gates))
    } else {
        Arc::default()
    };
    Scopes { input, allotment, gated, maintenances }
}

/// The decision over `s` from its `scopes`: each maintenance's, from its [`DrainView`] in
/// `drains` (by name) when it drains, and the cluster-wide one when `cluster`. Pure; never
/// panics on input.
pub fn decide(
    s: &Snapshot<'_>,
    scopes: Scopes<'_>,
    mut drains: BTreeMap<String, DrainView>,
    cluster: bool,
) -> Decision {
    let observed = s.observed(&scopes.allotment);
    // The cluster as the forecasts read it, built for the first forecast that is made.
    let forecasts = OnceCell::new();
    let forecasts =
        || forecasts.get_or_init(|| ForecastCluster::new(&scopes.input.nodes, s.budgets, &scopes.input.budgets));
    let maintenances = scopes
        .maintenances
        .into_iter()
        .map(|(m, scope)| {
            let drain = drains.remove(&m.name_any());
            let mut d = maintenance::decide(&m, &observed, scope, drain);
            if let Some(st) = d.status.as_mut().filter(|_| m.is_active()) {
                st.forecast = forecast_status(s, &scopes.input, &m, st, forecasts);
            }
            (m, d)
        })
        .collect();
    let cluster = cluster.then(|| cluster::decide(s.nodes.list, s.maintenances, s.budgets, &scopes.allotment, &s.now));
    Decision { maintenances, cluster, next_edge: scopes.allotment.next_instant(), now: s.now.clone() }
}

/// `status.forecast` of the active maintenance `m` whose decided status is `wanted` (SPEC 4.7),
/// over the snapshot `s`, what its allotment read (`input`) and the cluster as the forecasts
/// read it (`forecasts`, built once per decision when the first forecast is made).
///
/// The forecast simulates every node's start and release, which costs more than the rest of a
/// decision for a large pool, and it already accounts for every window and blackout edge
/// ahead: it is made again only when something it cannot foresee happened, which is when the
/// status changes in what it reads ([`forecast_inputs_changed`]): a node started or finished
/// (its basis and facts), a waiting node waits for something else (a budget changed), the
/// stage or the spec changed, or there is none yet. It is made from the node statuses about to
/// be written (a node finishing now is part of the basis at once, not one write later); the
/// stored one stands while the new one has not moved enough ([`forecast::status::status`]).
fn forecast_status<'f, 'v: 'f, 'a: 'v>(
    s: &Snapshot<'_>,
    input: &AllotmentInput<'_>,
    m: &NodeMaintenance,
    wanted: &NodeMaintenanceStatus,
    forecasts: impl FnOnce() -> &'f ForecastCluster<'v, 'a>,
) -> Option<ForecastStatus> {
    let stored = m.status.as_ref();
    let previous = stored.and_then(|st| st.forecast.as_ref());
    if let (Some(stored), Some(previous)) = (stored, previous)
        && !forecast_inputs_changed(stored, wanted)
    {
        return Some(previous.clone());
    }
    let name = m.name_any();
    let request = input.request(&name).cloned().unwrap_or_else(|| hold_request(m, &s.nodes));
    let input = forecasts().input(m, &wanted.node_statuses, request, None, s.now.0);
    Some(forecast::status::status(&forecast::forecast(&input), previous))
}

/// Whether `wanted` differs from `stored` in what the forecast reads of a maintenance's own
/// status: the spec generation, the stages, each node's phase, start and finish, and why a
/// waiting node waits.
fn forecast_inputs_changed(stored: &NodeMaintenanceStatus, wanted: &NodeMaintenanceStatus) -> bool {
    fn why(n: &NodeMaintenanceNodeStatus) -> Option<&str> {
        n.drain_message.as_deref().filter(|_| n.phase == Some(NodePhase::Waiting))
    }
    let same = |a: &NodeMaintenanceNodeStatus, b: &NodeMaintenanceNodeStatus| {
        a.node_ref == b.node_ref
            && a.phase == b.phase
            && a.held_time == b.held_time
            && a.drain_start_time == b.drain_start_time
            && a.finished_time == b.finished_time
            && why(a) == why(b)
    };
    stored.observed_generation != wanted.observed_generation
        || stored.stage_statuses != wanted.stage_statuses
        || stored.node_statuses.len() != wanted.node_statuses.len()
        || !stored.node_statuses.iter().zip(&wanted.node_statuses).all(|(a, b)| same(a, b))
}

#[cfg(test)]
mod tests;
