//! The reconcile loop on a real kube-apiserver (SPEC 4.1, 4.2): cordon, Idle, Complete,
//! overlapping maintenances, deletion and its finalizer, vanished and relabelled nodes, an
//! uncordon race. Real merge-patch, server-side-apply, finalizer and watch semantics.
//! Each test has its own control plane (etcd + kube-apiserver).

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::Options;
use support::envtest::objects::{
    condition, create_fixture_nodes, create_maintenance, delete_maintenance, holders, is_cordoned, maintenance_json,
    node, set_stage, wait_for,
};

const WAIT: Duration = Duration::from_secs(30);

/// Waits until `check(node)` holds for the named node.
async fn wait_node(client: &kube::Client, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node {
    wait_for(what, WAIT, || async {
        let n = node(client, name).await;
        if check(&n) { Ok(n) } else { Err(format!("{:?} {:?}", n.spec, n.metadata.annotations)) }
    })
    .await
}

/// Waits until the maintenance's status at `pointer` equals `want`.
async fn wait_status(client: &kube::Client, name: &str, pointer: &str, want: serde_json::Value) {
    wait_for(&format!("{name} status{pointer} = {want}"), WAIT, || async {
        let m = maintenance_json(client, name).await.ok_or("gone")?;
        let got = m.pointer(&format!("/status{pointer}")).cloned().unwrap_or_default();
        if got == want { Ok(()) } else { Err(format!("{:#}", m["status"])) }
    })
    .await
}

#[tokio::test]
async fn cordon_makes_selected_nodes_unschedulable_and_records_the_stage() {
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    create_fixture_nodes(&c).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-1", "worker-2"], None)).await.unwrap();
    let n = wait_node(&c, "worker-1", "worker-1 cordoned", is_cordoned).await;
    wait_node(&c, "worker-2", "worker-2 cordoned", is_cordoned).await;
    assert!(!is_cordoned(&node(&c, "worker-3").await), "an unselected node is untouched");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&holders(&n).unwrap()).unwrap(),
        json!({"maintenances": ["m"], "unschedulableBefore": false})
    );
    wait_status(&c, "m", "/stageStatuses/0/name", json!("Cordon")).await;
    let m = maintenance_json(&c, "m").await.unwrap();
    assert_eq!(m["metadata"]["finalizers"], json!(["nodemaintenance.k8s.io/maintenance-completion"]));
    assert_eq!(m["status"]["selectedNodes"], 2);
    // KEP-5683: a node held in Cordon shows MaintenanceInProgress.
    wait_node(&c, "worker-1", "MaintenanceInProgress=True", |n| {
        condition(n, "MaintenanceInProgress") == Some(("True".into(), "AdminRequested".into()))
    })
    .await;
    let events = env.kubectl_ok(&["get", "events", "-A", "-o", "json"]);
    assert!(events.contains("\"Cordoned\""), "a Cordoned event: {events}");
    ctl.stop().await;
}
