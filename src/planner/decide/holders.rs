//! Holding and releasing a node (SPEC 4.1, 4.2), as pure decisions: what to change on a node
//! (its holders annotation, read by [`crate::api::node::Holders`], and `spec.unschedulable`)
//! to hold or release it. `crate::cluster::writes::apply_node_change` writes the change.

use crate::api::DONE_ANNOTATION;
use crate::api::node::{Holders, is_unschedulable};
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeSet;

/// What to write on a node: the new annotation (`None` removes it) and `spec.unschedulable`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeChange {
    /// New holders; `None` when no maintenance holds the node any more.
    pub holders: Option<Holders>,
    /// New `spec.unschedulable`.
    pub unschedulable: bool,
    /// The node had been held by this maintenance but someone made it schedulable again
    /// (an uncordon race: emit an Event, SPEC 4.1).
    pub recordoned: bool,
    /// Remove the node's done annotation: it names the maintenance releasing it.
    pub clear_done: bool,
}

/// Holding `node` for `maintenance` (Cordon and Drain stages): adds it to the holders
/// (recording whether the node was unschedulable before, when it is the first holder) and
/// makes the node unschedulable. Returns `None` when nothing needs to change.
pub fn hold(node: &Node, maintenance: &str) -> Option<NodeChange> {
    let existing = Holders::of(node);
    let recordoned = existing.as_ref().is_some_and(|h| h.maintenances.contains(maintenance)) && !is_unschedulable(node);
    let mut holders = existing
        .clone()
        .unwrap_or(Holders { maintenances: BTreeSet::new(), unschedulable_before: is_unschedulable(node) });
    holders.maintenances.insert(maintenance.to_owned());
    if existing.as_ref() == Some(&holders) && is_unschedulable(node) {
        return None;
    }
    Some(NodeChange { holders: Some(holders), unschedulable: true, recordoned, clear_done: false })
}

/// Releasing `node` from `maintenance` (Complete stage, deletion, or the node left the
/// selection). Holders for which `is_live` is false (deleted maintenances whose cleanup never
/// ran) are dropped too. When no live holder remains the annotation goes and the node gets
/// back the schedulability it had before (a node someone else cordoned stays cordoned).
/// Returns `None` when `maintenance` does not hold the node and no stale holder is dropped.
pub fn release(node: &Node, maintenance: &str, is_live: impl Fn(&str) -> bool) -> Option<NodeChange> {
    let existing = Holders::of(node)?;
    let mut holders = existing.clone();
    holders.maintenances.retain(|m| m != maintenance && (is_live(m) || m.starts_with('<')));
    if holders == existing {
        return None;
    }
    let clear_done =
        node.metadata.annotations.as_ref().and_then(|a| a.get(DONE_ANNOTATION)).is_some_and(|d| d == maintenance);
    let unschedulable =
        if holders.maintenances.is_empty() { existing.unschedulable_before } else { is_unschedulable(node) };
    let holders = (!holders.maintenances.is_empty()).then_some(holders);
    Some(NodeChange { holders, unschedulable, recordoned: false, clear_done })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MAINTENANCES_ANNOTATION;
    use k8s_openapi::api::core::v1::NodeSpec;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(unschedulable: bool, holders: Option<&Holders>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n".into()),
                annotations: holders
                    .map(|h| BTreeMap::from([(MAINTENANCES_ANNOTATION.to_string(), h.to_annotation())])),
                ..Default::default()
            },
            spec: Some(NodeSpec { unschedulable: Some(unschedulable), ..Default::default() }),
            status: None,
        }
    }

    fn holders(names: &[&str], before: bool) -> Holders {
        Holders { maintenances: names.iter().map(|s| s.to_string()).collect(), unschedulable_before: before }
    }

    fn apply(_before: &Node, c: &NodeChange) -> Node {
        node(c.unschedulable, c.holders.as_ref())
    }

    #[test]
    fn cordon_records_the_holder_and_whether_the_node_was_schedulable() {
        let c = hold(&node(false, None), "a").unwrap();
        assert_eq!(
            c,
            NodeChange {
                holders: Some(holders(&["a"], false)),
                unschedulable: true,
                recordoned: false,
                clear_done: false
            }
        );
        let c = hold(&node(true, None), "a").unwrap();
        assert!(c.holders.unwrap().unschedulable_before, "pre-existing cordon is remembered");
        assert_eq!(hold(&node(true, Some(&holders(&["a"], false))), "a"), None, "nothing to do when held");
    }

    #[test]
    fn an_uncordon_race_is_detected_and_re_cordoned() {
        let c = hold(&node(false, Some(&holders(&["a"], false))), "a").unwrap();
        assert!(c.recordoned && c.unschedulable);
    }

    #[test]
    fn completing_one_of_two_maintenances_keeps_the_node_cordoned() {
        let n = node(true, Some(&holders(&["a", "b"], false)));
        let c = release(&n, "a", |_| true).unwrap();
        assert_eq!(c.holders, Some(holders(&["b"], false)));
        assert!(c.unschedulable);
        let n = apply(&n, &c);
        let c = release(&n, "b", |_| true).unwrap();
        assert_eq!(c, NodeChange { holders: None, unschedulable: false, recordoned: false, clear_done: false });
    }

    #[test]
    fn releasing_removes_a_done_annotation_naming_the_releaser_only() {
        let mut n = node(true, Some(&holders(&["a", "b"], false)));
        n.metadata.annotations.get_or_insert_default().insert(DONE_ANNOTATION.into(), "a".into());
        assert!(release(&n, "a", |_| true).unwrap().clear_done);
        assert!(!release(&n, "b", |_| true).unwrap().clear_done);
    }

    #[test]
    fn a_node_cordoned_before_maintenance_stays_cordoned() {
        let n = node(true, Some(&holders(&["a"], true)));
        assert!(release(&n, "a", |_| true).unwrap().unschedulable);
    }

    #[test]
    fn release_never_touches_a_node_we_do_not_hold() {
        assert_eq!(release(&node(true, None), "a", |_| true), None);
        assert_eq!(release(&node(true, Some(&holders(&["b"], false))), "a", |_| true), None);
    }

    #[test]
    fn stale_holders_are_dropped_so_no_cordon_outlives_its_maintenance() {
        let n = node(true, Some(&holders(&["a", "gone"], false)));
        let c = release(&n, "a", |m| m != "gone").unwrap();
        assert_eq!(c.holders, None);
        assert!(!c.unschedulable);
    }

    #[test]
    fn an_unreadable_annotation_never_leads_to_an_uncordon() {
        let mut n = node(true, None);
        n.metadata.annotations = Some(BTreeMap::from([(MAINTENANCES_ANNOTATION.to_string(), "{oops".to_string())]));
        let c = release(&n, "a", |_| false);
        assert_eq!(c, None);
        let c = hold(&n, "a").unwrap();
        assert!(c.unschedulable);
    }
}
