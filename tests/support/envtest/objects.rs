//! Objects on the real apiserver: the fixture Nodes, NodeMaintenances, and polling for an
//! expected state (the apiserver is eventually consistent with the controller under test).

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use node_maintenance::api::{MAINTENANCES_ANNOTATION, NodeMaintenance};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Creates the Nodes of `tests/fixtures/nodes.yaml` (3 control-plane nodes, worker-1..4 in
/// `pool=general`, gpu-1..2 in `pool=gpu`) without their status, uid and resourceVersion,
/// as the fixtures README says. Returns their names.
pub async fn create_fixture_nodes(client: &Client) -> Vec<String> {
    let text = std::fs::read_to_string(super::fixture("nodes.yaml")).expect("nodes.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("nodes.yaml parses");
    let api = Api::<Node>::all(client.clone());
    let mut names = Vec::new();
    for doc in docs {
        for mut item in doc["items"].as_array().cloned().unwrap_or_default() {
            item.as_object_mut().expect("a Node").remove("status");
            let meta = item["metadata"].as_object_mut().expect("metadata");
            for k in ["uid", "resourceVersion", "creationTimestamp", "managedFields"] {
                meta.remove(k);
            }
            let node: Node = serde_json::from_value(item).expect("a Node");
            names.push(api.create(&PostParams::default(), &node).await.expect("Node created").name_any());
        }
    }
    names
}

/// Creates a Node `name` with `labels`.
pub async fn create_node(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let labels: serde_json::Map<String, Value> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let node: Node = serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).expect("Node");
    Api::<Node>::all(client.clone()).create(&PostParams::default(), &node).await.expect("Node created");
}

/// Creates a NodeMaintenance from its JSON (through admission when a webhook is registered).
pub async fn create_maintenance(client: &Client, nm: Value) -> kube::Result<NodeMaintenance> {
    let nm: NodeMaintenance = serde_json::from_value(nm).expect("a NodeMaintenance");
    Api::<NodeMaintenance>::all(client.clone()).create(&PostParams::default(), &nm).await
}

/// Moves a maintenance to `stage` (a merge patch, as `kubectl patch --type merge`).
pub async fn set_stage(client: &Client, name: &str, stage: &str) {
    Api::<NodeMaintenance>::all(client.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"stage": stage}})))
        .await
        .unwrap_or_else(|e| panic!("setting {name} to {stage}: {e}"));
}

/// Deletes a maintenance (its finalizer then runs Complete).
pub async fn delete_maintenance(client: &Client, name: &str) {
    Api::<NodeMaintenance>::all(client.clone()).delete(name, &DeleteParams::default()).await.expect("delete");
}

/// The maintenance as stored, as JSON; `None` when it does not exist.
pub async fn maintenance_json(client: &Client, name: &str) -> Option<Value> {
    let nm = Api::<NodeMaintenance>::all(client.clone()).get_opt(name).await.expect("get NodeMaintenance")?;
    Some(serde_json::to_value(nm).expect("serializes"))
}

/// The Node as stored.
pub async fn node(client: &Client, name: &str) -> Node {
    Api::<Node>::all(client.clone()).get(name).await.unwrap_or_else(|e| panic!("get node {name}: {e}"))
}

/// Whether the node is cordoned.
pub fn is_cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

/// The node's holders annotation.
pub fn holders(node: &Node) -> Option<String> {
    node.annotations().get(MAINTENANCES_ANNOTATION).cloned()
}

/// A node condition's `(status, reason)`.
pub fn condition(node: &Node, type_: &str) -> Option<(String, String)> {
    let c = node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Polls `check` every 100 ms until it returns `Some`, for at most `timeout`; panics naming
/// `what` and the last observed state otherwise.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if Instant::now() > deadline => panic!("timed out waiting for {what}; last seen: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A pod in `default` on `node`, labelled `app=<name>` and owned by nothing (so evicted like
/// any other), with a 1 s termination grace period.
pub fn app_pod(name: &str, node: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "app"}]}
    }))
    .expect("pod")
}

/// Waits (at most `timeout`) until every pod in `default` is Running.
pub async fn pods_running(c: &Client, timeout: Duration) {
    let pods = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(c.clone(), "default");
    wait_for("every pod Running", timeout, || async {
        let list = pods.list(&kube::api::ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let phases: Vec<_> = list.iter().map(|p| p.status.as_ref().and_then(|s| s.phase.clone())).collect();
        if phases.iter().all(|p| p.as_deref() == Some("Running")) { Ok(()) } else { Err(format!("{phases:?}")) }
    })
    .await;
}

/// Creates the pods in `default`, and first the `default` ServiceAccount their admission
/// looks up (no kube-controller-manager runs to create it).
pub async fn create_pods(c: &Client, pods: &[k8s_openapi::api::core::v1::Pod]) {
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).expect("SA");
    let _ = Api::namespaced(c.clone(), "default").create(&PostParams::default(), &sa).await;
    let api = Api::<k8s_openapi::api::core::v1::Pod>::namespaced(c.clone(), "default");
    for p in pods {
        api.create(&PostParams::default(), p).await.expect("pod created");
    }
}
