//! A controller in steady state sends no write requests (DEVELOPERS "quiet and exact on the
//! API"), measured on a real kube-apiserver from its own `apiserver_request_total`: with
//! maintenances Idle, cordoned, drained and complete, node heartbeats and unrelated Node and
//! Pod changes trigger reconciles, and every write the apiserver counts is the test's own.

mod support;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::Options;
use support::envtest::objects::{
    condition, create_fixture_nodes, create_maintenance, is_cordoned, maintenance_json, node, set_stage, wait_for,
};
use support::envtest::requests::{RequestCounts, metric_sum};

const WAIT: Duration = Duration::from_secs(30);
const ROUNDS: u64 = 10;

async fn condition_status(c: &kube::Client, name: &str) -> Result<String, String> {
    let m = maintenance_json(c, name).await.ok_or("gone")?;
    Ok(m["status"]["conditions"][0]["status"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn steady_state_sends_no_writes_while_nodes_heartbeat_and_unrelated_objects_change() {
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    create_fixture_nodes(&c).await;
    env.kubectl_ok(&["create", "namespace", "churn"]).await;
    env.kubectl_ok(&["create", "serviceaccount", "default", "-n", "churn"]).await;
    let ctl = start_with(c.clone(), options(false)).await;

    create_maintenance(&c, maintenance("idle", "Idle", &["worker-1"], None)).await.unwrap();
    create_maintenance(&c, maintenance("cordon", "Cordon", &["worker-2"], None)).await.unwrap();
    create_maintenance(&c, maintenance("drained", "Drain", &["worker-4"], None)).await.unwrap();
    create_maintenance(&c, maintenance("done", "Cordon", &["worker-3"], None)).await.unwrap();
    wait_for("worker-3 cordoned", WAIT, || async {
        if is_cordoned(&node(&c, "worker-3").await) { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    set_stage(&c, "done", "Complete").await;
    wait_for("drained Drained=True", WAIT, || async {
        condition_status(&c, "drained").await.and_then(|s| if s == "True" { Ok(()) } else { Err(s) })
    })
    .await;
    wait_for("done released", WAIT, || async {
        let n = node(&c, "worker-3").await;
        let m = maintenance_json(&c, "done").await.ok_or("gone")?;
        let complete = m["status"]["conditions"][0]["reason"] == "MaintenanceComplete";
        if !is_cordoned(&n) && complete { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    // Issue 22: the Idle maintenance's node shows MaintenancePlanned; keeping it costs nothing.
    wait_for("worker-1 MaintenancePlanned", WAIT, || async {
        let planned = condition(&node(&c, "worker-1").await, "MaintenancePlanned");
        if planned.as_ref().is_some_and(|(s, _)| s == "True") { Ok(()) } else { Err(format!("{planned:?}")) }
    })
    .await;
    // Let the last reconciles of the way in settle.
    tokio::time::sleep(Duration::from_secs(3)).await;

    let before = RequestCounts::parse(&env.metrics().await);
    let reconciles_before = ctl.metrics.reconciles.get();
    let nodes = Api::<Node>::all(c.clone());
    let pods = Api::<Pod>::namespaced(c.clone(), "churn");
    let pp = PatchParams::default();
    for i in 0..ROUNDS {
        // An unrelated node and a selected node change labels nobody selects on.
        for n in ["cp-1", "worker-2"] {
            nodes
                .patch(n, &pp, &Patch::Merge(json!({"metadata": {"labels": {"churn": i.to_string()}}})))
                .await
                .unwrap();
        }
        // Every selected node heartbeats, as the kubelet does.
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        for n in ["worker-1", "worker-2", "worker-3", "worker-4"] {
            let hb = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": now, "lastTransitionTime": "2026-11-01T00:00:00Z"}]}});
            nodes.patch_status(n, &pp, &Patch::Strategic(hb)).await.unwrap();
        }
        // Pods come and go on an unselected node.
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": format!("p{i}")},
            "spec": {"nodeName": "gpu-1", "containers": [{"name": "c", "image": "busybox"}]}}))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        if i > 0 {
            pods.delete(&format!("p{}", i - 1), &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Node triggers are throttled to 0.5 s and pod triggers to 1 s: give the last ones time.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let delta = RequestCounts::parse(&env.metrics().await).since(&before);
    let reconciles = ctl.metrics.reconciles.get() - reconciles_before;

    assert!(reconciles >= 4 * 3, "the churn triggered reconciles of every maintenance ({reconciles})");
    assert_eq!(delta.writes_on("nodemaintenances"), 0, "no NodeMaintenance write: {:?}", delta.writes());
    assert_eq!(delta.get("PATCH", "nodes", ""), 2 * ROUNDS, "node writes are the test's own: {:?}", delta.writes());
    assert_eq!(delta.get("PATCH", "nodes", "status"), 4 * ROUNDS, "{:?}", delta.writes());
    assert_eq!(delta.writes_on("nodes"), 6 * ROUNDS, "{:?}", delta.writes());
    assert_eq!(delta.writes_on("events"), 0, "no Event: {:?}", delta.writes());
    assert_eq!(delta.get("POST", "pods", "eviction"), 0, "no eviction: {:?}", delta.writes());
    assert_eq!(delta.writes_on("pods"), 2 * ROUNDS - 1, "pod writes are the test's own: {:?}", delta.writes());
    eprintln!(
        "steady state: {reconciles} reconciles, writes seen by the apiserver (all the test's own): {:?}",
        delta.writes()
    );
    ctl.stop().await;
}

/// Issue 13: one planning pass per trigger, shared by the reconciles of every Drain
/// maintenance (they are planned together anyway), not one pass per maintenance.
#[tokio::test]
async fn one_planning_pass_per_trigger_whatever_the_number_of_maintenances() {
    const DRAINS: u64 = 4;
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    create_fixture_nodes(&c).await;
    let ctl = start_with(c.clone(), options(false)).await;
    for (i, n) in ["worker-1", "worker-2", "worker-3", "worker-4"].iter().enumerate() {
        create_maintenance(&c, maintenance(&format!("d{i}"), "Drain", &[n], None)).await.unwrap();
    }
    for i in 0..DRAINS {
        wait_for("Drained=True", WAIT, || async {
            condition_status(&c, &format!("d{i}")).await.and_then(|s| if s == "True" { Ok(()) } else { Err(s) })
        })
        .await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let passes = |text: &str| metric_sum(text, "node_maintenance_planning_pass_duration_seconds_count", &[]);
    let passes_before = passes(&ctl.metrics_text()).expect("the pass histogram");
    let reconciles_before = ctl.metrics.reconciles.get();
    let nodes = Api::<Node>::all(c.clone());
    for i in 0..ROUNDS {
        // A label nobody selects on: a Node event, so a trigger of every maintenance.
        let patch = json!({"metadata": {"labels": {"churn": i.to_string()}}});
        nodes.patch("cp-1", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let passes = passes(&ctl.metrics_text()).expect("the pass histogram") - passes_before;
    let reconciles = ctl.metrics.reconciles.get() - reconciles_before;
    eprintln!("{ROUNDS} triggers: {reconciles} reconciles, {passes} planning passes");
    assert!(reconciles >= DRAINS * ROUNDS, "every trigger reconciled every maintenance ({reconciles})");
    // At most one pass per trigger (and per 60 s age limit); 4 maintenances would make 4.
    assert!(passes <= (ROUNDS + 2) as f64, "{passes} passes for {ROUNDS} triggers and {reconciles} reconciles");
    ctl.stop().await;
}

/// The Event recorder (controller/recorder.rs): a repeat within its memory is one Event with a
/// series; once idle for that memory it is renewed, and the renewed one starts a new Event,
/// which shows the old map (and the capacity it kept) is gone.
#[tokio::test]
async fn an_idle_event_recorder_is_renewed_and_its_map_dropped() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::api::ListParams;
    use kube::runtime::events::{Event, EventType, Reporter};
    use kube::{Resource, ResourceExt};
    use node_maintenance::controller::recorder::{EventRecorder, RECORDER_MEMORY};
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    create_fixture_nodes(&c).await;
    let about = node(&c, "worker-1").await.object_ref(&());
    let reporter = Reporter { controller: "node-maintenance".into(), instance: Some("test".into()) };
    let events = EventRecorder::new(c.clone(), reporter);
    let ev = Event {
        type_: EventType::Normal,
        reason: "Cordoned".into(),
        note: None,
        action: "Cordoned".into(),
        secondary: None,
    };
    let published = || async {
        let list =
            Api::<K8sEvent>::namespaced(c.clone(), "default").list(&ListParams::default()).await.expect("events");
        let ours: Vec<&K8sEvent> =
            list.items.iter().filter(|e| e.reporting_instance.as_deref() == Some("test")).collect();
        let mut counts: Vec<i32> = ours.iter().map(|e| e.series.as_ref().map_or(1, |s| s.count)).collect();
        counts.sort_unstable();
        (ours.len(), counts, list.items.iter().map(|e| (e.name_any(), e.reason.clone())).collect::<Vec<_>>())
    };
    events.recorder().publish(&ev, &about).await.expect("published");
    events.recorder().publish(&ev, &about).await.expect("published");
    let (_, counts, all) = published().await;
    assert_eq!(counts, [2], "a repeat is a series of the one Event: {all:?}");
    let now = std::time::Instant::now();
    assert!(!events.renew_if_idle(now), "used a moment ago");
    assert!(events.renew_if_idle(now + RECORDER_MEMORY), "idle for as long as it remembers");
    assert!(!events.renew_if_idle(now + RECORDER_MEMORY), "renewed once, not at every sweep");
    events.recorder().publish(&ev, &about).await.expect("published");
    let (n, counts, names) = published().await;
    assert_eq!((n, counts), (2, vec![1, 2]), "the renewed recorder remembers nothing: a new Event {names:?}");
}
