//! The reconcile loop on a real kube-apiserver (SPEC 4.1, 4.2): cordon, Idle, Complete,
//! overlapping maintenances, deletion and its finalizer, vanished and relabelled nodes, an
//! uncordon race. Real merge-patch, server-side-apply, finalizer and watch semantics.
//! Each test has its own control plane (etcd + kube-apiserver).

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use node_maintenance::api::MAINTENANCE_STATUS_ANNOTATION;
use node_maintenance::api::node::has_draining_taint;
use serde_json::json;
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::Options;
use support::envtest::objects::{
    condition, create_fixture_nodes, create_maintenance, delete_maintenance, holders, is_cordoned, maintenance_json,
    node, set_stage, wait_for,
};
use support::envtest::requests::metric_sum;

const WAIT: Duration = Duration::from_secs(30);

/// Waits until `check(node)` holds for the named node.
async fn wait_node(client: &kube::Client, name: &str, what: &str, check: impl Fn(&Node) -> bool) -> Node {
    wait_for(what, WAIT, || async {
        let n = node(client, name).await;
        if check(&n) { Ok(n) } else { Err(format!("{:?} {:?}", n.spec, n.metadata.annotations)) }
    })
    .await
}

/// Waits until the maintenance no longer exists (its finalizer removed).
async fn wait_gone(client: &kube::Client, name: &str) {
    wait_for(&format!("{name} gone"), WAIT, || async {
        maintenance_json(client, name).await.map_or(Ok(()), |m| Err(m["status"].to_string()))
    })
    .await;
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
    let events = env.kubectl_ok(&["get", "events", "-A", "-o", "json"]).await;
    assert!(events.contains("\"Cordoned\""), "a Cordoned event: {events}");
    // The controller reads the webhook cache's NodeMaintenance watch: one watch, not two.
    let metrics = env.metrics().await;
    let watch = ["resource=\"nodemaintenances\"", "verb=\"WATCH\""];
    let watches = metric_sum(&metrics, "apiserver_longrunning_requests", &watch);
    assert_eq!(watches, Some(1.0), "one NodeMaintenance watch open");
    ctl.stop().await;
}

/// A fixture cluster with the controller running.
async fn cluster() -> Option<(support::envtest::Envtest, kube::Client, support::controller::Running)> {
    let env = support::envtest::Envtest::start(Options::default()).await?;
    let c = env.client();
    create_fixture_nodes(&c).await;
    let ctl = start_with(c.clone(), options(false)).await;
    Some((env, c, ctl))
}

macro_rules! cluster_or_skip {
    () => {
        match cluster().await {
            Some(parts) => parts,
            None => return,
        }
    };
}

async fn cordon_node(c: &kube::Client, name: &str, on: bool) {
    Api::<Node>::all(c.clone())
        .patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": on}})))
        .await
        .expect("node patched");
}

fn planned(n: &Node) -> Option<(String, String)> {
    condition(n, "MaintenancePlanned")
}

/// Idle cordons nothing and holds nothing; its nodes show `MaintenancePlanned=True` (issue 22)
/// until the maintenance moves on (Cordon: MaintenanceInProgress instead) or is deleted.
#[tokio::test]
async fn idle_only_marks_its_nodes_planned_until_it_moves_on_or_goes() {
    let (env, c, ctl) = cluster_or_skip!();
    let before = env.metrics().await;
    create_maintenance(&c, maintenance("m", "Idle", &["worker-1"], None)).await.unwrap();
    create_maintenance(&c, maintenance("later", "Idle", &["worker-2"], None)).await.unwrap();
    wait_status(&c, "m", "/selectedNodes", json!(1)).await;
    let scheduled = Some(("True".to_owned(), "NodeMaintenanceScheduled".to_owned()));
    for name in ["worker-1", "worker-2"] {
        wait_node(&c, name, "MaintenancePlanned=True", |n| planned(n) == scheduled).await;
    }
    let n = node(&c, "worker-1").await;
    assert!(!is_cordoned(&n) && holders(&n).is_none());
    assert!(planned(&node(&c, "worker-3").await).is_none(), "an unselected node is not planned");
    assert!(maintenance_json(&c, "m").await.unwrap()["metadata"].get("finalizers").is_none(), "no finalizer in Idle");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = support::envtest::requests::RequestCounts::parse(&env.metrics().await)
        .since(&support::envtest::requests::RequestCounts::parse(&before));
    assert_eq!(writes.get("PATCH", "nodes", "status"), 2, "one condition write per node: {:?}", writes.writes());
    assert_eq!(writes.writes_on("nodes"), 2, "no other node write: {:?}", writes.writes());

    set_stage(&c, "m", "Cordon").await;
    wait_node(&c, "worker-1", "MaintenancePlanned removed, MaintenanceInProgress=True", |n| {
        planned(n).is_none() && condition(n, "MaintenanceInProgress").is_some_and(|(s, _)| s == "True")
    })
    .await;
    delete_maintenance(&c, "later").await;
    wait_node(&c, "worker-2", "MaintenancePlanned removed", |n| planned(n).is_none()).await;
    ctl.stop().await;
}

#[tokio::test]
async fn a_node_cordoned_before_the_maintenance_stays_cordoned_after_complete() {
    let (_env, c, ctl) = cluster_or_skip!();
    cordon_node(&c, "worker-3", true).await;
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-3", "worker-4"], None)).await.unwrap();
    wait_node(&c, "worker-3", "worker-3 held", |n| holders(n).is_some()).await;
    wait_node(&c, "worker-4", "worker-4 cordoned", is_cordoned).await;
    // The Cordon stage recorded before the spec moves on: a spec update racing the status
    // write makes it conflict, and the next reconcile already sees Complete.
    wait_status(&c, "m", "/stageStatuses/0/name", json!("Cordon")).await;
    set_stage(&c, "m", "Complete").await;
    wait_node(&c, "worker-4", "worker-4 uncordoned and released", |n| !is_cordoned(n) && holders(n).is_none()).await;
    let w3 = wait_node(&c, "worker-3", "worker-3 released", |n| holders(n).is_none()).await;
    assert!(is_cordoned(&w3), "someone else's cordon is kept");
    wait_status(&c, "m", "/stageStatuses/1/name", json!("Complete")).await;
    ctl.stop().await;
}

#[tokio::test]
async fn completing_one_of_two_maintenances_keeps_the_shared_node_cordoned() {
    let (_env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("a", "Cordon", &["worker-1"], None)).await.unwrap();
    create_maintenance(&c, maintenance("b", "Cordon", &["worker-1", "worker-2"], None)).await.unwrap();
    wait_node(&c, "worker-1", "held by both", |n| {
        holders(n).is_some_and(|h| h.contains("\"a\"") && h.contains("\"b\""))
    })
    .await;
    set_stage(&c, "a", "Complete").await;
    let n = wait_node(&c, "worker-1", "a released", |n| holders(n).is_some_and(|h| !h.contains("\"a\""))).await;
    assert!(is_cordoned(&n), "b still holds worker-1");
    set_stage(&c, "b", "Complete").await;
    wait_node(&c, "worker-1", "worker-1 uncordoned", |n| !is_cordoned(n)).await;
    wait_node(&c, "worker-2", "worker-2 uncordoned", |n| !is_cordoned(n)).await;
    ctl.stop().await;
}

#[tokio::test]
async fn deletion_uncordons_then_removes_the_finalizer() {
    let (_env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-1"], None)).await.unwrap();
    wait_node(&c, "worker-1", "cordoned", is_cordoned).await;
    wait_for("finalizer", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        if m["metadata"]["finalizers"].is_array() { Ok(()) } else { Err(m["metadata"].to_string()) }
    })
    .await;
    delete_maintenance(&c, "m").await;
    wait_gone(&c, "m").await;
    let n = node(&c, "worker-1").await;
    assert!(!is_cordoned(&n) && holders(&n).is_none());
    // Nothing re-cordons after the finalizer is gone (the old operators' bug).
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!is_cordoned(&node(&c, "worker-1").await));
    ctl.stop().await;
}

/// Removes the finalizer of maintenance `name` by hand, then deletes it, and waits until it
/// is gone: what the controller never gets to clean up.
async fn delete_without_finalizer(c: &kube::Client, name: &str) {
    let api = Api::<node_maintenance::api::NodeMaintenance>::all(c.clone());
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("finalizer removed by hand");
    delete_maintenance(c, name).await;
    wait_gone(c, name).await;
}

/// A maintenance deleted after someone removed its finalizer by hand is never reconciled
/// again: its Node conditions go all the same (set as for a released node), while the
/// holders annotation and the cordon stay for the alert on nodes held by a missing
/// maintenance and its runbook.
#[tokio::test]
async fn conditions_of_a_maintenance_deleted_without_its_finalizer_go_the_hold_stays() {
    let (_env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-1"], None)).await.unwrap();
    wait_node(&c, "worker-1", "MaintenanceInProgress", |n| {
        condition(n, "MaintenanceInProgress").is_some_and(|(s, _)| s == "True")
    })
    .await;
    delete_without_finalizer(&c, "m").await;
    let n = wait_node(&c, "worker-1", "MaintenanceInProgress False", |n| {
        condition(n, "MaintenanceInProgress").is_some_and(|(s, _)| s == "False")
    })
    .await;
    assert_eq!(condition(&n, "Drained").map(|(s, _)| s).as_deref(), Some("False"));
    assert!(is_cordoned(&n), "the cordon stays");
    assert!(holders(&n).is_some_and(|h| h.contains("\"m\"")), "the holders entry stays: {:?}", holders(&n));
    ctl.stop().await;
}

/// A drained maintenance deleted after someone removed its finalizer by hand leaves our
/// draining taint and status annotation on its node: they go (else an admin's `kubectl
/// uncordon` would leave the node silently unschedulable behind our NoSchedule taint), the
/// holders annotation stays for the orphaned-hold alert.
#[tokio::test]
async fn the_taint_and_status_of_a_maintenance_deleted_without_its_finalizer_go() {
    let (_env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.unwrap();
    let tainted = |n: &Node| has_draining_taint(n);
    let published = |n: &Node| n.annotations().contains_key(MAINTENANCE_STATUS_ANNOTATION);
    wait_node(&c, "worker-1", "draining taint and status annotation", |n| tainted(n) && published(n)).await;
    delete_without_finalizer(&c, "m").await;
    cordon_node(&c, "worker-1", false).await;
    let n = wait_node(&c, "worker-1", "no taint or status annotation of ours", |n| !tainted(n) && !published(n)).await;
    assert!(!is_cordoned(&n), "the admin's uncordon stands");
    assert!(holders(&n).is_some_and(|h| h.contains("\"m\"")), "the holders entry stays: {:?}", holders(&n));
    ctl.stop().await;
}

#[tokio::test]
async fn a_selected_node_that_disappears_does_not_block_the_finalizer() {
    let (_env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-1", "worker-2"], None)).await.unwrap();
    wait_node(&c, "worker-1", "worker-1 cordoned", is_cordoned).await;
    wait_node(&c, "worker-2", "worker-2 cordoned", is_cordoned).await;
    Api::<Node>::all(c.clone()).delete("worker-2", &DeleteParams::default()).await.expect("node deleted");
    delete_maintenance(&c, "m").await;
    wait_gone(&c, "m").await;
    assert!(!is_cordoned(&node(&c, "worker-1").await));
    ctl.stop().await;
}

#[tokio::test]
async fn someone_uncordoning_a_held_node_is_cordoned_again_with_an_event() {
    let (env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-1"], None)).await.unwrap();
    wait_node(&c, "worker-1", "cordoned", is_cordoned).await;
    cordon_node(&c, "worker-1", false).await;
    wait_node(&c, "worker-1", "re-cordoned", is_cordoned).await;
    wait_for("a Recordoned event", WAIT, || async {
        let events = env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await;
        if events.contains("Recordoned") { Ok(()) } else { Err(events) }
    })
    .await;
    ctl.stop().await;
}

#[tokio::test]
async fn a_node_that_leaves_the_selection_is_released() {
    let (_env, c, ctl) = cluster_or_skip!();
    let mut m = maintenance("m", "Cordon", &[], None);
    m["spec"]["nodeSelector"] =
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]});
    create_maintenance(&c, m).await.unwrap();
    wait_node(&c, "gpu-1", "gpu-1 cordoned", is_cordoned).await;
    wait_node(&c, "gpu-2", "gpu-2 cordoned", is_cordoned).await;
    Api::<Node>::all(c.clone())
        .patch("gpu-1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"pool": "general"}}})))
        .await
        .expect("relabelled");
    wait_node(&c, "gpu-1", "relabelled node released", |n| !is_cordoned(n) && holders(n).is_none()).await;
    assert!(is_cordoned(&node(&c, "gpu-2").await));
    ctl.stop().await;
}

/// SPEC 2 "status says what is true now": after Complete nothing claims the nodes are
/// drained, and fields that no longer apply are gone (server-side apply removes them).
#[tokio::test]
async fn complete_status_says_released_not_drained() {
    let (_env, c, ctl) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1", "worker-2"], None)).await.unwrap();
    wait_status(&c, "m", "/conditions/0/status", json!("True")).await;
    let m = maintenance_json(&c, "m").await.unwrap();
    assert_eq!(m["status"]["drainStatus"]["drainMessage"], "Drained", "{:#}", m["status"]);
    set_stage(&c, "m", "Complete").await;
    wait_status(&c, "m", "/stageStatuses/2/name", json!("Complete")).await;
    wait_status(&c, "m", "/conditions/0/reason", json!("MaintenanceComplete")).await;
    let st = maintenance_json(&c, "m").await.unwrap()["status"].clone();
    assert!(st.get("drainStatus").is_none(), "no drain status after Complete: {st:#}");
    let stale: Vec<_> = st["nodeStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|n| n["drainMessage"].as_str().is_some_and(|m| m.contains("Drain")))
        .collect();
    assert!(stale.is_empty(), "no node status still says it drains: {st:#}");
    assert_eq!(st["conditions"][0]["status"], "False");
    for n in ["worker-1", "worker-2"] {
        let node = wait_node(&c, n, "released", |n| !is_cordoned(n) && holders(n).is_none()).await;
        assert_eq!(condition(&node, "MaintenanceInProgress").map(|c| c.0), Some("False".into()));
    }
    ctl.stop().await;
}

/// A controller that cannot run (here: its Lease cannot be created) is not silent: `serve`
/// shuts down and fails, so the process exits non-zero and Kubernetes restarts the pod.
#[tokio::test]
async fn serve_fails_when_its_controller_cannot_run() {
    let env = envtest_or_skip!(Options::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut hook = support::cluster::start_with_kubeconfig(
        dir,
        &env.admin_kubeconfig.clone(),
        &["--controller=true", "--lease-namespace", "no-such-namespace"],
    )
    .await;
    let err = hook.exit(Duration::from_secs(30)).await.expect_err("serve fails");
    assert!(format!("{err:#}").contains("controller"), "{err:#}");
}
