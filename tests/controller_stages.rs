//! The reconcile loop through the real kube client against the apiserver stand-in
//! (SPEC 4.1, 4.2): cordon, Idle, Complete, overlapping maintenances, deletion, vanished
//! nodes.

mod support;

use serde_json::json;
use std::time::Duration;
use support::apiserver::ApiServer;
use support::controller::{holders, maintenance, options, set_stage, start, status_at, unschedulable};

const WAIT: Duration = Duration::from_secs(20);

async fn api() -> ApiServer {
    let api = ApiServer::start().await;
    api.load_nodes_yaml(support::apiserver::objects::fixture_nodes_path());
    api
}

#[tokio::test]
async fn cordon_makes_selected_nodes_unschedulable_and_records_the_stage() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Cordon", &["worker-1", "worker-2"], None));
    api.wait_for("worker-1 and worker-2 cordoned", WAIT, |a| {
        (unschedulable(a, "worker-1") && unschedulable(a, "worker-2")).then_some(())
    })
    .await;
    assert!(!unschedulable(&api, "worker-3"), "an unselected node is untouched");
    let h = holders(&api, "worker-1").unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&h).unwrap(),
        json!({"maintenances": ["m"], "unschedulableBefore": false})
    );
    api.wait_for("Cordon recorded", WAIT, |a| status_at(a, "m", "/stageStatuses/0/name").filter(|v| v == "Cordon"))
        .await;
    let m = api.maintenance("m").unwrap();
    assert_eq!(m["metadata"]["finalizers"], json!(["nodemaintenance.k8s.io/maintenance-completion"]));
    assert_eq!(m["status"]["selectedNodes"], 2);
    api.wait_for("a Cordoned event", WAIT, |a| a.events().iter().any(|e| e["reason"] == "Cordoned").then_some(()))
        .await;
    ctl.stop().await;
}

#[tokio::test]
async fn idle_touches_nothing() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Idle", &["worker-1"], None));
    api.wait_for("status written", WAIT, |a| status_at(a, "m", "/selectedNodes")).await;
    assert!(!unschedulable(&api, "worker-1"));
    assert!(holders(&api, "worker-1").is_none());
    assert!(api.maintenance("m").unwrap()["metadata"].get("finalizers").is_none(), "no finalizer in Idle");
    assert_eq!(api.count_requests("patch", "nodes"), 0, "no node was written");
    ctl.stop().await;
}

#[tokio::test]
async fn a_node_cordoned_before_the_maintenance_stays_cordoned_after_complete() {
    let api = api().await;
    let mut n3 = api.node("worker-3").unwrap();
    n3.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
    api.put_node(n3);
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Cordon", &["worker-3", "worker-4"], None));
    api.wait_for("both held", WAIT, |a| {
        (holders(a, "worker-3").is_some() && unschedulable(a, "worker-4")).then_some(())
    })
    .await;
    set_stage(&api, "m", "Complete");
    api.wait_for("worker-4 uncordoned", WAIT, |a| {
        (!unschedulable(a, "worker-4") && holders(a, "worker-4").is_none()).then_some(())
    })
    .await;
    api.wait_for("worker-3 released", WAIT, |a| holders(a, "worker-3").is_none().then_some(())).await;
    assert!(unschedulable(&api, "worker-3"), "someone else's cordon is kept");
    api.wait_for("Complete recorded", WAIT, |a| status_at(a, "m", "/stageStatuses/1/name").filter(|v| v == "Complete"))
        .await;
    ctl.stop().await;
}

#[tokio::test]
async fn completing_one_of_two_maintenances_keeps_the_shared_node_cordoned() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("a", "Cordon", &["worker-1"], None));
    api.put_maintenance(maintenance("b", "Cordon", &["worker-1", "worker-2"], None));
    api.wait_for("held by both", WAIT, |a| {
        holders(a, "worker-1").filter(|h| h.contains("\"a\"") && h.contains("\"b\""))
    })
    .await;
    set_stage(&api, "a", "Complete");
    api.wait_for("a released", WAIT, |a| holders(a, "worker-1").filter(|h| !h.contains("\"a\""))).await;
    assert!(unschedulable(&api, "worker-1"), "b still holds worker-1");
    set_stage(&api, "b", "Complete");
    // b releases its nodes one after the other (each also gets its conditions set False).
    api.wait_for("worker-1 and worker-2 uncordoned", WAIT, |a| {
        (!unschedulable(a, "worker-1") && !unschedulable(a, "worker-2")).then_some(())
    })
    .await;
    ctl.stop().await;
}

#[tokio::test]
async fn deletion_uncordons_then_removes_the_finalizer() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Cordon", &["worker-1"], None));
    api.wait_for("cordoned", WAIT, |a| unschedulable(a, "worker-1").then_some(())).await;
    api.wait_for("finalizer", WAIT, |a| a.maintenance("m").filter(|m| m["metadata"]["finalizers"].is_array())).await;
    api.delete_maintenance("m");
    api.wait_for("maintenance gone", WAIT, |a| a.maintenance("m").is_none().then_some(())).await;
    assert!(!unschedulable(&api, "worker-1"));
    assert!(holders(&api, "worker-1").is_none());
    // Nothing re-cordons after the finalizer is gone (the old operators' bug).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!unschedulable(&api, "worker-1"));
    ctl.stop().await;
}

#[tokio::test]
async fn a_selected_node_that_disappears_does_not_block_the_finalizer() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Cordon", &["worker-1", "worker-2"], None));
    api.wait_for("cordoned", WAIT, |a| (unschedulable(a, "worker-1") && unschedulable(a, "worker-2")).then_some(()))
        .await;
    api.delete_node("worker-2");
    api.delete_maintenance("m");
    api.wait_for("maintenance gone", WAIT, |a| a.maintenance("m").is_none().then_some(())).await;
    assert!(!unschedulable(&api, "worker-1"));
    ctl.stop().await;
}

#[tokio::test]
async fn someone_uncordoning_a_held_node_is_cordoned_again_with_an_event() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Cordon", &["worker-1"], None));
    api.wait_for("cordoned", WAIT, |a| unschedulable(a, "worker-1").then_some(())).await;
    let mut n = api.node("worker-1").unwrap();
    n.spec.as_mut().unwrap().unschedulable = Some(false);
    api.put_node(n);
    api.wait_for("re-cordoned", WAIT, |a| unschedulable(a, "worker-1").then_some(())).await;
    api.wait_for("Recordoned event", WAIT, |a| a.events().iter().any(|e| e["reason"] == "Recordoned").then_some(()))
        .await;
    ctl.stop().await;
}

#[tokio::test]
async fn a_node_that_leaves_the_selection_is_released() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    let mut m = maintenance("m", "Cordon", &[], None);
    m["spec"]["nodeSelector"] =
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]});
    api.put_maintenance(m);
    let gpu: Vec<String> = api
        .nodes()
        .into_iter()
        .filter(|n| n.metadata.labels.as_ref().and_then(|l| l.get("pool")).is_some_and(|p| p == "gpu"))
        .filter_map(|n| n.metadata.name)
        .collect();
    let first = gpu[0].clone();
    api.wait_for("gpu nodes cordoned", WAIT, |a| gpu.iter().all(|n| unschedulable(a, n)).then_some(())).await;
    let mut n = api.node(&first).unwrap();
    n.metadata.labels.as_mut().unwrap().insert("pool".into(), "general".into());
    api.put_node(n);
    api.wait_for("relabelled node released", WAIT, |a| {
        (!unschedulable(a, &first) && holders(a, &first).is_none()).then_some(())
    })
    .await;
    assert!(unschedulable(&api, &gpu[1]));
    ctl.stop().await;
}

/// Writes the controller sent (anything but reads and watches).
fn writes(api: &ApiServer) -> Vec<String> {
    api.request_log()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .map(|r| format!("{} {} {}", r.verb, r.resource, r.name.unwrap_or_default()))
        .collect()
}

fn node_condition(api: &ApiServer, node: &str, type_: &str) -> Option<(String, Option<String>)> {
    let n = api.node(node)?;
    let c = n.status?.conditions?.into_iter().find(|c| c.type_ == type_)?;
    Some((c.status, c.reason))
}

/// Touches an unrelated label of `node` (as a kubelet or another controller would).
fn relabel(api: &ApiServer, node: &str, value: &str) {
    let mut n = api.node(node).unwrap();
    n.metadata.labels.get_or_insert_with(Default::default).insert("unrelated".into(), value.into());
    api.put_node(n);
}

#[tokio::test]
async fn held_nodes_show_maintenance_in_progress_and_complete_leaves_an_exact_status_and_no_writes() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Cordon", &["worker-1"], None));
    api.wait_for("MaintenanceInProgress=True on worker-1", WAIT, |a| {
        node_condition(a, "worker-1", "MaintenanceInProgress")
            .filter(|c| c.0 == "True" && c.1.as_deref() == Some("AdminRequested"))
    })
    .await;
    set_stage(&api, "m", "Drain");
    api.wait_for("drained (no pods)", WAIT, |a| {
        status_at(a, "m", "/conditions/0/status").filter(|s| s == "True").and(status_at(a, "m", "/drainStatus"))
    })
    .await;
    assert_eq!(node_condition(&api, "worker-1", "Drained").map(|c| c.0).as_deref(), Some("True"));
    set_stage(&api, "m", "Complete");
    api.wait_for("Complete recorded", WAIT, |a| {
        status_at(a, "m", "/conditions/0/reason").filter(|r| r == "MaintenanceComplete")
    })
    .await;
    let st = status_at(&api, "m", "").unwrap();
    assert!(st.get("drainStatus").is_none(), "no stale drainStatus: {st}");
    assert!(st.get("nodeStatuses").is_none(), "no stale nodeStatuses: {st}");
    assert_eq!(st["selectedNodes"], 1);
    api.wait_for("worker-1 released", WAIT, |a| {
        node_condition(a, "worker-1", "MaintenanceInProgress").filter(|c| c.0 == "False")
    })
    .await;
    // Let the last writes reach the caches, then only unrelated changes happen.
    tokio::time::sleep(Duration::from_secs(1)).await;
    api.clear_request_log();
    for i in 0..5 {
        relabel(&api, "worker-1", &i.to_string());
        relabel(&api, "worker-3", &i.to_string());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(writes(&api), Vec::<String>::new(), "a steady state writes nothing");
    ctl.stop().await;
}

#[tokio::test]
async fn a_cordoned_maintenance_in_steady_state_writes_nothing() {
    let api = api().await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("a", "Cordon", &["worker-1", "worker-2"], None));
    api.put_maintenance(maintenance("b", "Cordon", &["worker-2"], None));
    api.wait_for("worker-2 held by both, conditions set", WAIT, |a| {
        let both = holders(a, "worker-2").is_some_and(|h| h.contains("\"a\"") && h.contains("\"b\""));
        let cond = node_condition(a, "worker-2", "MaintenanceInProgress").is_some_and(|c| c.0 == "True");
        let recorded = status_at(a, "b", "/stageStatuses/0/name").is_some();
        (both && cond && recorded).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    api.clear_request_log();
    for i in 0..5 {
        relabel(&api, "worker-2", &i.to_string());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(writes(&api), Vec::<String>::new(), "a steady state writes nothing");
    ctl.stop().await;
}
