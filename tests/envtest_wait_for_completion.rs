//! Pods that finish on a real kube-apiserver (SPEC 4.6 `spec.waitForCompletion`), with the fake
//! kubelet playing the node and ending the pods annotated
//! `fake-kubelet.nodemaintenance.test/run-seconds`. Evictions are read from the apiserver's
//! audit log, so "never evicted" means no eviction request reached the apiserver.
//!
//! No kube-controller-manager runs (no Job controller): each Job's pod is created by the test
//! with a controller ownerReference to a real batch/v1 Job object, which is all the
//! controller reads of a Job's pod.

mod support;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{
    app_pod, create_maintenance, create_node, create_pods, maintenance_json, pods_running, wait_for,
};
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(90);

/// Creates Job `name` (never run: no Job controller) and its pod `<name>-pod` on `node`, whose
/// command the fake kubelet ends `run_seconds` after it starts.
async fn job_with_pod(c: &kube::Client, name: &str, node: &str, run_seconds: u32) {
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"suspend": true, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "batch"}]}}}
    }))
    .expect("job");
    let job = Api::<Job>::namespaced(c.clone(), "default").create(&PostParams::default(), &job).await.expect("job");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": format!("{name}-pod"), "namespace": "default",
            "annotations": {"fake-kubelet.nodemaintenance.test/run-seconds": run_seconds.to_string()},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": job.metadata.uid, "controller": true}]
        },
        "spec": {"nodeName": node, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "batch"}]}
    }))
    .expect("pod");
    create_pods(c, &[pod]).await;
}

fn drained(m: &Value) -> &Value {
    m["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Drained"))
        .unwrap_or(&Value::Null)
}

/// Eviction requests for `pod` the apiserver answered, whatever the answer.
fn eviction_requests(env: &Envtest, pod: &str) -> usize {
    env.evictions().iter().filter(|e| e.pod == pod).count()
}

/// When the apiserver received the first eviction request for `pod` (audit log).
fn first_eviction_at(env: &Envtest, pod: &str) -> Option<jiff::Timestamp> {
    env.audit_events()
        .iter()
        .filter(|e| e["objectRef"]["subresource"] == "eviction" && e["objectRef"]["name"] == pod)
        .filter_map(|e| e["requestReceivedTimestamp"].as_str()?.parse().ok())
        .min()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_pod_is_never_evicted_and_the_node_is_drained_once_it_finishes() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    create_node(&c, "worker-1", &[("pool", "general")]).await;
    create_pods(&c, &[app_pod("web", "worker-1")]).await;
    // Long enough to see the wait on a loaded machine (the drain starts, and `web` is gone,
    // some seconds after the pods run).
    job_with_pod(&c, "report", "worker-1", 30).await;
    pods_running(&c, WAIT).await;
    let ctl = start_with(c.clone(), options(false)).await;

    let mut nm = maintenance("m", "Drain", &["worker-1"], None);
    nm["spec"]["waitForCompletion"] = json!({});
    create_maintenance(&c, nm).await.expect("create m");

    // The other pod goes; the Job's pod is left to finish: Drained False, WaitingForCompletion.
    wait_for("web evicted and m waiting for the Job's pod", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let evicted = env.accepted_evictions().iter().any(|(p, _)| p == "web");
        let waiting = drained(&m)["reason"] == "WaitingForCompletion" && drained(&m)["status"] == "False";
        if evicted && waiting { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    let m = maintenance_json(&c, "m").await.expect("m");
    let node = &m["status"]["nodeStatuses"][0];
    assert_eq!(node["podsWaitingForCompletion"], 1, "{node}");
    let message = node["drainMessage"].as_str().unwrap_or_default();
    assert!(message.contains("default/report-pod"), "the node's message names the pod: {message}");
    assert!(drained(&m)["message"].as_str().unwrap_or_default().contains("default/report-pod"), "{}", drained(&m));
    assert_eq!(m["status"]["nodeCounts"]["draining"], 1, "not drained while it runs: {}", m["status"]);

    // The fake kubelet ends it (Succeeded): it counts as gone and the node is drained.
    wait_for("m drained once the Job's pod finished", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        if drained(&m)["status"] == "True" { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    let pod = Api::<Pod>::namespaced(c.clone(), "default").get("report-pod").await.expect("the pod stays");
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Succeeded"));
    assert_eq!(eviction_requests(&env, "report-pod"), 0, "never evicted: {:?}", env.evictions());
    let m = maintenance_json(&c, "m").await.expect("m");
    assert!(m["status"]["nodeStatuses"][0].get("podsWaitingForCompletion").is_none(), "{}", m["status"]);
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_its_timeout_a_jobs_pod_still_running_is_evicted_not_before() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    create_node(&c, "worker-1", &[("pool", "general")]).await;
    job_with_pod(&c, "backup", "worker-1", 600).await;
    pods_running(&c, WAIT).await;
    // A long idle requeue: the controller must wake at the wait's deadline, not at a poll.
    let ctl = start_with(
        c.clone(),
        node_maintenance::controller::context::ControllerOptions {
            idle_requeue: Duration::from_secs(300),
            ..options(false)
        },
    )
    .await;

    let mut nm = maintenance("m", "Drain", &["worker-1"], None);
    nm["spec"]["waitForCompletion"] = json!({"timeout": "3s"});
    create_maintenance(&c, nm).await.expect("create m");

    wait_for("the Job's pod evicted", WAIT, || async {
        let accepted = env.accepted_evictions();
        if accepted.iter().any(|(p, _)| p == "backup-pod") { Ok(()) } else { Err(format!("{:?}", env.evictions())) }
    })
    .await;
    let m = maintenance_json(&c, "m").await.expect("m");
    let started: jiff::Timestamp = m["status"]["nodeStatuses"][0]["drainStartTime"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the node's drain start is recorded: {}", m["status"]));
    let evicted = first_eviction_at(&env, "backup-pod").expect("the eviction is in the audit log");
    let after = evicted.duration_since(started);
    // drainStartTime is stored in whole seconds (rounded down), so the deadline counted from
    // it is at most the one the controller counted from.
    assert!(after >= jiff::SignedDuration::from_secs(3), "not before the timeout: {after:?} after the drain start");
    assert!(
        after < jiff::SignedDuration::from_secs(15),
        "the controller woke at the deadline (not at a poll): {after:?} after the drain start"
    );

    // Evicted like any other pod: it goes and the node is drained.
    wait_for("m drained", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        if drained(&m)["status"] == "True" { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    ctl.stop().await;
}
