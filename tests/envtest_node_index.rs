//! The cluster cache's Node index on a real kube-apiserver (SPEC 3.4, 3.5; issue 13 "NodeIndex
//! in the cluster cache"): admission in cluster mode selects through it, so it must follow
//! every Node that appears, goes away or changes labels, and must not be rebuilt for the
//! heartbeats that make up almost every Node event.

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use node_maintenance::admission::ClusterView;
use node_maintenance::cluster::cache::ClusterCache;
use node_maintenance::selector::NodeIndex;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::envtest::Options;
use support::envtest::objects::{create_fixture_nodes, create_node, wait_for};

const WAIT: Duration = Duration::from_secs(30);

fn position(index: &NodeIndex, name: &str) -> Option<usize> {
    (0..index.len()).find(|&i| index.name(i) == name)
}

#[tokio::test]
async fn the_index_follows_names_and_labels_and_ignores_heartbeats() {
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    let names = create_fixture_nodes(&c).await;
    let (cache, drive) = ClusterCache::start(c.clone());
    let drive = tokio::spawn(drive);
    tokio::time::timeout(WAIT, cache.wait_synced()).await.expect("cache synced");
    assert_eq!(cache.node_index().len(), names.len(), "synced means indexed");

    // Heartbeats: Node events that change no label leave the index as it is, and do not
    // trigger the controller either.
    let nodes = Api::<Node>::all(c.clone());
    let before = cache.node_index();
    let mut changes = cache.node_changes();
    changes.mark_unchanged();
    for n in &names {
        let hb = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "lastHeartbeatTime": k8s_openapi::jiff::Timestamp::now().to_string(),
            "lastTransitionTime": "2026-11-01T00:00:00Z"}]}});
        nodes.patch_status(n, &PatchParams::default(), &Patch::Strategic(hb)).await.unwrap();
    }
    // An annotation (what the controller reads, not the index) marks the end of the
    // heartbeats: watch events arrive in order, so once it is seen, they were too.
    let annotate = json!({"metadata": {"annotations": {"example.com/marker": "1"}}});
    nodes.patch(&names[0], &PatchParams::default(), &Patch::Merge(annotate)).await.unwrap();
    tokio::time::timeout(WAIT, changes.changed()).await.expect("the annotation seen").unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(Arc::ptr_eq(&before, &cache.node_index()), "a heartbeat rebuilt the index");

    // A label change, a new Node and a deleted Node are all in the next index.
    let relabel = json!({"metadata": {"labels": {"pool": "blue"}}});
    nodes.patch(&names[0], &PatchParams::default(), &Patch::Merge(relabel)).await.unwrap();
    create_node(&c, "late-1", &[("pool", "blue")]).await;
    nodes.delete(&names[1], &DeleteParams::default()).await.unwrap();
    wait_for("the index follows", WAIT, || async {
        let index = cache.node_index();
        let relabelled = position(&index, &names[0]).and_then(|i| index.label(i, "pool"));
        let late = position(&index, "late-1").and_then(|i| index.label(i, "pool"));
        let gone = position(&index, &names[1]).is_none();
        if relabelled == Some("blue") && late == Some("blue") && gone {
            Ok(())
        } else {
            Err(format!("{relabelled:?} {late:?} gone={gone}"))
        }
    })
    .await;
    assert_eq!(cache.node_index().len(), names.len());
    drive.abort();
}
