//! The decision for one NodeMaintenance (SPEC 4.1-4.3, 4.6): from what the caches show, the
//! hold allotment, the drain planning pass and the clock, everything the maintenance wants
//! written, as data ([`MaintenanceDecision`]). Pure: no client, no memory, no clock of its
//! own. `crate::controller::writer` writes the decision, in the order its fields are listed.
//!
//! Two steps, because a drain's inputs are costly to read: [`scope`] says which nodes the
//! maintenance selects, holds and whether it drains now; the shell reads the drain's inputs
//! ([`super::drain::DrainView`]) only then; [`decide`] says the rest. Every wanted value is derived from
//! what exists, so leftovers go as a matter of course, and Events come from the transition
//! between the stored status and the wanted one.

use super::conditions::{self, NodePhase as ConditionPhase, WantedConditions};
use super::deadline;
use super::drain::{DrainView, Evictions, NodeWrite, NotEvicted, drain_part, gate_waits_of};
use super::events::MaintenanceEvent;
use super::holders::{NodeChange, hold, release};
use super::progress;
use super::status::{self, record_stage, recorded};
use crate::api::node::{Holders, boot_id, is_ready, is_unschedulable, name as node_name};
use crate::api::{
    DONE_ANNOTATION, FINALIZER, NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceStatus, NodePhase,
    ReleaseTrigger, Stage,
};
use crate::planner::DrainReason;
use crate::planner::evacuation::EvacuationPlan;
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::{Allotment, Holds};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Look again after a write to the maintenance itself (the finalizer, Complete recorded on
/// deletion): the next writes are conditional on its resourceVersion, so they wait for the
/// fresh copy that the write's own watch event brings (usually first; this is the safety
/// net).
pub const FRESH_COPY_REQUEUE: Duration = Duration::from_millis(200);

/// What one decision reads besides the maintenance: the caches' contents, the allotment of
/// the jobs due together, the requeue intervals and the clock.
pub struct Observed<'a> {
    /// Every node in the cache, with their holders and selector index.
    pub nodes: &'a Nodes<'a>,
    /// Every NodeMaintenance in the cache.
    pub maintenances: &'a [Arc<NodeMaintenance>],
    /// Which nodes each maintenance may hold, what waits and why
    /// ([`crate::planner::holds::allot`]).
    pub allotment: &'a Allotment,
    /// Look again after this while a drain is in progress or waits on something.
    pub busy_requeue: Duration,
    /// Look again after this when nothing is to do (a safety net behind the watches).
    pub idle_requeue: Duration,
    /// Now.
    pub now: &'a Time,
}

/// Which nodes a maintenance works on now: what [`decide`] starts from and what the shell
/// needs to read a drain's inputs.
pub struct Scope {
    /// Nodes its selector matches (an invalid selector matches none).
    pub selected: Vec<Arc<Node>>,
    /// Its part of the allotment (empty unless it is active).
    pub holds: Holds,
    /// The selected nodes it may hold now, in the order of `selected`.
    pub held: Vec<Arc<Node>>,
    /// For each node of `held`: it shows the hold and the cordon already.
    pub shown: Vec<bool>,
    /// Every node of `held` shows its hold and cordon, and it holds some or none waits.
    pub cordoned: bool,
    /// Whether it drains now: Drain stage, finalizer in place, and Drain recorded already or
    /// every node it may hold shows the cordon (Cordon recorded first).
    pub draining: bool,
}

/// Releasing a node: its holders annotation and cordon ([`release`]), with what goes first.
pub struct Release {
    /// The node as the decision read it (its resourceVersion makes the patch conditional).
    pub node: Arc<Node>,
    /// The new holders and `spec.unschedulable`.
    pub change: NodeChange,
    /// No maintenance left on the node drains it: the draining taint goes and this
    /// controller's EvictionRequests on it are withdrawn first (a crash in between leaves
    /// the node held and the release retried, never a stray taint).
    pub undrain: bool,
    /// The last holder goes: the conditions of a released node, set before the patch
    /// (`None` when the node shows none of ours or shows these already).
    pub conditions: Option<WantedConditions>,
    /// The Event once the release is written (the node becomes schedulable).
    pub event: Option<MaintenanceEvent>,
}

/// Holding and cordoning a node (SPEC 4.1).
pub struct Hold {
    /// The node as the decision read it.
    pub node: Arc<Node>,
    /// The new holders and the cordon.
    pub change: NodeChange,
    /// The Event once it is written: cordoned, or cordoned again after someone uncordoned it.
    pub event: Option<MaintenanceEvent>,
}

/// What one maintenance wants written, field by field in the order of the writes.
#[derive(Default)]
pub struct MaintenanceDecision {
    /// `Some(true)`: add the finalizer, and nothing else this time (the next writes need the
    /// fresh copy). `Some(false)`: remove it once Complete is recorded (deletion).
    pub finalizer: Option<bool>,
    /// Nodes it holds and may no longer: released first.
    pub releases: Vec<Release>,
    /// Nodes to hold and cordon.
    pub holds: Vec<Hold>,
    /// Failed EvictionRequests are asked again (a drain is in progress).
    pub retry_eviction_requests: bool,
    /// Node writes before the status.
    pub node_writes: Vec<NodeWrite>,
    /// The wanted status (written when it differs from the stored one; `None`: untouched).
    pub status: Option<NodeMaintenanceStatus>,
    /// Nodes the status records as released: given back once it is written.
    pub releases_after_status: Vec<Release>,
    /// The Events of this decision's transitions from the stored status (a node
    /// fast-forwarded, Drained, NodesReleased, DrainTimedOut), once the status is written.
    pub events: Vec<MaintenanceEvent>,
    /// The drain ran past its timeout in this decision (counted once).
    pub timed_out: bool,
    /// Pods held back, each reported once.
    pub not_evicted: Vec<NotEvicted>,
    /// Rollouts to start and the Events of rollouts that changed state.
    pub evacuation: EvacuationPlan,
    /// Evictions to request, after the status.
    pub evictions: Evictions,
    /// When to look again (`None`: at the next change only).
    pub again: Option<Duration>,
}

impl MaintenanceDecision {
    /// Every node this decision writes: releases, holds, a drain's node writes.
    pub fn nodes(&self) -> impl Iterator<Item = &Arc<Node>> {
        let released = self.releases.iter().chain(&self.releases_after_status).map(|r| &r.node);
        released.chain(self.holds.iter().map(|h| &h.node)).chain(self.node_writes.iter().map(|w| &w.node))
    }
}

/// Which nodes `nm` works on now (see [`Scope`]).
pub fn scope(nm: &NodeMaintenance, o: &Observed<'_>) -> Scope {
    let name = nm.name_any();
    let selected = o.nodes.matching(&nm.spec.node_selector);
    let holds = if nm.is_active() {
        o.allotment.maintenances.get(&name).cloned().unwrap_or_default()
    } else {
        Holds::default()
    };
    let held: Vec<Arc<Node>> = selected.iter().filter(|n| holds.hold.contains(node_name(n))).cloned().collect();
    let stages = nm.status.as_ref().map(|s| s.stage_statuses.as_slice()).unwrap_or_default();
    let shown: Vec<bool> = held.iter().map(|n| shows_hold(o, n, &name)).collect();
    let cordoned = shown.iter().all(|s| *s) && (!held.is_empty() || holds.waiting.is_empty());
    let draining = nm.is_draining()
        && nm.finalizers().iter().any(|f| f == FINALIZER)
        && (recorded(stages, Stage::Drain) || (cordoned && recorded(stages, Stage::Cordon)));
    Scope { selected, holds, held, shown, cordoned, draining }
}

/// Decides everything `nm` wants written (SPEC 4.1-4.3, 4.6) from `o`, its `scope` and, when
/// it drains, `drain`. Pure; never panics on input.
pub fn decide(nm: &NodeMaintenance, o: &Observed<'_>, scope: Scope, drain: Option<DrainView>) -> MaintenanceDecision {
    let name = nm.name_any();
    let now = o.now;
    let has_finalizer = nm.finalizers().iter().any(|f| f == FINALIZER);
    let releases = |keep: &dyn Fn(&str) -> bool| -> Vec<Release> {
        o.nodes
            .held
            .nodes_of(&name)
            .iter()
            .filter(|n| !keep(node_name(n)))
            .filter_map(|n| release_of(n, &name, o))
            .collect()
    };
    // Deletion first: once the finalizer is gone nothing may cordon a node again (SPEC 4.2).
    // kube-runtime's `finalizer` helper is not used: it adds its finalizer to every live
    // object, and SPEC 4.2 keeps it off Idle maintenances (they hold nothing, and must stay
    // deletable while the controller is down or uninstalled).
    if nm.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return MaintenanceDecision::default();
        }
        let st = status::complete_status(nm.status.as_ref(), nm.metadata.generation, scope.selected.len(), now);
        return MaintenanceDecision {
            releases: releases(&|_| false),
            status: Some(st),
            finalizer: Some(false),
            ..Default::default()
        };
    }
    if (nm.spec.stage == Stage::Complete || nm.spec.stage.is_active()) && !has_finalizer {
        return MaintenanceDecision { finalizer: Some(true), again: Some(FRESH_COPY_REQUEUE), ..Default::default() };
    }
    if nm.spec.stage == Stage::Complete {
        let st = status::complete_status(nm.status.as_ref(), nm.metadata.generation, scope.selected.len(), now);
        return MaintenanceDecision {
            releases: releases(&|_| false),
            status: Some(st),
            again: Some(o.idle_requeue),
            ..Default::default()
        };
    }
    let mut d = MaintenanceDecision::default();
    let recorded_stages = nm.status.as_ref().map(|s| s.stage_statuses.clone()).unwrap_or_default();
    let mut st = NodeMaintenanceStatus {
        observed_generation: nm.metadata.generation,
        stage_statuses: recorded_stages,
        selected_nodes: Some(i32::try_from(scope.selected.len()).unwrap_or(i32::MAX)),
        ..Default::default()
    };
    let previous = |type_: &str| nm.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == type_));
    let previous_drained = previous(status::DRAINED);
    let mut requeue = o.idle_requeue;
    let mut plan = None;
    let mut in_the_way = None;
    let mut gate_waits = None;
    let mut fast_forwards = Vec::new();
    if nm.spec.stage.is_active() {
        let mine = &scope.holds;
        d.releases = releases(&|n| mine.hold.contains(n));
        let unshown = scope.held.iter().zip(&scope.shown).filter(|(_, shown)| !**shown);
        d.holds = unshown.filter_map(|(n, _)| hold_of(n, &name)).collect();
        st.stage_statuses = record_stage(&st.stage_statuses, Stage::Cordon, now);
        let mut planned = BTreeMap::new();
        let mut gated = Arc::default();
        match drain.filter(|_| scope.draining) {
            Some(view) => {
                st.stage_statuses = record_stage(&st.stage_statuses, Stage::Drain, now);
                let part = drain_part(nm, &scope.held, o.nodes, view, now);
                d.retry_eviction_requests = true;
                d.node_writes = part.node_writes;
                d.evictions = part.evictions;
                d.not_evicted = part.not_evicted;
                st.evacuations = part.evacuation.statuses.clone();
                d.evacuation = part.evacuation;
                planned = part.node_statuses;
                in_the_way = part.in_the_way;
                gated = part.gated;
                plan = part.decision.maintenance(&name).cloned();
                fast_forwards = part.fast_forwards;
                if let Some(at) = part.wait_deadline {
                    requeue = requeue.min(deadline::until(at, now.0));
                }
            }
            None => d.node_writes = mark_held(&name, &scope.held, o, now),
        }
        let mode = progress::Mode {
            maintenance: &name,
            draining: scope.draining,
            rolling: nm.spec.max_unavailable.is_some(),
            reboot_releases: nm.spec.release_nodes_on == Some(ReleaseTrigger::Reboot),
            now,
        };
        let stored: HashMap<&str, &NodeMaintenanceNodeStatus> =
            nm.status.iter().flat_map(|s| &s.node_statuses).map(|s| (s.node_ref.name.as_str(), s)).collect();
        // `held` is a part of `selected` in the same order: walked beside it.
        let mut held = scope.held.iter().zip(&scope.shown).peekable();
        st.node_statuses = scope
            .selected
            .iter()
            .map(|n| {
                let node = node_name(n);
                let cordoned = held.next_if(|(h, _)| Arc::ptr_eq(h, n)).is_some_and(|(_, shown)| *shown);
                let facts = progress::NodeFacts {
                    name: node,
                    wait: mine.waiting.get(node),
                    cordoned,
                    planned: planned.remove(node),
                    done: n.annotations().get(DONE_ANNOTATION).map(String::as_str),
                    boot_id: boot_id(n),
                    ready: is_ready(n),
                    stored: stored.get(node).copied(),
                };
                progress::node_entry(mode, facts)
            })
            .collect();
        st.node_counts = Some(progress::counts(&st.node_statuses));
        let stored_ff = |node: &str| stored.get(node).is_some_and(|s| s.fast_forwarded);
        d.events.extend(fast_forwards.iter().filter(|f| !stored_ff(&f.node)).map(MaintenanceEvent::fast_forwarded));
        let released_now: BTreeSet<&str> = st
            .node_statuses
            .iter()
            .filter(|s| s.phase == Some(NodePhase::Released) && mine.hold.contains(&s.node_ref.name))
            .map(|s| s.node_ref.name.as_str())
            .collect();
        d.releases_after_status = releases(&|n| !released_now.contains(n));
        let finished =
            st.node_statuses.iter().all(|s| matches!(s.phase, Some(NodePhase::Drained | NodePhase::Released)));
        // Pods left to finish end by themselves (a Pod event) or at the wait's deadline:
        // with every node draining or done, nothing to look at before either.
        let waits_only = plan.as_ref().is_some_and(|p| p.reason == DrainReason::WaitingForCompletion)
            && st
                .node_statuses
                .iter()
                .all(|s| matches!(s.phase, Some(NodePhase::Draining | NodePhase::Drained | NodePhase::Released)));
        let settled = if scope.draining {
            finished || waits_only
        } else {
            nm.spec.stage == Stage::Cordon && mine.waiting.is_empty() && scope.cordoned
        };
        requeue = requeue.min(if settled { o.idle_requeue } else { o.busy_requeue });
        if let Some(p) = plan.as_mut() {
            // Drained over every selected node: released ones count as done, waiting ones not.
            p.drained = finished;
        }
        gate_waits = gate_waits_of(&st.node_statuses, &mine.waiting, &gated);
        // The stall clock starts again when a wait (for pods to finish, for a gate) ends.
        let stored = nm.status.as_ref().and_then(|s| s.drain_status.as_ref());
        let resumed = status::waits(previous_drained)
            && gate_waits.is_none()
            && plan.as_ref().is_some_and(|p| p.reason != DrainReason::WaitingForCompletion);
        st.drain_status = plan.as_ref().map(|p| status::drain_status(p, stored, resumed, now));
        if let Some(edge) = o.allotment.next_instant() {
            requeue = requeue.min(deadline::until(edge, now.0));
        }
    }
    st.conditions = vec![status::drained_condition(
        previous_drained,
        nm.spec.stage,
        plan.as_ref(),
        in_the_way.as_deref(),
        gate_waits.as_ref(),
        nm.metadata.generation,
        now,
    )];
    let previous_released = previous(status::NODES_RELEASED);
    if nm.spec.max_unavailable.is_some() && nm.spec.stage.is_active() {
        st.conditions.push(status::released_condition(
            previous_released,
            st.node_counts.as_ref(),
            nm.metadata.generation,
            now,
        ));
    }
    st.conditions.extend(status::paused_condition(nm, previous(status::PAUSED), now));
    if nm.spec.stage == Stage::Drain {
        requeue = deadline::report(&nm.spec, &mut st, now, requeue);
    }
    if plan.as_ref().is_some_and(|p| p.drained) && previous_drained.is_none_or(|c| c.status != "True") {
        d.events.push(MaintenanceEvent::drained(scope.selected.len()));
    }
    if let Some(c) = st.conditions.iter().find(|c| c.type_ == status::NODES_RELEASED && c.status == "True")
        && previous_released.is_none_or(|p| p.status != "True")
    {
        d.events.push(MaintenanceEvent::all_nodes_released(&c.message));
    }
    if let Some(c) = st.conditions.first().filter(|c| deadline::newly_timed_out(previous_drained, Some(c))) {
        d.timed_out = true;
        d.events.push(MaintenanceEvent::drain_timed_out(&c.message));
    }
    d.status = Some(st);
    d.again = Some(requeue);
    d
}

/// Whether `node` shows the maintenance `name`'s hold: its holders name it and it is cordoned.
fn shows_hold(o: &Observed<'_>, node: &Node, name: &str) -> bool {
    o.nodes.held.held_by(node_name(node), name) && is_unschedulable(node)
}

/// Releasing `node` from the maintenance `name`, or `None` when nothing is to change.
fn release_of(node: &Arc<Node>, name: &str, o: &Observed<'_>) -> Option<Release> {
    let is = |m: &str, pred: fn(&NodeMaintenance) -> bool| o.maintenances.iter().any(|x| x.name_any() == m && pred(x));
    let change = release(node, name, |m| is(m, NodeMaintenance::is_active))?;
    let undrain =
        !change.holders.as_ref().is_some_and(|h| h.maintenances.iter().any(|m| is(m, NodeMaintenance::is_draining)));
    let last = change.holders.is_none();
    let conditions = if last && !conditions::has_no_conditions_of_ours(node) {
        conditions::wanted(node, ConditionPhase::Released, "", o.now)
    } else {
        None
    };
    let event = (last && is_unschedulable(node) && !change.unschedulable).then(|| MaintenanceEvent::uncordoned(node));
    Some(Release { node: node.clone(), change, undrain, conditions, event })
}

/// Holding `node` for the maintenance `name`, or `None` when it shows the hold already.
fn hold_of(node: &Arc<Node>, name: &str) -> Option<Hold> {
    let change = hold(node, name)?;
    let event = if change.recordoned {
        Some(MaintenanceEvent::recordoned(node, name))
    } else {
        (!is_unschedulable(node)).then(|| MaintenanceEvent::cordoned(node))
    };
    Some(Hold { node: node.clone(), change, event })
}

/// SPEC 4.3 (KEP-5683 conditions) for nodes held but not drained (Cordon, or Drain still
/// waiting for the cordon): `MaintenanceInProgress=True` (reason `AdminRequested`) on every
/// node of `held` the cache shows held by `name`, unless one of the node's holders has
/// `Drain` recorded (that drainer sets Draining/Drained). The rule depends only on the node
/// and the recorded stages, so maintenances sharing a node agree and never flap them.
fn mark_held(name: &str, held: &[Arc<Node>], o: &Observed<'_>, now: &Time) -> Vec<NodeWrite> {
    let has_drainer = |h: &Holders| {
        o.maintenances.iter().any(|m| {
            h.maintenances.contains(&m.name_any())
                && m.status.as_ref().is_some_and(|s| recorded(&s.stage_statuses, Stage::Drain))
        })
    };
    held.iter()
        .filter(|n| {
            o.nodes.held.holders(node_name(n)).is_some_and(|h| h.maintenances.contains(name) && !has_drainer(h))
        })
        .filter_map(|n| {
            let conditions = conditions::wanted(n, ConditionPhase::Held, o.nodes.held.names(node_name(n)), now)?;
            Some(NodeWrite { node: n.clone(), published: None, taint: false, conditions: Some(conditions) })
        })
        .collect()
}

#[cfg(test)]
mod tests;
