//! The KEP-5683 Node conditions the controller sets (SPEC 4.3): `MaintenanceInProgress`,
//! `DrainInProgress` and `Drained`, built for a node's phase, keeping `lastTransitionTime`
//! while a status holds. What it publishes in annotations is read back by
//! [`crate::api::node`].

use super::status::WAITING_FOR_GATE;
use crate::api::node::Holders;
use k8s_openapi::api::core::v1::{Node, NodeCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Where a node stands, for its conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodePhase {
    /// Held by an active maintenance that does not drain it (Cordon).
    Held,
    /// Drained by a Drain maintenance, pods remaining.
    Draining,
    /// Drained by a Drain maintenance whose drain may not start or go on now (a pause or a
    /// closed gate, SPEC 4.6): not Drained, even with nothing to evict.
    WaitingForGate,
    /// Drain finished: nothing left that the controller evicts.
    Drained,
    /// No active maintenance holds it any more.
    Released,
}

/// The three Node conditions for `phase`; `holders` names the maintenances in messages.
/// `lastTransitionTime` is kept from `node` where the status does not change.
pub fn conditions(node: &Node, phase: NodePhase, holders: &str, now: &Time) -> Vec<NodeCondition> {
    let message = match phase {
        NodePhase::Released => RELEASED.to_owned(),
        _ => format!("{HELD_BY}{holders}."),
    };
    statuses(phase)
        .into_iter()
        .map(|(type_, status, reason)| condition(node, type_, status, reason, message.clone(), now))
        .collect()
}

const RELEASED: &str = "No NodeMaintenance holds this node.";
const HELD_BY: &str = "Held by NodeMaintenance ";

/// (type, status, reason) of the three conditions for `phase`.
fn statuses(phase: NodePhase) -> [(&'static str, &'static str, &'static str); 3] {
    let (maint, drain, drained) = match phase {
        NodePhase::Held => (("True", "AdminRequested"), ("False", "NotDraining"), ("False", "NotDraining")),
        NodePhase::Draining => (("True", "AdminRequested"), ("True", "Draining"), ("False", "Draining")),
        NodePhase::WaitingForGate => {
            (("True", "AdminRequested"), ("False", WAITING_FOR_GATE), ("False", WAITING_FOR_GATE))
        }
        NodePhase::Drained => (("True", "AdminRequested"), ("False", "DrainCompleted"), ("True", "DrainCompleted")),
        NodePhase::Released => {
            (("False", "MaintenanceComplete"), ("False", "MaintenanceComplete"), ("False", "MaintenanceComplete"))
        }
    };
    [
        ("MaintenanceInProgress", maint.0, maint.1),
        ("DrainInProgress", drain.0, drain.1),
        ("Drained", drained.0, drained.1),
    ]
}

/// The three conditions a node is to show, as decided: its phase and the decision's time.
/// Built into `NodeCondition`s only for the write ([`WantedConditions::build`]): the first
/// decision of a drain over thousands of nodes would otherwise build three conditions of four
/// strings each for every node before a single one is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedConditions {
    /// The node's phase.
    pub phase: NodePhase,
    /// The decision's time: `lastTransitionTime` of a condition whose status changes.
    pub now: Time,
}

impl WantedConditions {
    /// The conditions for `node`, the node the decision read ([`conditions`]): messages name
    /// the maintenances of its holders annotation.
    pub fn build(&self, node: &Node) -> Vec<NodeCondition> {
        let holders = Holders::of(node).map(|h| h.names()).unwrap_or_default();
        conditions(node, self.phase, &holders, &self.now)
    }
}

/// The conditions `node` should show for `phase` (messages name `holders`, the
/// maintenances of its holders annotation: [`crate::api::node::HeldNodes::names`]), or
/// `None` when it shows them already: what a write must set.
pub fn wanted(node: &Node, phase: NodePhase, holders: &str, now: &Time) -> Option<WantedConditions> {
    // Compared before anything is built: a settled node costs no allocation.
    let message_is = |m: &str| match phase {
        NodePhase::Released => m == RELEASED,
        _ => m.strip_prefix(HELD_BY).and_then(|m| m.strip_suffix('.')) == Some(holders),
    };
    let current = statuses(phase).iter().all(|(type_, status, reason)| {
        existing(node, type_).is_some_and(|c| {
            c.status == *status && c.reason.as_deref() == Some(*reason) && c.message.as_deref().is_some_and(message_is)
        })
    });
    (!current).then(|| WantedConditions { phase, now: now.clone() })
}

/// The node's condition `type_`, if it has one.
pub fn existing<'a>(node: &'a Node, type_: &str) -> Option<&'a NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// Condition `type_` as this controller writes it on `node`: `lastTransitionTime` is kept
/// from the node's current one when the status does not change, else `now`.
pub fn condition(node: &Node, type_: &str, status: &str, reason: &str, message: String, now: &Time) -> NodeCondition {
    let since = match existing(node, type_) {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    NodeCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_transition_time: since,
        last_heartbeat_time: None,
    }
}

/// Whether the node already shows exactly these conditions (ignoring times).
pub fn conditions_current(node: &Node, wanted: &[NodeCondition]) -> bool {
    wanted.iter().all(|w| {
        existing(node, &w.type_).is_some_and(|c| c.status == w.status && c.reason == w.reason && c.message == w.message)
    })
}

/// Whether `node` shows `MaintenanceInProgress=True` as this controller sets it while none
/// of the maintenances its holders annotation names exists (`exists` asks the cache): one
/// was deleted after its finalizer was removed by hand, so no decision of its own will
/// release the node. Its conditions are then set as for a released node; the holders
/// annotation and the cordon stay (the alert on nodes held by a missing maintenance reads
/// them).
pub fn orphaned(node: &Node, exists: impl Fn(&str) -> bool) -> bool {
    let ours = existing(node, "MaintenanceInProgress")
        .is_some_and(|c| c.status == "True" && c.reason.as_deref() == Some("AdminRequested"));
    ours && !Holders::of(node).is_some_and(|h| h.any_exists(exists))
}

/// Whether the node was never given maintenance conditions (nothing to set False).
pub fn has_no_conditions_of_ours(node: &Node) -> bool {
    existing(node, "MaintenanceInProgress").is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn conditions_follow_the_phase_and_keep_transition_times() {
        let t0 = t("2026-11-22T00:00:00Z");
        let c = conditions(&Node::default(), NodePhase::Draining, "a", &t0);
        assert_eq!(
            c.iter().map(|c| (c.type_.as_str(), c.status.as_str())).collect::<Vec<_>>(),
            [("MaintenanceInProgress", "True"), ("DrainInProgress", "True"), ("Drained", "False")]
        );
        assert_eq!(c[0].reason.as_deref(), Some("AdminRequested"));
        let node = Node {
            status: Some(NodeStatus { conditions: Some(c.clone()), ..Default::default() }),
            ..Default::default()
        };
        assert!(conditions_current(&node, &c));
        let later = conditions(&node, NodePhase::Drained, "a", &t("2026-11-22T01:00:00Z"));
        assert_eq!(later[0].last_transition_time, Some(t0), "MaintenanceInProgress stayed True");
        assert_eq!(later[2].reason.as_deref(), Some("DrainCompleted"));
        assert!(!conditions_current(&node, &later));
        assert!(has_no_conditions_of_ours(&Node::default()));
    }

    #[test]
    fn wanted_is_what_differs_from_the_conditions_shown() {
        let t0 = t("2026-11-22T00:00:00Z");
        let phases =
            [NodePhase::Held, NodePhase::Draining, NodePhase::WaitingForGate, NodePhase::Drained, NodePhase::Released];
        for shown in phases {
            for holders in ["a", "a, b"] {
                let node = Node {
                    status: Some(NodeStatus {
                        conditions: Some(conditions(&Node::default(), shown, "a", &t0)),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                for phase in phases {
                    let built = conditions(&node, phase, holders, &t0);
                    let wanted =
                        wanted(&node, phase, holders, &t0).map(|w| conditions(&node, w.phase, holders, &w.now));
                    assert_eq!(wanted.is_none(), conditions_current(&node, &built), "{shown:?} -> {phase:?} {holders}");
                    assert!(wanted.is_none_or(|w| w == built));
                }
            }
            assert!(wanted(&Node::default(), shown, "a", &t0).is_some());
        }
    }

    #[test]
    fn conditions_of_a_maintenance_that_no_longer_exists_are_orphaned() {
        let t0 = t("2026-11-22T00:00:00Z");
        let with = |phase, holders: Option<&str>| {
            let mut node = Node {
                status: Some(NodeStatus {
                    conditions: Some(conditions(&Node::default(), phase, "a", &t0)),
                    ..Default::default()
                }),
                ..Default::default()
            };
            if let Some(h) = holders {
                let annotation = Holders { maintenances: [h.to_owned()].into(), unschedulable_before: false };
                node.metadata.annotations =
                    Some([(crate::api::MAINTENANCES_ANNOTATION.to_owned(), annotation.to_annotation())].into());
            }
            node
        };
        let exists = |m: &str| m == "live";
        assert!(orphaned(&with(NodePhase::Draining, Some("gone")), exists));
        assert!(orphaned(&with(NodePhase::Held, None), exists));
        assert!(!orphaned(&with(NodePhase::Held, Some("live")), exists), "a maintenance that exists releases it");
        assert!(!orphaned(&with(NodePhase::Released, Some("gone")), exists), "already released");
        assert!(!orphaned(&Node::default(), exists), "no conditions of ours");
    }
}
