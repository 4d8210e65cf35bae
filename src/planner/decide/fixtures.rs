//! Plain objects for the controller's network-free tests: nodes, maintenances and budgets
//! as the caches hold them, and the cluster after a decision's writes.

use super::holders::NodeChange;
use crate::api::{
    DRAINING_TAINT, MAINTENANCE_STATUS_ANNOTATION, MAINTENANCES_ANNOTATION, NodeDisruptionBudget, NodeMaintenance,
};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeSpec, NodeStatus, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use std::sync::Arc;

/// A time from RFC 3339 text.
pub fn t(s: &str) -> Time {
    Time(s.parse().unwrap())
}

/// A Ready node of `pool=general`, held (and cordoned) by `holders` when given, with
/// `conditions` besides Ready.
pub fn node(name: &str, holders: Option<&[&str]>, conditions: Vec<NodeCondition>) -> Arc<Node> {
    let mut n: Node =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"pool": "general"}}})).unwrap();
    if let Some(h) = holders {
        let annotation = json!({"maintenances": h, "unschedulableBefore": false}).to_string();
        n.metadata.annotations = Some([(MAINTENANCES_ANNOTATION.to_owned(), annotation)].into());
        n.spec = Some(NodeSpec { unschedulable: Some(true), ..Default::default() });
    }
    let ready = NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() };
    n.status = Some(NodeStatus { conditions: Some([vec![ready], conditions].concat()), ..Default::default() });
    Arc::new(n)
}

/// A NodeMaintenance in `stage` selecting `nodes` by name, with `extra` merged into its spec.
pub fn maintenance_with(name: &str, stage: &str, nodes: &[&str], extra: serde_json::Value) -> NodeMaintenance {
    let mut spec = json!({"stage": stage, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": nodes}]}]}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1},
        "spec": spec,
    }))
    .unwrap()
}

/// [`maintenance_with`] and nothing more in its spec.
pub fn maintenance(name: &str, stage: &str, nodes: &[&str]) -> Arc<NodeMaintenance> {
    Arc::new(maintenance_with(name, stage, nodes, json!({})))
}

/// A NodeDisruptionBudget over `pool=general` with `maxUnavailable: 1`.
pub fn budget(name: &str) -> Arc<NodeDisruptionBudget> {
    Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
            "metadata": {"name": name, "resourceVersion": "7", "generation": 1},
            "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "pool", "operator": "In", "values": ["general"]}]}]}, "maxUnavailable": 1}
        }))
        .unwrap(),
    )
}

/// `node` after a hold or release `change` was written.
pub fn changed(node: &Node, change: &NodeChange) -> Node {
    let mut n = node.clone();
    let annotations = n.metadata.annotations.get_or_insert_default();
    match &change.holders {
        Some(h) => {
            annotations.insert(MAINTENANCES_ANNOTATION.into(), h.to_annotation());
        }
        None => {
            annotations.remove(MAINTENANCES_ANNOTATION);
            annotations.remove(MAINTENANCE_STATUS_ANNOTATION);
        }
    }
    n.spec.get_or_insert_default().unschedulable = Some(change.unschedulable);
    n
}

/// `node` after conditions `wanted` were written (merged by type).
pub fn with_conditions(node: &Node, wanted: &[NodeCondition]) -> Node {
    let mut n = node.clone();
    let list = n.status.get_or_insert_default().conditions.get_or_insert_default();
    for w in wanted {
        list.retain(|c| c.type_ != w.type_);
        list.push(w.clone());
    }
    n
}

/// `node` with the draining taint.
pub fn tainted(node: &Node) -> Node {
    let mut n = node.clone();
    let taint = Taint { key: DRAINING_TAINT.into(), effect: "NoSchedule".into(), ..Default::default() };
    n.spec.get_or_insert_default().taints.get_or_insert_default().push(taint);
    n
}
