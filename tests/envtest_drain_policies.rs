//! Issue 14 on a real kube-apiserver: the drain deadline (`spec.drainTimeout`), node budgets
//! (`--max-draining-nodes`), pod opt-outs (`karpenter.sh/do-not-disrupt`,
//! `cluster-autoscaler.kubernetes.io/safe-to-evict`), and unmanaged and emptyDir pods under
//! `--unmanaged-pods` / `--emptydir-pods`.
//!
//! No kubelet runs: an evicted pod stays terminating (its eviction in progress) until the test
//! deletes it with grace period 0, as a kubelet would once its containers stopped. That makes
//! every step of a budgeted drain observable.

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use node_maintenance::controller::context::ControllerOptions;
use node_maintenance::planner::PodPolicy;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{create_maintenance, create_node, create_pods, maintenance_json, wait_for};
use support::envtest::requests::RequestCounts;
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(60);

/// A pod on `node` in `default`; `owned` gives it a ReplicaSet controller, `extra` is merged
/// into its JSON (annotations, volumes).
fn pod(name: &str, node: &str, owned: bool, extra: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]},
    });
    if owned {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
            "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]);
    }
    json_patch::merge(&mut p, &extra);
    serde_json::from_value(p).expect("a Pod")
}

/// Pods in `default`: name → terminating.
async fn pods(c: &kube::Client) -> BTreeMap<String, bool> {
    let list = Api::<Pod>::namespaced(c.clone(), "default").list(&ListParams::default()).await.expect("pods");
    list.items
        .into_iter()
        .map(|p| (p.metadata.name.unwrap_or_default(), p.metadata.deletion_timestamp.is_some()))
        .collect()
}

fn terminating(pods: &BTreeMap<String, bool>) -> Vec<String> {
    pods.iter().filter(|(_, t)| **t).map(|(n, _)| n.clone()).collect()
}

/// Waits until exactly the pods `want` are terminating.
async fn wait_terminating(c: &kube::Client, want: &[&str]) {
    wait_for(&format!("{want:?} terminating"), WAIT, || async {
        let p = pods(c).await;
        if terminating(&p) == want { Ok(()) } else { Err(format!("{p:?}")) }
    })
    .await;
}

/// An apiserver with one node, `w1`; `None` when the tier's binaries are missing.
async fn one_node() -> Option<(Envtest, kube::Client)> {
    let env = Envtest::start(Options::default()).await?;
    let c = env.client();
    create_node(&c, "w1", &[]).await;
    Some((env, c))
}

/// What a kubelet does once the containers stopped: the terminating pods go.
async fn finish_terminating(c: &kube::Client) {
    let api = Api::<Pod>::namespaced(c.clone(), "default");
    for name in terminating(&pods(c).await) {
        let _ = api.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
    }
}

/// The node messages of a maintenance: node → drainMessage.
async fn node_messages(c: &kube::Client, name: &str) -> BTreeMap<String, String> {
    let m = maintenance_json(c, name).await.unwrap_or_default();
    m["status"]["nodeStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                n["nodeRef"]["name"].as_str().unwrap_or_default().to_owned(),
                n["drainMessage"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// Waits until exactly `want` pods are terminating and each node in `waiting` says it waits
/// for a drain slot with `budget`.
async fn wait_step(c: &kube::Client, want: &[&str], waiting: &[&str], budget: &str) {
    let slot = format!("Waiting for a drain slot ({budget}).");
    wait_for(&format!("{want:?} evicting, {waiting:?} waiting"), WAIT, || async {
        let p = pods(c).await;
        let messages = node_messages(c, "m").await;
        let waits = waiting.iter().all(|n| messages.get(*n) == Some(&slot));
        if terminating(&p) == want && waits { Ok(()) } else { Err(format!("{p:?} {messages:?}")) }
    })
    .await;
}

/// Asserts that the controller sends no write while `churn` runs and the triggers it causes
/// settle: a waiting or blocked drain is a steady state. `own_node_writes` are the churn's.
async fn assert_quiet<F: std::future::Future<Output = ()>>(env: &Envtest, own_node_writes: u64, churn: F) {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = RequestCounts::parse(&env.metrics().await);
    churn.await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let delta = RequestCounts::parse(&env.metrics().await).since(&before);
    for resource in ["nodemaintenances", "events", "pods"] {
        assert_eq!(delta.writes_on(resource), 0, "no {resource} write: {:?}", delta.writes());
    }
    assert_eq!(delta.writes_on("nodes"), own_node_writes, "node writes are the test's own: {:?}", delta.writes());
}

/// Changes a label nobody selects on, `times` times: each change triggers every reconcile.
async fn touch_node(c: &kube::Client, node: &str, times: u64) {
    for i in 0..times {
        Api::<Node>::all(c.clone())
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"touch": i.to_string()}}})),
            )
            .await
            .expect("node label");
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
}

async fn event_reasons(env: &Envtest) -> String {
    env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await
}

async fn drained_condition(c: &kube::Client) -> Value {
    maintenance_json(c, "m").await.map(|m| m["status"]["conditions"][0].clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_budgets_let_nodes_drain_in_turns() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    let nodes = ["w1", "w2", "w3", "w4"];
    for n in nodes {
        create_node(&c, n, &[]).await;
    }
    create_pods(&c, &nodes.map(|n| pod(&format!("p-{n}"), n, true, json!({})))).await;
    let ctl = start_with(c.clone(), ControllerOptions { max_draining_nodes: Some(2), ..options(false) }).await;
    create_maintenance(&c, maintenance("m", "Drain", &nodes, None)).await.expect("created");

    // Two nodes at a time over every maintenance: w1 and w2 drain, w3 and w4 wait for a slot;
    // a node whose eviction is in progress keeps its slot.
    let cap = "--max-draining-nodes: 2 of 2 nodes draining";
    wait_step(&c, &["p-w1", "p-w2"], &["w3", "w4"], cap).await;
    assert_quiet(&env, 3, touch_node(&c, "w3", 3)).await;
    wait_step(&c, &["p-w1", "p-w2"], &["w3", "w4"], cap).await;

    finish_terminating(&c).await;
    wait_step(&c, &["p-w3", "p-w4"], &[], "").await;
    finish_terminating(&c).await;
    wait_for("drained", WAIT, || async {
        let cond = drained_condition(&c).await;
        if cond["status"] == "True" { Ok(()) } else { Err(cond.to_string()) }
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opted_out_pods_hold_the_drain_and_risky_evictions_are_reported() {
    let Some((env, c)) = one_node().await else { return };
    let annotated = |k: &str, v: &str| json!({"metadata": {"annotations": {k: v}}});
    create_pods(
        &c,
        &[
            pod("keep", "w1", true, annotated("karpenter.sh/do-not-disrupt", "true")),
            pod("keep-too", "w1", true, annotated("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")),
            pod("bare", "w1", false, json!({})),
            pod("scratch", "w1", true, json!({"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}})),
        ],
    )
    .await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["w1"], None)).await.expect("created");

    wait_for("bare and scratch evicted, opted-out pods kept", WAIT, || async {
        let p = pods(&c).await;
        if terminating(&p) == ["bare", "scratch"] && p.len() == 4 { Ok(()) } else { Err(format!("{p:?}")) }
    })
    .await;
    finish_terminating(&c).await;
    wait_for("blocked by the opted-out pods", WAIT, || async {
        let messages = node_messages(&c, "m").await;
        let cond = drained_condition(&c).await;
        let node = messages.get("w1").cloned().unwrap_or_default();
        let ok = node.starts_with("Blocked by pods that are not evicted")
            && node.contains("opted out: default/keep, default/keep-too")
            && cond["status"] == "False"
            && cond["message"].as_str().unwrap_or_default().contains("opted out: default/keep");
        if ok { Ok(()) } else { Err(format!("{node:?} {cond}")) }
    })
    .await;
    assert_eq!(pods(&c).await, BTreeMap::from([("keep".into(), false), ("keep-too".into(), false)]));
    assert_quiet(&env, 3, touch_node(&c, "w1", 3)).await;
    let reasons = event_reasons(&env).await;
    for reason in ["UnmanagedPodEvicted", "EmptyDirDataDeleted", "PodOptedOut"] {
        assert!(reasons.contains(reason), "{reason} in {reasons}");
    }

    // Removing the opt-out lets the drain finish.
    Api::<Pod>::namespaced(c.clone(), "default")
        .patch(
            "keep",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": null}}})),
        )
        .await
        .expect("annotation removed");
    wait_terminating(&c, &["keep"]).await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_unmanaged_and_emptydir_pods_are_reported_not_evicted() {
    let Some((env, c)) = one_node().await else { return };
    create_pods(
        &c,
        &[
            pod("web", "w1", true, json!({})),
            pod("bare", "w1", false, json!({})),
            pod("scratch", "w1", true, json!({"spec": {"volumes": [{"name": "tmp", "emptyDir": {}}]}})),
        ],
    )
    .await;
    let blocking =
        ControllerOptions { unmanaged_pods: PodPolicy::Block, emptydir_pods: PodPolicy::Block, ..options(false) };
    let ctl = start_with(c.clone(), blocking).await;
    create_maintenance(&c, maintenance("m", "Drain", &["w1"], None)).await.expect("created");
    wait_terminating(&c, &["web"]).await;
    finish_terminating(&c).await;
    wait_for("blocked, named by cause", WAIT, || async {
        let node = node_messages(&c, "m").await.get("w1").cloned().unwrap_or_default();
        let ok = node.contains("unmanaged pods (no controller; --unmanaged-pods=block): default/bare")
            && node.contains("pods with emptyDir data (--emptydir-pods=block): default/scratch");
        if ok { Ok(()) } else { Err(node) }
    })
    .await;
    assert_eq!(terminating(&pods(&c).await), Vec::<String>::new(), "neither is evicted");
    let reasons = event_reasons(&env).await;
    for reason in ["UnmanagedPodNotEvicted", "EmptyDirPodNotEvicted"] {
        assert!(reasons.contains(reason), "{reason} in {reasons}");
    }
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_past_its_timeout_reports_its_blockers_and_forces_nothing() {
    let Some((env, c)) = one_node().await else { return };
    let web = json!({"metadata": {"labels": {"app": "web"}}});
    create_pods(
        &c,
        &[
            pod("keep", "w1", true, json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})),
            pod("web", "w1", true, web),
        ],
    )
    .await;
    // Running, as a kubelet would report it: the Eviction API ignores budgets of Pending pods.
    Api::<Pod>::namespaced(c.clone(), "default")
        .patch_status("web", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Running"}})))
        .await
        .expect("web Running");
    // No disruption controller runs: the budget is never processed, so it allows nothing.
    env.kubectl_ok(&[
        "create",
        "poddisruptionbudget",
        "web",
        "-n",
        "default",
        "--selector",
        "app=web",
        "--min-available",
        "1",
    ])
    .await;
    let ctl = start_with(c.clone(), options(false)).await;
    let mut nm = maintenance("m", "Drain", &["w1"], None);
    nm["spec"]["drainTimeout"] = json!("3s");
    create_maintenance(&c, nm).await.expect("created");

    let cond = wait_for("DrainTimedOut", WAIT, || async {
        let cond = drained_condition(&c).await;
        if cond["reason"] == "DrainTimedOut" { Ok(cond) } else { Err(cond.to_string()) }
    })
    .await;
    let message = cond["message"].as_str().unwrap_or_default();
    assert_eq!(cond["status"], "False");
    for part in [
        "drainTimeout of 3s",
        "nothing is force-deleted",
        "blocked by PDB default/web: 1 pod",
        "opted out: default/keep",
    ] {
        assert!(message.contains(part), "{part:?} in {message}");
    }
    let m = maintenance_json(&c, "m").await.unwrap_or_default();
    assert!(m["status"]["drainStatus"]["lastProgressTime"].is_string(), "{:#}", m["status"]);
    assert_eq!(pods(&c).await, BTreeMap::from([("keep".into(), false), ("web".into(), false)]), "nothing forced");
    // One Warning Event and one count per timeout, however many reconciles follow.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reasons = event_reasons(&env).await;
    assert_eq!(reasons.matches("DrainTimedOut").count(), 1, "{reasons}");
    let text = ctl.metrics_text();
    assert_eq!(
        support::envtest::requests::metric_sum(&text, "node_maintenance_drain_timeouts_total", &[]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(support::envtest::requests::metric_sum(&text, "node_maintenance_drains_timed_out", &[]), Some(1.0));
    ctl.stop().await;
}

/// The v1.36 apiserver of this tier does not serve KEP-4563's EvictionRequest (alpha in 1.37):
/// discovery says so and the controller evicts through the Eviction API, as every drain test
/// here shows. EvictionRequests are tested on the stand-in (tests/controller_eviction_requests.rs).
#[tokio::test]
async fn this_tier_does_not_serve_eviction_requests() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    let answer = c.list_api_group_resources("lifecycle.k8s.io/v1alpha1").await;
    assert!(matches!(&answer, Err(kube::Error::Api(s)) if s.code == 404), "{answer:?}");
    assert!(!node_maintenance::cluster::eviction_requests::served(&c).await);
}
