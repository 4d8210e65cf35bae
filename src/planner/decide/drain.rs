//! The Drain step's decision for one maintenance (SPEC 4.3, 4.6): from the planning pass,
//! each held node's published status (targets reached, drain start), taint and conditions,
//! the evictions, the pods held back, what is in the way, and what a drain whose nodes all
//! wait for a gate waits for. Pure; [`super::maintenance::decide`] calls it.

use super::conditions::{self, NodePhase as ConditionPhase, WantedConditions};
use super::events::MaintenanceEvent;
use super::status;
use crate::api::node::has_draining_taint;
use crate::api::{NodeMaintenance, NodeMaintenanceNodeStatus, NodePhase};
use crate::planner::evacuation::EvacuationPlan;
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::Wait;
use crate::planner::wait::Gates;
use crate::planner::{self, DrainDecision, EvictionRisk, FastForward, PodRef};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// What a drain decision reads, beyond [`super::maintenance::Observed`]: read by the shell for a maintenance
/// whose [`super::maintenance::Scope::draining`] is true.
pub struct DrainView {
    /// The planning pass over every draining maintenance (SPEC 4.3).
    pub decision: Arc<DrainDecision>,
    /// Why no new eviction may start on which node (a pause, a closed gate before the
    /// node's drain started; SPEC 4.6), by node name
    /// ([`crate::planner::from_cluster::eviction_gates`]).
    pub gated: Arc<BTreeMap<String, Gates>>,
    /// Evacuation by rollout of the pods the pass would evict (`crate::controller::evacuate::plan`).
    pub evacuation: EvacuationPlan,
    /// What refuses or answers this controller's evictions, by node name: the refusals
    /// remembered and the EvictionRequests being answered.
    pub refused: BTreeMap<String, String>,
}

/// A node's writes before the maintenance's status: each `None`/`false` when the node
/// shows it already.
pub struct NodeWrite {
    /// The node.
    pub node: Arc<Node>,
    /// The per-node status annotation with the drain targets reached (the floor), published
    /// before the evictions it allows.
    pub published: Option<NodeMaintenanceNodeStatus>,
    /// Add the draining taint (before DaemonSet evictions).
    pub taint: bool,
    /// Its KEP-5683 conditions.
    pub conditions: Option<WantedConditions>,
}

/// A pod that holds the drain without being evicted (opted out, or blocked by
/// `--unmanaged-pods`/`--emptydir-pods`): its Warning Event goes once per maintenance and
/// pod while this controller leads (the drain message names such pods on every pass, so a
/// repeat after a restart is harmless).
pub struct NotEvicted {
    /// The pod's UID.
    pub uid: Arc<str>,
    /// The Event.
    pub event: MaintenanceEvent,
}

/// How many pods a blocker summary names per cause.
const NAMED_BLOCKERS: usize = 5;

/// One eviction to request.
pub struct Eviction<'a> {
    /// The node the pod runs on.
    pub node: &'a Arc<Node>,
    /// The pod.
    pub pod: &'a PodRef,
    /// What the eviction loses: each one gets a Warning Event once it is accepted.
    pub risks: Vec<EvictionRisk>,
}

/// The evictions a drain decided: the planning pass's evictions on each node held, less
/// the pods a rollout moves instead. Listed lazily ([`Evictions::iter`]): a drain of
/// 100,000 pods is sent in rounds of a few hundred, and each decision would otherwise copy
/// every pod of the pass.
#[derive(Default)]
pub struct Evictions {
    pass: Option<Arc<DrainDecision>>,
    /// Each held node with evictions, with the position of its plan in the pass.
    nodes: Vec<(Arc<Node>, usize)>,
    /// Pods a rollout moves (by UID).
    withheld: HashSet<Arc<str>>,
}

impl Evictions {
    /// The evictions of `nodes` (each with its plan's position in `pass`) less `withheld`.
    pub(super) fn new(pass: Arc<DrainDecision>, nodes: Vec<(Arc<Node>, usize)>, withheld: HashSet<Arc<str>>) -> Self {
        Evictions { pass: Some(pass), nodes, withheld }
    }

    /// Every eviction, node by node in the order the maintenance holds them, each pod in
    /// the pass's order.
    pub fn iter(&self) -> impl Iterator<Item = Eviction<'_>> {
        let plans = self.pass.as_ref().map(|p| p.nodes.as_slice()).unwrap_or_default();
        self.nodes.iter().filter_map(|(node, at)| Some((node, plans.get(*at)?))).flat_map(move |(node, np)| {
            let risks_of =
                move |pod: &PodRef| np.at_risk.iter().filter(|r| r.pod.uid == pod.uid).map(|r| r.risk).collect();
            np.evict.iter().filter(|pod| !self.withheld.contains(&pod.uid)).map(move |pod| Eviction {
                node,
                pod,
                risks: if np.at_risk.is_empty() { Vec::new() } else { risks_of(pod) },
            })
        })
    }
}

/// What the drain decides for one maintenance's held nodes.
pub(super) struct DrainPart {
    pub(super) decision: Arc<DrainDecision>,
    pub(super) node_statuses: BTreeMap<String, (NodeMaintenanceNodeStatus, bool)>,
    pub(super) node_writes: Vec<NodeWrite>,
    pub(super) evictions: Evictions,
    pub(super) not_evicted: Vec<NotEvicted>,
    pub(super) fast_forwards: Vec<FastForward>,
    pub(super) evacuation: EvacuationPlan,
    pub(super) in_the_way: Option<String>,
    pub(super) wait_deadline: Option<Timestamp>,
    pub(super) gated: Arc<BTreeMap<String, Gates>>,
}

/// SPEC 4.3 Drain for `nm`'s `held` nodes from the planning pass in `view`: each node's
/// published status (the targets reached, its drain start), taint and conditions, the
/// evictions (less the pods a rollout moves), the pods held back, what is in the way.
pub(super) fn drain_part(
    nm: &NodeMaintenance,
    held: &[Arc<Node>],
    nodes: &Nodes<'_>,
    view: DrainView,
    now: &Time,
) -> DrainPart {
    let name = nm.name_any();
    let DrainView { decision, gated, evacuation, refused } = view;
    let mut part = DrainPart {
        decision: decision.clone(),
        node_statuses: BTreeMap::new(),
        node_writes: Vec::new(),
        evictions: Evictions::default(),
        not_evicted: Vec::new(),
        fast_forwards: decision.fast_forwards.iter().filter(|f| f.maintenance == name).cloned().collect(),
        evacuation: EvacuationPlan::default(),
        in_the_way: None,
        wait_deadline: None,
        gated: gated.clone(),
    };
    let (mut all_blocked, mut all_waiting, mut all_refused) = (Vec::new(), Vec::new(), BTreeSet::new());
    let mut evicting = Vec::new();
    for node in held {
        let node_name = node.name_any();
        let Some(at) = decision.position(&node_name) else { continue };
        let np = &decision.nodes[at];
        let node_refused = refused.get(&node_name).cloned();
        all_refused.extend(node_refused.clone());
        all_blocked.extend(np.blocked.iter().cloned());
        all_waiting.extend(np.waiting_for_completion.iter().cloned());
        part.wait_deadline = part.wait_deadline.into_iter().chain(np.wait_deadline).min();
        let extra = join_parts([
            node_refused,
            evacuation.note(&node_name),
            planner::blocked_summary(&np.blocked, NAMED_BLOCKERS),
            planner::waiting_summary(&np.waiting_for_completion, NAMED_BLOCKERS),
        ]);
        let stored = nodes.published(&node_name);
        let mut published = status::node_status(np, extra.as_deref());
        // The drain starts on a node when it may first evict (SPEC 4.6: the start of a
        // waitForCompletion timeout; gates no longer stop it after). A gated node with
        // nothing to evict (only pods left to finish, say) has not started: its wait's
        // timeout must not run out behind a closed gate.
        let may_evict = !np.waiting_for_slot && !gated.contains_key(&node_name);
        published.drain_start_time =
            stored.and_then(|s| s.drain_start_time.clone()).or_else(|| may_evict.then(|| now.clone()));
        if let (Some(message), Some(risks)) =
            (published.drain_message.as_mut(), planner::risk_summary(&np.at_risk, NAMED_BLOCKERS))
        {
            message.push_str("; ");
            message.push_str(&risks);
        }
        let phase = match (np.drained, np.waiting_for_gate) {
            (true, _) => ConditionPhase::Drained,
            (false, true) => ConditionPhase::WaitingForGate,
            (false, false) => ConditionPhase::Draining,
        };
        // A node has one published status. Maintenances that share it can word it
        // differently (each has its own evacuation notes): the first (by name) of those the
        // pass drains it for publishes the words, else each would rewrite the other's at
        // every decision. The targets and the drain start are the same for all of them, and
        // any of them publishes those when they are behind: its evictions must not go
        // before the targets that allow them.
        let publisher = np.maintenances.first().is_none_or(|first| *first == name);
        let behind = stored.is_none_or(|s| {
            s.drain_targets != published.drain_targets || s.drain_start_time != published.drain_start_time
        });
        let write = NodeWrite {
            node: node.clone(),
            published: (behind || publisher && stored != Some(&published)).then(|| published.clone()),
            taint: np.needs_daemonset_taint && !has_draining_taint(node),
            conditions: conditions::wanted(node, phase, nodes.held.names(&node_name), now),
        };
        if write.published.is_some() || write.taint || write.conditions.is_some() {
            part.node_writes.push(write);
        }
        if !np.evict.is_empty() {
            evicting.push((node.clone(), at));
        }
        for b in &np.blocked {
            if let Some(event) = MaintenanceEvent::not_evicted(node, &b.pod, b.cause) {
                part.not_evicted.push(NotEvicted { uid: b.pod.uid.clone(), event });
            }
        }
        let entry = NodeMaintenanceNodeStatus {
            fast_forwarded: part.fast_forwards.iter().any(|f| f.node == node_name),
            ..published
        };
        part.node_statuses.insert(node_name, (entry, np.drained));
    }
    let all_refused =
        (!all_refused.is_empty()).then(|| all_refused.into_iter().take(NAMED_BLOCKERS).collect::<Vec<_>>().join("; "));
    part.in_the_way = join_parts([
        all_refused,
        evacuation.summary(NAMED_BLOCKERS),
        planner::blocked_summary(&all_blocked, NAMED_BLOCKERS),
        planner::waiting_summary(&all_waiting, NAMED_BLOCKERS),
    ]);
    part.evictions = Evictions::new(decision, evicting, evacuation.withheld.clone());
    part.evacuation = evacuation;
    part
}

/// What a drain waits for when every selected node not yet drained or released waits for
/// a gate or a pause (SPEC 4.6): not held for that reason (`waiting`), or held and kept
/// from evicting (`gated`); the union of their gates. `None` when some node waits for
/// something else, or none waits: then the drain may be stalled.
pub(super) fn gate_waits_of(
    statuses: &[NodeMaintenanceNodeStatus],
    waiting: &BTreeMap<String, Wait>,
    gated: &BTreeMap<String, Gates>,
) -> Option<Gates> {
    let mut why: Option<Gates> = None;
    for s in statuses.iter().filter(|s| !matches!(s.phase, Some(NodePhase::Drained | NodePhase::Released))) {
        let name = &s.node_ref.name;
        let gates = match waiting.get(name) {
            Some(w) => w.gates()?,
            None => gated.get(name)?,
        };
        why.get_or_insert_default().merge(gates);
    }
    why
}

/// Joins the present parts of a blocker description with `; `.
pub fn join_parts(parts: impl IntoIterator<Item = Option<String>>) -> Option<String> {
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}
