//! What this controller records on a Node, read back (SPEC 4.1-4.3): the holders annotation
//! (`nodemaintenance.k8s.io/maintenances`: which maintenances hold the node and whether it
//! was unschedulable before the first of them cordoned it), the published per-node status
//! (`nodemaintenance.k8s.io/maintenance-status`), the draining taint, and the few Node
//! fields the controller and the planner's input builders read. Pure reads of a Node; the
//! writes (hold, release, conditions) are the controller's.
//!
//! Keeping the holders on the node (not in controller memory) is what makes restarts safe: a
//! node is uncordoned only when its last live holder releases it and it was schedulable
//! before.

use super::{
    DRAINING_TAINT, DrainPlanEntry, MAINTENANCE_STATUS_ANNOTATION, MAINTENANCES_ANNOTATION, NodeMaintenanceNodeStatus,
};
use k8s_openapi::api::core::v1::Node;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The content of the `nodemaintenance.k8s.io/maintenances` annotation (JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holders {
    /// Names of the NodeMaintenances holding the node.
    pub maintenances: BTreeSet<String>,
    /// `spec.unschedulable` of the node before the first holder cordoned it.
    pub unschedulable_before: bool,
}

impl Holders {
    /// Reads the annotation of `node`; `None` when absent. An unreadable annotation reads as a
    /// hold by an unknown maintenance with the node unschedulable before, so nothing
    /// uncordons the node on the strength of data we cannot read.
    pub fn of(node: &Node) -> Option<Holders> {
        Some(Self::parse(node.metadata.annotations.as_ref()?.get(MAINTENANCES_ANNOTATION)?))
    }

    /// Reads an annotation value, as [`Holders::of`].
    fn parse(raw: &str) -> Holders {
        serde_json::from_str(raw).unwrap_or_else(|_| Holders {
            maintenances: BTreeSet::from(["<unreadable annotation>".to_string()]),
            unschedulable_before: true,
        })
    }

    /// Whether one of the maintenances it names exists (`exists` asks the cache): a holders
    /// annotation naming only deleted maintenances holds nothing any more.
    pub fn any_exists(&self, exists: impl Fn(&str) -> bool) -> bool {
        self.maintenances.iter().any(|m| exists(m))
    }

    /// The maintenances, comma-separated: how Node condition messages name them.
    pub fn names(&self) -> String {
        self.maintenances.iter().map(String::as_str).collect::<Vec<_>>().join(", ")
    }

    /// The annotation value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The holders annotation of every node of a list, read once ([`Holders::of`]): what a
/// decision over thousands of nodes asks again and again (who holds this node, which nodes
/// does this maintenance hold) without parsing the annotation each time.
#[derive(Debug, Default)]
pub struct HeldNodes {
    /// Each held node's holders, with their names comma-separated; shared by the nodes
    /// whose annotations read the same.
    by_node: FxHashMap<String, Arc<(Holders, String)>>,
    by_maintenance: FxHashMap<String, Vec<Arc<Node>>>,
}

impl HeldNodes {
    /// Reads the holders of every node of `nodes`, parsing each distinct annotation once
    /// (the nodes of one rolling maintenance all carry the same).
    pub fn of(nodes: &[Arc<Node>]) -> Self {
        let mut held = HeldNodes::default();
        let mut parsed: FxHashMap<&str, Arc<(Holders, String)>> = FxHashMap::default();
        for n in nodes {
            let raw = n.metadata.annotations.as_ref().and_then(|a| a.get(MAINTENANCES_ANNOTATION));
            let (Some(name), Some(raw)) = (n.metadata.name.as_ref(), raw) else { continue };
            let entry = parsed
                .entry(raw)
                .or_insert_with(|| {
                    let holders = Holders::parse(raw);
                    let names = holders.names();
                    Arc::new((holders, names))
                })
                .clone();
            for m in &entry.0.maintenances {
                match held.by_maintenance.get_mut(m.as_str()) {
                    Some(nodes) => nodes.push(n.clone()),
                    None => drop(held.by_maintenance.insert(m.clone(), vec![n.clone()])),
                }
            }
            held.by_node.insert(name.clone(), entry);
        }
        held
    }

    /// The holders of the node named `node`; `None` when nothing holds it.
    pub fn holders(&self, node: &str) -> Option<&Holders> {
        self.by_node.get(node).map(|e| &e.0)
    }

    /// Whether the maintenance `maintenance` holds the node named `node` ([`held_by`]).
    pub fn held_by(&self, node: &str, maintenance: &str) -> bool {
        self.holders(node).is_some_and(|h| h.maintenances.contains(maintenance))
    }

    /// The nodes the maintenance `maintenance` holds, in the order of the list read.
    pub fn nodes_of(&self, maintenance: &str) -> &[Arc<Node>] {
        self.by_maintenance.get(maintenance).map_or(&[], Vec::as_slice)
    }

    /// The names of the node's holders, comma-separated ("" when none): how Node condition
    /// messages name them.
    pub fn names(&self, node: &str) -> &str {
        self.by_node.get(node).map_or("", |e| &e.1)
    }
}

/// The node's name, borrowed ("" when unset, which the API never serves).
pub fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// Whether the holders annotation of `node` names maintenance `name`: the one notion of
/// "this maintenance holds this node".
pub fn held_by(node: &Node, name: &str) -> bool {
    Holders::of(node).is_some_and(|h| h.maintenances.contains(name))
}

/// Whether some maintenance holds `node` (its holders annotation names at least one): the
/// one notion of "this node is held".
pub fn is_held(node: &Node) -> bool {
    Holders::of(node).is_some_and(|h| !h.maintenances.is_empty())
}

/// `spec.unschedulable` of a node (false when unset).
pub fn is_unschedulable(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

/// The per-node status the controller published on `node` (SPEC 4.3), if any (an
/// unreadable annotation reads as none).
pub fn published_status(node: &Node) -> Option<NodeMaintenanceNodeStatus> {
    let raw = node.metadata.annotations.as_ref()?.get(MAINTENANCE_STATUS_ANNOTATION)?;
    serde_json::from_str(raw).ok()
}

/// The drain targets `node` already reached (its published `drainTargets`, the floor its
/// targets never go below; empty when never drained).
pub fn reached_targets(node: &Node) -> Vec<DrainPlanEntry> {
    published_status(node).map(|s| s.drain_targets).unwrap_or_default()
}

/// Whether `node` carries the `nodemaintenance.k8s.io/draining` taint.
pub fn has_draining_taint(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == DRAINING_TAINT))
}

/// Whether the node's `Ready` condition is True.
pub fn is_ready(node: &Node) -> bool {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node's `status.nodeInfo.bootID`, if reported.
pub fn boot_id(node: &Node) -> Option<&str> {
    let id = node.status.as_ref()?.node_info.as_ref()?.boot_id.as_str();
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn annotated(key: &str, value: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                annotations: Some(BTreeMap::from([(key.to_owned(), value.to_owned())])),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn an_unreadable_holders_annotation_reads_as_a_hold_with_the_node_cordoned_before() {
        let h = Holders::of(&annotated(MAINTENANCES_ANNOTATION, "{oops")).expect("present");
        assert!(h.unschedulable_before && !h.maintenances.is_empty());
        assert!(is_held(&annotated(MAINTENANCES_ANNOTATION, "{oops")));
        assert!(!is_held(&annotated(MAINTENANCES_ANNOTATION, r#"{"maintenances":[],"unschedulableBefore":false}"#)));
        assert!(held_by(
            &annotated(MAINTENANCES_ANNOTATION, r#"{"maintenances":["a"],"unschedulableBefore":false}"#),
            "a"
        ));
        assert!(!is_held(&Node::default()));
    }

    #[test]
    fn an_unreadable_published_status_reads_as_none() {
        assert_eq!(published_status(&annotated(MAINTENANCE_STATUS_ANNOTATION, "{oops")), None);
        assert!(reached_targets(&Node::default()).is_empty());
    }
}
