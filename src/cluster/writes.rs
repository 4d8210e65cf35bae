//! The controller's writes to the API (SPEC 4), one call each: node cordon and annotations,
//! the draining taint, Node conditions, the NodeMaintenance finalizer and status, budget
//! statuses, the start of a rollout; and the
//! pause a throttling answer asks for ([`retry_after`]). Each write is
//! the smallest patch that does the job; writes that read-modify-write a shared field carry
//! the `resourceVersion` they were computed from, so a concurrent change makes them fail
//! with 409 and the decision is made again on fresh data.

use crate::api::node::has_draining_taint;
use crate::api::{
    DONE_ANNOTATION, DRAINING_TAINT, EVACUATED_AT_ANNOTATION, EVACUATED_FOR_ANNOTATION, FINALIZER,
    MAINTENANCE_STATUS_ANNOTATION, MAINTENANCES_ANNOTATION, NodeDisruptionBudget, NodeDisruptionBudgetStatus,
    NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceStatus,
};
use crate::planner::decide::holders::NodeChange;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use std::time::Duration;

/// Field manager of every write.
pub const MANAGER: &str = "node-maintenance";

fn params() -> PatchParams {
    PatchParams { field_manager: Some(MANAGER.into()), ..Default::default() }
}

fn rv(obj: &impl Resource) -> Value {
    obj.meta().resource_version.clone().map(Value::String).unwrap_or(Value::Null)
}

/// Writes a cordon/uncordon decision and the holders annotation in one patch, conditional
/// on the node's resourceVersion. When the last holder goes, the per-node status annotation
/// goes in the same patch: a crash between two patches would otherwise leave it on a node
/// that nothing holds, and so nothing cleans up.
///
/// Returns the node as written.
///
/// # Errors
/// The API error (409 when the node changed since it was read).
pub async fn apply_node_change(client: &Client, node: &Node, change: &NodeChange) -> kube::Result<Node> {
    let mut annotations = match &change.holders {
        Some(h) => json!({MAINTENANCES_ANNOTATION: h.to_annotation()}),
        None => json!({MAINTENANCES_ANNOTATION: null, MAINTENANCE_STATUS_ANNOTATION: null}),
    };
    if change.clear_done {
        annotations[DONE_ANNOTATION] = Value::Null;
    }
    let patch = json!({
        "metadata": {"resourceVersion": rv(node), "annotations": annotations},
        "spec": {"unschedulable": change.unschedulable},
    });
    Api::<Node>::all(client.clone()).patch(&node.name_any(), &params(), &Patch::Merge(&patch)).await
}

/// `node`'s taints with the `nodemaintenance.k8s.io/draining:NoSchedule` taint `present` or
/// not: the whole list a patch replaces.
fn taints_with_draining(node: &Node, present: bool) -> Vec<Taint> {
    let mut taints: Vec<Taint> = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    taints.retain(|t| t.key != DRAINING_TAINT);
    if present {
        taints.push(Taint { key: DRAINING_TAINT.into(), effect: "NoSchedule".into(), ..Default::default() });
    }
    taints
}

/// Adds or removes the `nodemaintenance.k8s.io/draining:NoSchedule` taint, conditional on the
/// node's resourceVersion (the taint list is replaced whole). Returns the updated node, or
/// `None` when nothing had to change.
///
/// # Errors
/// The API error.
pub async fn set_draining_taint(client: &Client, node: &Node, present: bool) -> kube::Result<Option<Node>> {
    if has_draining_taint(node) == present {
        return Ok(None);
    }
    let taints = taints_with_draining(node, present);
    let patch = json!({"metadata": {"resourceVersion": rv(node)}, "spec": {"taints": taints}});
    Api::<Node>::all(client.clone()).patch(&node.name_any(), &params(), &Patch::Merge(&patch)).await.map(Some)
}

/// Removes what a maintenance that no longer exists left on `node`: the draining taint and
/// the per-node status annotation, in one patch conditional on the node's resourceVersion
/// (the taint list is replaced whole). The cordon and the holders annotation are left.
/// Returns the node as written.
///
/// # Errors
/// The API error (409 when the node changed since it was read).
pub async fn remove_leftovers(client: &Client, node: &Node) -> kube::Result<Node> {
    let taints = taints_with_draining(node, false);
    let patch = json!({
        "metadata": {"resourceVersion": rv(node), "annotations": {MAINTENANCE_STATUS_ANNOTATION: null}},
        "spec": {"taints": taints},
    });
    Api::<Node>::all(client.clone()).patch(&node.name_any(), &params(), &Patch::Merge(&patch)).await
}

/// Publishes the per-node status annotation (SPEC 4.3, the KEP's
/// `Node.status.maintenanceStatus`); [`apply_node_change`] removes it with the last holder.
/// Returns the node as written: a conditional write after it on the same node must carry
/// this resourceVersion, not the one it was read with.
///
/// # Errors
/// The API error.
pub async fn publish_node_status(
    client: &Client,
    node: &str,
    status: &NodeMaintenanceNodeStatus,
) -> kube::Result<Node> {
    let value = serde_json::to_string(status).map(Value::String).unwrap_or(Value::Null);
    let patch = json!({"metadata": {"annotations": {MAINTENANCE_STATUS_ANNOTATION: value}}});
    Api::<Node>::all(client.clone()).patch(node, &params(), &Patch::Merge(&patch)).await
}

/// Sets the maintenance Node conditions (strategic merge: other conditions are kept; not
/// conditional, as the kubelet updates the node's status all the time). Returns the node as
/// written.
///
/// # Errors
/// The API error.
pub async fn set_node_conditions(client: &Client, node: &str, conditions: &[NodeCondition]) -> kube::Result<Node> {
    let patch = json!({"status": {"conditions": conditions}});
    Api::<Node>::all(client.clone()).patch_status(node, &params(), &Patch::Strategic(&patch)).await
}

/// Removes the Node condition `type_` (a strategic-merge `$patch: delete` on the
/// conditions list, merged by type: other conditions are kept). No error when absent.
///
/// # Errors
/// The API error.
pub async fn remove_node_condition(client: &Client, node: &str, type_: &str) -> kube::Result<()> {
    let patch = json!({"status": {"conditions": [{"type": type_, "$patch": "delete"}]}});
    Api::<Node>::all(client.clone()).patch_status(node, &params(), &Patch::Strategic(&patch)).await.map(|_| ())
}

/// Adds (`present`) or removes the completion finalizer, conditional on the object's
/// resourceVersion. No-op when already so. Returns whether it wrote (then `nm` is no longer
/// the stored version, and a conditional write from it would be refused). Removing it from
/// a maintenance that is gone is done: a copy from a cache that has not seen the deletion
/// yet still shows the finalizer that let it go.
///
/// # Errors
/// The API error.
pub async fn set_finalizer(client: &Client, nm: &NodeMaintenance, present: bool) -> kube::Result<bool> {
    let mut finalizers = nm.finalizers().to_vec();
    if finalizers.iter().any(|f| f == FINALIZER) == present {
        return Ok(false);
    }
    if present {
        finalizers.push(FINALIZER.into());
    } else {
        finalizers.retain(|f| f != FINALIZER);
    }
    let patch = json!({"metadata": {"resourceVersion": rv(nm), "finalizers": finalizers}});
    match Api::<NodeMaintenance>::all(client.clone()).patch(&nm.name_any(), &params(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 && !present => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes the whole status subresource with server-side apply (SPEC 2, 4.3): the body
/// carries the complete desired `status`, and with [`MANAGER`] owning every status field the
/// apiserver removes fields it no longer applies (a stale `drainStatus` after Complete). No
/// request at all when the stored status (`nm`, from the cache) already equals `status`, so a
/// steady state sends no writes. The body carries the `resourceVersion` the status was
/// computed from, which makes the apply conditional: a status computed from a
/// cache that fell behind (a spec changed meanwhile) is refused with 409, never stored.
///
/// Returns whether it wrote.
///
/// # Errors
/// The API error (409 when the maintenance changed since it was read).
pub async fn write_status(client: &Client, nm: &NodeMaintenance, status: &NodeMaintenanceStatus) -> kube::Result<bool> {
    if nm.status.as_ref() == Some(status) {
        return Ok(false);
    }
    let body = json!({
        "apiVersion": NodeMaintenance::api_version(&()),
        "kind": NodeMaintenance::kind(&()),
        "metadata": {"name": nm.name_any(), "resourceVersion": rv(nm)},
        "status": status,
    });
    Api::<NodeMaintenance>::all(client.clone())
        .patch_status(&nm.name_any(), &PatchParams::apply(MANAGER).force(), &Patch::Apply(&body))
        .await
        .map(|_| true)
}

/// Writes the status of the NodeDisruptionBudget `name` with server-side apply (SPEC 4.5),
/// [`MANAGER`] owning every status field, conditional on `resource_version`, the version the
/// status was computed from: a status of a budget that changed since is refused with 409
/// (the change's watch event brings a new decision).
///
/// # Errors
/// The API error.
pub async fn write_budget_status(
    client: &Client,
    name: &str,
    resource_version: Option<&str>,
    status: &NodeDisruptionBudgetStatus,
) -> kube::Result<()> {
    let body = json!({
        "apiVersion": NodeDisruptionBudget::api_version(&()),
        "kind": NodeDisruptionBudget::kind(&()),
        "metadata": {"name": name, "resourceVersion": resource_version},
        "status": status,
    });
    let params = PatchParams::apply(MANAGER).force();
    Api::<NodeDisruptionBudget>::all(client.clone()).patch_status(name, &params, &Patch::Apply(&body)).await.map(drop)
}

/// Starts a rollout of `deployment` as `kubectl rollout restart` does: its pod template's
/// [`EVACUATED_AT_ANNOTATION`] set to `at` and [`EVACUATED_FOR_ANNOTATION`] to `maintenance`
/// (`<name>/<uid>`), with a merge patch conditional on the resourceVersion it was read at (a
/// Deployment changed since is refused with 409 and decided again).
///
/// # Errors
/// The API error.
pub async fn start_rollout(client: &Client, deployment: &Deployment, at: &str, maintenance: &str) -> kube::Result<()> {
    let patch = json!({
        "metadata": {"resourceVersion": rv(deployment)},
        "spec": {"template": {"metadata": {"annotations": {
            EVACUATED_AT_ANNOTATION: at,
            EVACUATED_FOR_ANNOTATION: maintenance,
        }}}},
    });
    let namespace = deployment.namespace().unwrap_or_default();
    let api = Api::<Deployment>::namespaced(client.clone(), &namespace);
    api.patch(&deployment.name_any(), &params(), &Patch::Merge(&patch)).await.map(drop)
}

/// Longest pause one 429 may impose (a misbehaving proxy could ask for hours).
const MAX_PAUSE: Duration = Duration::from_secs(60);

/// The pause the apiserver asked for: `Some(retryAfterSeconds)` when `error` is a 429 that
/// throttles the client (API Priority and Fairness, max-in-flight), `None` otherwise
/// (including a PodDisruptionBudget refusal).
pub fn retry_after(error: &kube::Error) -> Option<Duration> {
    let kube::Error::Api(status) = error else { return None };
    if status.code != 429 {
        return None;
    }
    let details = status.details.as_ref()?;
    if details.causes.iter().any(|c| c.reason == "DisruptionBudget") || details.retry_after_seconds == 0 {
        return None;
    }
    Some(Duration::from_secs(details.retry_after_seconds.into()).min(MAX_PAUSE))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    /// A 429 as the apiserver sends it: API Priority and Fairness sets `retryAfterSeconds`.
    pub(crate) fn too_many(retry_after_seconds: u32, cause: Option<&str>) -> kube::Error {
        let mut s = kube::core::Status::failure("Too many requests, please try again later.", "TooManyRequests");
        s.code = 429;
        s.details = Some(StatusDetails {
            causes: cause
                .map(|c| StatusCause { reason: c.into(), message: String::new(), field: String::new() })
                .into_iter()
                .collect(),
            retry_after_seconds,
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
        });
        kube::Error::Api(s.boxed())
    }

    #[test]
    fn only_a_throttling_429_pauses() {
        assert_eq!(retry_after(&too_many(2, None)), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&too_many(7200, None)), Some(MAX_PAUSE));
        assert_eq!(retry_after(&too_many(0, None)), None, "no Retry-After: an interceptor's answer");
        assert_eq!(retry_after(&too_many(1, Some("DisruptionBudget"))), None);
    }
}
