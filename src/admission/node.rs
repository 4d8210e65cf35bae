//! The Node webhook (SPEC 3.6, KEP "Kubectl"): warn when a node held by an active maintenance
//! is uncordoned. Never denies (it is registered with failurePolicy Ignore).

use super::review::{Object, Request};
use super::warnings::name_list;
use super::{ClusterView, Decision};
use crate::selector::NodeMatcher;
use k8s_openapi::api::core::v1::Node;

/// Reviews a Node UPDATE: when `spec.unschedulable` goes from true to false while active
/// (Cordon/Drain) maintenances select the node, allows with a warning naming them; allows
/// everything else, including requests it cannot read.
pub fn validate_node(req: &Request<'_>, view: &dyn ClusterView) -> Decision {
    // As the apiserver stores the object: a `Value` first (a repeated key keeps its last
    // value), then the typed Node.
    let read = |v: &Option<Object>| {
        serde_json::from_str::<serde_json::Value>(v.as_ref()?.text())
            .ok()
            .and_then(|o| serde_json::from_value::<Node>(o).ok())
    };
    let (Some(new), Some(old)) = (read(&req.object), read(&req.old_object)) else {
        return Decision::allow();
    };
    let unschedulable = |n: &Node| n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    if !unschedulable(&old) || unschedulable(&new) {
        return Decision::allow();
    }
    let mut holders: Vec<String> = view
        .maintenances()
        .iter()
        .filter(|m| m.is_active())
        .filter(|m| NodeMatcher::compile(&m.spec.node_selector).is_some_and(|s| s.matches(&new)))
        .filter_map(|m| m.metadata.name.clone())
        .collect();
    if holders.is_empty() {
        return Decision::allow();
    }
    holders.sort();
    let names: Vec<&str> = holders.iter().map(String::as_str).collect();
    let node = new.metadata.name.as_deref().unwrap_or_default();
    Decision::allow_with_warnings(vec![format!(
        "node {node} is held by NodeMaintenance {}; its controller will cordon it again",
        name_list(&names)
    )])
}
