//! The Event catalogue (SPEC 4.4): every Event the controller emits, what it means and
//! when. Each Event is about a NodeMaintenance (its `regarding` object); those about one node
//! name it as the `related` object. Reasons are constants here, and a call site builds an
//! Event only through one of [`MaintenanceEvent`]'s constructors, so a reason, its type and
//! the wording of its note are decided in one place. Tests and docs quote these reasons and
//! notes: changing one changes what users filter and alert on.
//!
//! | reason | type | when |
//! |---|---|---|
//! | [`CORDONED`] | Normal | a selected node was schedulable and is now cordoned (Cordon) |
//! | [`RECORDONED`] | Warning | someone uncordoned a held node; cordoned again |
//! | [`UNCORDONED`] | Normal | the last holder released a node it had cordoned |
//! | [`EVICTION_BLOCKED`] | Warning | a PodDisruptionBudget refused an eviction; retried |
//! | [`EVICTION_COMPLETED`] | Normal | an eviction a budget recorded but that never happened, finished by deleting the pod |
//! | [`UNMANAGED_POD_EVICTED`] | Warning | evicted a pod nothing re-creates (`--unmanaged-pods=evict`) |
//! | [`EMPTY_DIR_DATA_DELETED`] | Warning | evicted a pod with `emptyDir` data (`--emptydir-pods=evict`) |
//! | [`POD_OPTED_OUT`] | Warning | a pod opted out of eviction holds the drain |
//! | [`UNMANAGED_POD_NOT_EVICTED`] | Warning | an unmanaged pod holds the drain (`--unmanaged-pods=block`) |
//! | [`EMPTY_DIR_POD_NOT_EVICTED`] | Warning | an `emptyDir` pod holds the drain (`--emptydir-pods=block`) |
//! | [`FAST_FORWARDED`] | Normal | a node already drained further than this maintenance's plan |
//! | [`NOT_EVACUATED`] | Warning | a pod evacuation by rollout does not apply to (no Deployment that can surge) is evicted |
//! | [`EVACUATING_BY_ROLLOUT`] | Normal | started a Deployment rollout to move a pod off a node |
//! | [`EVACUATED_BY_ROLLOUT`] | Normal | that rollout finished |
//! | [`ROLLOUT_FAILED`] | Warning | that rollout failed; the drain waits, nothing is forced |
//! | [`DRAINED`] | Normal | the `Drained` condition turned True |
//! | [`ALL_NODES_RELEASED`] | Normal | the `NodesReleased` condition turned True |
//! | [`DRAIN_TIMED_OUT`] | Warning | the drain ran past `spec.drainTimeout` |
//!
//! The three Events about a pod that holds the drain go once per maintenance and pod. Pure:
//! this file builds Events; `crate::controller::context::Context::event` publishes them.

use super::{deadline, status};
use crate::api::EvacuationStatus;
use crate::planner::evacuation::Need;
use crate::planner::{BlockedCause, EvictionRisk, FastForward, PodRef};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};

/// A selected node that was schedulable is now cordoned.
pub const CORDONED: &str = "Cordoned";
/// A node held by a maintenance was made schedulable by someone else and cordoned again.
pub const RECORDONED: &str = "Recordoned";
/// The last maintenance holding a node released it, and the node is schedulable again.
pub const UNCORDONED: &str = "Uncordoned";
/// A PodDisruptionBudget refused an eviction; it is retried.
pub const EVICTION_BLOCKED: &str = "EvictionBlocked";
/// An eviction a PodDisruptionBudget had accepted and that was not carried out was finished
/// by deleting the pod.
pub const EVICTION_COMPLETED: &str = "EvictionCompleted";
/// An evicted pod had no controller to re-create it.
pub const UNMANAGED_POD_EVICTED: &str = "UnmanagedPodEvicted";
/// An evicted pod's `emptyDir` data was deleted with it.
pub const EMPTY_DIR_DATA_DELETED: &str = "EmptyDirDataDeleted";
/// A pod opted out of eviction holds the drain.
pub const POD_OPTED_OUT: &str = "PodOptedOut";
/// A pod no controller re-creates holds the drain (`--unmanaged-pods=block`).
pub const UNMANAGED_POD_NOT_EVICTED: &str = "UnmanagedPodNotEvicted";
/// A pod with `emptyDir` volumes holds the drain (`--emptydir-pods=block`).
pub const EMPTY_DIR_POD_NOT_EVICTED: &str = "EmptyDirPodNotEvicted";
/// A node was already drained further than this maintenance's plan.
pub const FAST_FORWARDED: &str = "FastForwarded";
/// A pod that evacuation by rollout does not apply to (its owner is no Deployment that can
/// surge) goes through the Eviction API instead.
pub const NOT_EVACUATED: &str = "NotEvacuated";
/// A Deployment rollout was started to move a pod off a maintained node.
pub const EVACUATING_BY_ROLLOUT: &str = "EvacuatingByRollout";
/// A rollout started for a maintenance finished (as `status.evacuations[].reason`).
pub const EVACUATED_BY_ROLLOUT: &str = "EvacuatedByRollout";
/// A rollout started for a maintenance failed (as `status.evacuations[].reason`).
pub const ROLLOUT_FAILED: &str = "RolloutFailed";
/// The `Drained` condition turned True: the Event is named after the condition.
pub const DRAINED: &str = status::DRAINED;
/// The `NodesReleased` condition turned True: the Event has the condition's reason.
pub const ALL_NODES_RELEASED: &str = status::ALL_NODES_RELEASED;
/// The drain ran past `spec.drainTimeout`: the Event has the `Drained` condition's reason.
pub const DRAIN_TIMED_OUT: &str = deadline::DRAIN_TIMED_OUT;

/// Bytes an Event's note may hold (events.k8s.io/v1 validation).
const NOTE_LIMIT: usize = 1024;

/// One Event of the catalogue, ready to publish about a NodeMaintenance. Built only by its
/// constructors, one per kind of Event.
#[derive(Clone, Debug, PartialEq)]
pub struct MaintenanceEvent {
    type_: EventType,
    reason: &'static str,
    note: String,
    /// The node the Event is about, as its `related` object.
    node: Option<ObjectReference>,
}

impl MaintenanceEvent {
    fn new(type_: EventType, reason: &'static str, note: String, node: Option<&Node>) -> Self {
        MaintenanceEvent { type_, reason, note, node: node.map(|n| n.object_ref(&())) }
    }

    /// [`CORDONED`] (Normal) about `node`, which was schedulable and is now cordoned.
    pub fn cordoned(node: &Node) -> Self {
        let note = format!("Cordoned node {}.", node.name_any());
        Self::new(EventType::Normal, CORDONED, note, Some(node))
    }

    /// [`RECORDONED`] (Warning) about `node`, made schedulable while the maintenance named
    /// `maintenance` holds it, and cordoned again.
    pub fn recordoned(node: &Node, maintenance: &str) -> Self {
        let note =
            format!("Node {} was made schedulable while {maintenance} holds it; cordoned it again.", node.name_any());
        Self::new(EventType::Warning, RECORDONED, note, Some(node))
    }

    /// [`UNCORDONED`] (Normal) about `node`, released by its last holder.
    pub fn uncordoned(node: &Node) -> Self {
        let note = format!("Uncordoned node {}.", node.name_any());
        Self::new(EventType::Normal, UNCORDONED, note, Some(node))
    }

    /// [`EVICTION_BLOCKED`] (Warning): the eviction of `pod` on `node` was refused by the
    /// PodDisruptionBudget named `pdb` (in the pod's namespace).
    pub fn eviction_blocked(node: &Node, pod: &PodRef, pdb: &str) -> Self {
        let note = format!(
            "Eviction of {}/{} on {} is blocked by PodDisruptionBudget {}/{pdb}; retrying.",
            pod.namespace,
            pod.name,
            node.name_any(),
            pod.namespace
        );
        Self::new(EventType::Warning, EVICTION_BLOCKED, note, Some(node))
    }

    /// [`EVICTION_COMPLETED`] (Normal): `pod` on `node`, whose eviction the
    /// PodDisruptionBudget named `pdb` recorded as accepted, was deleted.
    pub fn eviction_completed(node: &Node, pod: &PodRef, pdb: &str) -> Self {
        let note = format!(
            "PodDisruptionBudget {ns}/{pdb} records an accepted eviction of {ns}/{} on {} that was not carried out; \
             deleted the pod (UID and resourceVersion preconditions) as that eviction would have.",
            pod.name,
            node.name_any(),
            ns = pod.namespace,
        );
        Self::new(EventType::Normal, EVICTION_COMPLETED, note, Some(node))
    }

    /// [`UNMANAGED_POD_EVICTED`] or [`EMPTY_DIR_DATA_DELETED`] (Warning), after `risk`:
    /// `pod` on `node` was evicted and that is lost with it.
    pub fn evicted_at_risk(node: &Node, pod: &PodRef, risk: EvictionRisk) -> Self {
        let (reason, what) = match risk {
            EvictionRisk::Unmanaged => (UNMANAGED_POD_EVICTED, "no controller re-creates it"),
            EvictionRisk::EmptyDir => (EMPTY_DIR_DATA_DELETED, "the data of its emptyDir volumes is deleted"),
        };
        let note = format!("Evicted pod {}/{} on {}: {what}.", pod.namespace, pod.name, node.name_any());
        Self::new(EventType::Warning, reason, note, Some(node))
    }

    /// [`POD_OPTED_OUT`], [`UNMANAGED_POD_NOT_EVICTED`] or [`EMPTY_DIR_POD_NOT_EVICTED`]
    /// (Warning), after `cause`: `pod` on `node` is not evicted and the drain waits for it.
    /// `None` for the causes only reported in the status (static pods, DaemonSet pods
    /// tolerating the draining taint: nothing could remove them, so they hold nothing).
    pub fn not_evicted(node: &Node, pod: &PodRef, cause: BlockedCause) -> Option<Self> {
        let reason = match cause {
            BlockedCause::StaticPod | BlockedCause::ToleratesDrainingTaint => return None,
            BlockedCause::OptedOut => POD_OPTED_OUT,
            BlockedCause::Unmanaged => UNMANAGED_POD_NOT_EVICTED,
            BlockedCause::EmptyDir => EMPTY_DIR_POD_NOT_EVICTED,
        };
        let note = format!(
            "Pod {}/{} on {} is not evicted ({}); the drain waits for it to go.",
            pod.namespace,
            pod.name,
            node.name_any(),
            cause.label()
        );
        Some(Self::new(EventType::Warning, reason, note, Some(node)))
    }

    /// [`FAST_FORWARDED`] (Normal): `ff.node` was already drained further than the plan of
    /// `ff.maintenance`. No `related` node: the note names it.
    pub fn fast_forwarded(ff: &FastForward) -> Self {
        let note = format!(
            "Node {} already drained further than {}'s plan; its drain targets there are fast-forwarded.",
            ff.node, ff.maintenance
        );
        Self::new(EventType::Normal, FAST_FORWARDED, note, None)
    }

    /// [`NOT_EVACUATED`] (Warning): a pod on `node` is evicted rather than moved by a
    /// rollout; `said` is what the node's `drainMessage` says of it
    /// (`not evacuated by rollout: ns/pod (why)`).
    pub fn not_evacuated(node: &Node, said: &str) -> Self {
        let note = format!("Pod on {}: {said}; it goes through the Eviction API.", node.name_any());
        Self::new(EventType::Warning, NOT_EVACUATED, note, Some(node))
    }

    /// [`EVACUATING_BY_ROLLOUT`] (Normal): a rollout of `deployment` was started to move
    /// `pod` off `node`, because of `need`.
    pub fn evacuating_by_rollout(deployment: &Deployment, pod: &PodRef, node: &Node, need: &Need) -> Self {
        let note = format!(
            "Started a rollout of Deployment {}/{} to move pod {}/{} off node {} ({need}): new pods start on \
             schedulable nodes before the old ones go.",
            deployment.namespace().unwrap_or_default(),
            deployment.name_any(),
            pod.namespace,
            pod.name,
            node.name_any(),
        );
        Self::new(EventType::Normal, EVACUATING_BY_ROLLOUT, note, Some(node))
    }

    /// [`EVACUATED_BY_ROLLOUT`] (Normal): the rollout recorded in `rollout` finished.
    pub fn evacuated_by_rollout(rollout: &EvacuationStatus) -> Self {
        let EvacuationStatus { namespace, name, message, .. } = rollout;
        let message = message.as_deref().unwrap_or_default();
        let note = format!("Deployment {namespace}/{name} evacuated by rollout: {message}.");
        Self::new(EventType::Normal, EVACUATED_BY_ROLLOUT, note, None)
    }

    /// [`ROLLOUT_FAILED`] (Warning): the rollout recorded in `rollout` failed.
    pub fn rollout_failed(rollout: &EvacuationStatus) -> Self {
        let EvacuationStatus { namespace, name, message, .. } = rollout;
        let message = message.as_deref().unwrap_or_default();
        let note = format!(
            "Rollout of Deployment {namespace}/{name} failed ({message}); its pods stay, the drain waits and nothing \
             is forced."
        );
        Self::new(EventType::Warning, ROLLOUT_FAILED, note, None)
    }

    /// [`DRAINED`] (Normal): the `Drained` condition turned True over `selected` nodes.
    pub fn drained(selected: usize) -> Self {
        Self::new(EventType::Normal, DRAINED, format!("All {selected} selected nodes are drained."), None)
    }

    /// [`ALL_NODES_RELEASED`] (Normal): `NodesReleased` turned True; the note is the
    /// condition's `message`.
    pub fn all_nodes_released(message: &str) -> Self {
        Self::new(EventType::Normal, ALL_NODES_RELEASED, message.to_owned(), None)
    }

    /// [`DRAIN_TIMED_OUT`] (Warning): the drain ran past its timeout; the note is the
    /// `Drained` condition's `message`, cut at a character boundary to the 1024 bytes a note
    /// may hold (ending in `…` when cut): the message lists what is in the way and can be long.
    pub fn drain_timed_out(message: &str) -> Self {
        let note = if message.len() <= NOTE_LIMIT {
            message.to_owned()
        } else {
            let end = (0..=NOTE_LIMIT - '…'.len_utf8()).rev().find(|i| message.is_char_boundary(*i)).unwrap_or(0);
            format!("{}…", &message[..end])
        };
        Self::new(EventType::Warning, DRAIN_TIMED_OUT, note, None)
    }

    /// The kube-runtime Event to publish: this type, reason and note, the reason as the
    /// action too, and the node (if any) as the related object.
    pub fn into_event(self) -> Event {
        Event {
            type_: self.type_,
            reason: self.reason.into(),
            note: Some(self.note),
            action: self.reason.into(),
            secondary: self.node,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn node(name: &str) -> Node {
        Node { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
    }

    fn pod() -> PodRef {
        PodRef { namespace: "apps".into(), name: "web-0".into(), uid: "u1".into() }
    }

    #[test]
    fn a_node_event_names_the_node_as_related_and_the_reason_as_action() {
        let ev = MaintenanceEvent::cordoned(&node("n1")).into_event();
        assert_eq!((ev.type_, ev.reason.as_str(), ev.action.as_str()), (EventType::Normal, CORDONED, CORDONED));
        assert_eq!(ev.note.as_deref(), Some("Cordoned node n1."));
        assert_eq!(ev.secondary.and_then(|r| r.name).as_deref(), Some("n1"));
        assert_eq!(MaintenanceEvent::drained(3).into_event().secondary, None);
    }

    #[test]
    fn each_cause_and_risk_has_its_reason() {
        let reasons: Vec<_> = BlockedCause::ALL
            .into_iter()
            .map(|c| MaintenanceEvent::not_evicted(&node("n1"), &pod(), c).map(|e| e.reason))
            .collect();
        let expected =
            [None, None, Some(POD_OPTED_OUT), Some(UNMANAGED_POD_NOT_EVICTED), Some(EMPTY_DIR_POD_NOT_EVICTED)];
        assert_eq!(reasons, expected);
        let risky = |r| MaintenanceEvent::evicted_at_risk(&node("n1"), &pod(), r);
        assert_eq!(risky(EvictionRisk::Unmanaged).reason, UNMANAGED_POD_EVICTED);
        assert_eq!(
            risky(EvictionRisk::EmptyDir).note,
            "Evicted pod apps/web-0 on n1: the data of its emptyDir volumes is deleted."
        );
    }

    #[test]
    fn the_timeout_note_fits_an_event() {
        assert_eq!(MaintenanceEvent::drain_timed_out("short").note, "short");
        let long = "é".repeat(NOTE_LIMIT);
        let note = MaintenanceEvent::drain_timed_out(&long).note;
        assert!(note.len() <= NOTE_LIMIT && note.ends_with('…'), "{}", note.len());
    }
}
