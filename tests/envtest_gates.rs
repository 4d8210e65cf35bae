//! Unattended maintenance on a real kube-apiserver (SPEC 4.6): pauses, and the gates of
//! NodeDisruptionBudgets, with the fake kubelet playing the nodes. Evictions are counted from
//! the apiserver's audit log, so "no new eviction" means no request reached the apiserver.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{
    create_maintenance, create_node, create_pods, is_cordoned, maintenance_json, node, wait_for,
};
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(90);

/// A pod on `node` labelled `app=<name>`, owned by nothing (so evicted like any other).
fn app_pod(name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "app"}]}
    }))
    .expect("pod")
}

async fn running(c: &kube::Client) {
    let pods = Api::<Pod>::namespaced(c.clone(), "default");
    wait_for("every pod Running", WAIT, || async {
        let list = pods.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let phases: Vec<_> = list.iter().map(|p| p.status.as_ref().and_then(|s| s.phase.clone())).collect();
        if phases.iter().all(|p| p.as_deref() == Some("Running")) { Ok(()) } else { Err(format!("{phases:?}")) }
    })
    .await;
}

async fn set_paused(c: &kube::Client, name: &str, paused: bool) {
    let api = Api::<node_maintenance::api::NodeMaintenance>::all(c.clone());
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"paused": paused}})))
        .await
        .expect("patch spec.paused");
}

fn condition<'a>(m: &'a Value, type_: &str) -> Option<&'a Value> {
    m["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// Evictions of `pod` the apiserver answered, whatever the answer.
fn eviction_requests(env: &Envtest, pod: &str) -> usize {
    env.evictions().iter().filter(|e| e.pod == pod).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_maintenance_starts_nothing_and_a_pause_mid_drain_stops_new_evictions_until_resumed() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    create_node(&c, "worker-1", &[("pool", "general")]).await;
    create_pods(&c, &[app_pod("free", "worker-1"), app_pod("guarded", "worker-1")]).await;
    // No disruption controller runs: the budget's status never allows one, so the apiserver
    // refuses every eviction of `guarded` while the budget exists.
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: guarded, namespace: default}\n\
               spec: {minAvailable: 1, selector: {matchLabels: {app: guarded}}}\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(pdb)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    running(&c).await;
    let ctl = start_with(c.clone(), options(false)).await;

    // Paused from the start: the node does not start (no cordon, no eviction).
    let mut nm = maintenance("m", "Drain", &["worker-1"], None);
    nm["spec"]["paused"] = json!(true);
    create_maintenance(&c, nm).await.expect("create m");
    wait_for("m shows Paused and its node waiting", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let waiting = m["status"]["nodeStatuses"][0]["phase"] == "Waiting";
        let paused = condition(&m, "Paused").is_some_and(|c| c["status"] == "True");
        if waiting && paused { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!is_cordoned(&node(&c, "worker-1").await), "a paused maintenance cordons nothing");
    assert!(env.evictions().is_empty(), "and evicts nothing: {:?}", env.evictions());

    // Resumed: the node starts; `free` goes, `guarded` is refused by its budget.
    set_paused(&c, "m", false).await;
    wait_for("free evicted and guarded refused", WAIT, || async {
        let accepted = env.accepted_evictions();
        let free = accepted.iter().any(|(p, _)| p == "free");
        if free && eviction_requests(&env, "guarded") > 0 { Ok(()) } else { Err(format!("{:?}", env.evictions())) }
    })
    .await;
    let m = maintenance_json(&c, "m").await.expect("m");
    assert!(condition(&m, "Paused").is_none(), "no Paused condition once resumed: {}", m["status"]);

    // Paused mid-drain: once the node's status says so, no eviction request reaches the
    // apiserver, neither for a pod that arrives now (no backoff: without the pause it would
    // go at the next pass) nor after the budget that refused `guarded` is gone; the cordon
    // stays.
    set_paused(&c, "m", true).await;
    wait_for("the node's drain says it is paused", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let message = m["status"]["nodeStatuses"][0]["drainMessage"].as_str().unwrap_or_default().to_owned();
        if message.starts_with("Paused") { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    let before = eviction_requests(&env, "guarded");
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(c.clone(), "default")
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete the budget");
    create_pods(&c, &[app_pod("late", "worker-1")]).await;
    running(&c).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(eviction_requests(&env, "late"), 0, "no new eviction while paused: {:?}", env.evictions());
    assert_eq!(eviction_requests(&env, "guarded"), before, "none retried either: {:?}", env.evictions());
    assert!(is_cordoned(&node(&c, "worker-1").await), "the hold stays while paused");
    let m = maintenance_json(&c, "m").await.expect("m");
    assert_eq!(m["status"]["conditions"][0]["status"], "False", "not drained: {}", m["status"]);

    // Resumed: the drain finishes.
    set_paused(&c, "m", false).await;
    wait_for("m drained", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        if m["status"]["conditions"][0]["status"] == "True" { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    let accepted = env.accepted_evictions();
    assert!(["guarded", "late"].iter().all(|p| accepted.iter().any(|(a, _)| a == p)), "{accepted:?}");
    let started = maintenance_json(&c, "m").await.expect("m")["status"]["nodeStatuses"][0]["drainStartTime"].clone();
    assert!(started.is_string(), "the node's drain start is recorded: {started}");
    ctl.stop().await;
}
