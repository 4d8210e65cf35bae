//! Unattended maintenance on a real kube-apiserver (SPEC 4.6): pauses, and the gates of
//! NodeDisruptionBudgets, with the fake kubelet playing the nodes. Evictions are counted from
//! the apiserver's audit log, so "no new eviction" means no request reached the apiserver.

mod support;

use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{
    app_pod, create_maintenance, create_node, create_pods, is_cordoned, maintenance_json, node, pods_running, wait_for,
};
use support::envtest::requests::RequestCounts;
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(90);

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

/// Paused mid-drain (the pause asked for by the caller): once the node's drainMessage of
/// maintenance `m` starts with `paused`, no eviction request reaches the apiserver, neither
/// for a pod that arrives now (no backoff: without the pause it would go at the next pass)
/// nor after the PodDisruptionBudget that refused `guarded` is gone; the cordon stays and
/// the maintenance is not drained.
async fn no_new_eviction_while_paused(env: &Envtest, c: &kube::Client, m: &str, paused: &str) {
    wait_for("the node's drain says it is paused", WAIT, || async {
        let message = node_message(c, m, "worker-1").await;
        if message.starts_with(paused) { Ok(()) } else { Err(message) }
    })
    .await;
    let before = eviction_requests(env, "guarded");
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(c.clone(), "default")
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete the budget");
    create_pods(c, &[app_pod("late", "worker-1")]).await;
    pods_running(c, WAIT).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(eviction_requests(env, "late"), 0, "no new eviction while paused: {:?}", env.evictions());
    assert_eq!(eviction_requests(env, "guarded"), before, "none retried either: {:?}", env.evictions());
    assert!(is_cordoned(&node(c, "worker-1").await), "the hold stays while paused");
    let status = maintenance_json(c, m).await.expect("m")["status"].clone();
    assert_eq!(status["conditions"][0]["status"], "False", "not drained: {status}");
}

/// `worker-1` with pods `free` and `guarded`, the latter refused eviction by a
/// PodDisruptionBudget (no disruption controller runs, so its status never allows one).
async fn guarded_node(env: &Envtest, c: &kube::Client) {
    create_node(c, "worker-1", &[("pool", "general")]).await;
    create_pods(c, &[app_pod("free", "worker-1"), app_pod("guarded", "worker-1")]).await;
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: guarded, namespace: default}\n\
               spec: {minAvailable: 1, selector: {matchLabels: {app: guarded}}}\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(pdb)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    pods_running(c, WAIT).await;
}

/// Waits until `free` was evicted and `guarded` refused at least once: the drain runs.
async fn draining_until_guarded(env: &Envtest) {
    wait_for("free evicted and guarded refused", WAIT, || async {
        let free = env.accepted_evictions().iter().any(|(p, _)| p == "free");
        if free && eviction_requests(env, "guarded") > 0 { Ok(()) } else { Err(format!("{:?}", env.evictions())) }
    })
    .await;
}

/// Waits until maintenance `m` is drained, with `guarded` and `late` evicted.
async fn drained_after_resume(env: &Envtest, c: &kube::Client, m: &str) {
    wait_for("drained", WAIT, || async {
        let m = maintenance_json(c, m).await.ok_or("gone")?;
        if m["status"]["conditions"][0]["status"] == "True" { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    let accepted = env.accepted_evictions();
    assert!(["guarded", "late"].iter().all(|p| accepted.iter().any(|(a, _)| a == p)), "{accepted:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_maintenance_starts_nothing_and_a_pause_mid_drain_stops_new_evictions_until_resumed() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    guarded_node(&env, &c).await;
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
    draining_until_guarded(&env).await;
    let m = maintenance_json(&c, "m").await.expect("m");
    assert!(condition(&m, "Paused").is_none(), "no Paused condition once resumed: {}", m["status"]);

    set_paused(&c, "m", true).await;
    no_new_eviction_while_paused(&env, &c, "m", "Paused").await;
    set_paused(&c, "m", false).await;
    drained_after_resume(&env, &c, "m").await;
    let started = maintenance_json(&c, "m").await.expect("m")["status"]["nodeStatuses"][0]["drainStartTime"].clone();
    assert!(started.is_string(), "the node's drain start is recorded: {started}");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_request_on_a_budget_mid_drain_stops_new_evictions_until_it_is_withdrawn() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    guarded_node(&env, &c).await;
    create_budget(&env, "general", json!({"maxUnavailable": 1})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.expect("create m");
    draining_until_guarded(&env).await;
    apply_pause_requests(&c, "oncall", json!([{"name": "oncall", "reason": "incident"}])).await;
    no_new_eviction_while_paused(&env, &c, "m", "NodeDisruptionBudget general is paused by oncall (incident)").await;
    apply_pause_requests(&c, "oncall", json!([])).await;
    drained_after_resume(&env, &c, "m").await;
    ctl.stop().await;
}

/// A NodeDisruptionBudget `name` over `pool=general` with `spec` merged in (no count unless
/// `spec` sets one).
async fn create_budget(env: &Envtest, name: &str, spec: Value) {
    create_budget_over(env, name, ("pool", "general"), spec).await;
}

/// A NodeDisruptionBudget `name` over the nodes labelled `key=value`, with `spec` merged in.
async fn create_budget_over(env: &Envtest, name: &str, (key, value): (&str, &str), spec: Value) {
    let mut budget = json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}]}}
    });
    if let (Some(into), Some(from)) = (budget["spec"].as_object_mut(), spec.as_object()) {
        into.extend(from.clone());
    }
    let out = env.kubectl(&["apply", "-f", "-"], Some(&budget.to_string())).await;
    assert!(out.status.success(), "budget {name}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Server-side applies, as field manager `party`, the pause requests `requests` of budget
/// `general`: the party's own entries, which an apply without them withdraws.
async fn apply_pause_requests(c: &kube::Client, party: &str, requests: Value) {
    apply_pause_requests_to(c, "general", party, requests).await;
}

/// As [`apply_pause_requests`], on budget `budget`.
async fn apply_pause_requests_to(c: &kube::Client, budget: &str, party: &str, requests: Value) {
    let body = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
        "metadata": {"name": budget}, "spec": {"pauseRequests": requests}});
    Api::<node_maintenance::api::NodeDisruptionBudget>::all(c.clone())
        .patch(budget, &PatchParams::apply(party), &Patch::Apply(body))
        .await
        .expect("apply");
}

/// Merge-patches the spec of budget `name`.
async fn patch_budget(c: &kube::Client, name: &str, spec: Value) {
    let api = Api::<node_maintenance::api::NodeDisruptionBudget>::all(c.clone());
    api.patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": spec}))).await.expect("patch budget");
}

async fn budget_json(c: &kube::Client, name: &str) -> Value {
    let api = Api::<node_maintenance::api::NodeDisruptionBudget>::all(c.clone());
    serde_json::to_value(api.get(name).await.expect("budget")).expect("json")
}

/// Waits until budget `name`'s `DisruptionAllowed` condition has `reason`; returns the budget.
async fn budget_with_reason(c: &kube::Client, name: &str, reason: &str) -> Value {
    wait_for(&format!("budget {name} with reason {reason}"), WAIT, || async {
        let b = budget_json(c, name).await;
        let now = condition(&b, "DisruptionAllowed").map(|c| c["reason"].clone());
        if now == Some(json!(reason)) { Ok(b) } else { Err(b["status"].to_string()) }
    })
    .await
}

/// The drainMessage of `node` in maintenance `m`'s status.
async fn node_message(c: &kube::Client, m: &str, node: &str) -> String {
    let Some(m) = maintenance_json(c, m).await else { return String::new() };
    let statuses = m["status"]["nodeStatuses"].as_array().cloned().unwrap_or_default();
    let entry = statuses.iter().find(|s| s["nodeRef"]["name"] == node).cloned().unwrap_or_default();
    entry["drainMessage"].as_str().unwrap_or_default().to_owned()
}

/// Opens in leap years only (next: 2028-02-29 03:00 in Berlin): closed whenever a test runs.
fn leap_day_window() -> Value {
    json!([{"schedule": "0 3 29 2 *", "duration": "1h", "timeZone": "Europe/Berlin"}])
}

/// Open at any time: fires every minute and stays open an hour.
fn always_open_window() -> Value {
    json!([{"schedule": "* * * * *", "duration": "1h"}])
}

async fn general_nodes(c: &kube::Client, names: &[&str]) {
    for n in names {
        create_node(c, n, &[("pool", "general")]).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_window_keeps_nodes_waiting_uncordoned_opening_it_starts_them_and_closing_it_mid_drain_lets_them_finish()
 {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1", "worker-2"]).await;
    create_pods(&c, &[app_pod("free", "worker-1"), app_pod("guarded", "worker-2")]).await;
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: guarded, namespace: default}\n\
               spec: {minAvailable: 1, selector: {matchLabels: {app: guarded}}}\n";
    assert!(env.kubectl(&["apply", "-f", "-"], Some(pdb)).await.status.success());
    pods_running(&c, WAIT).await;
    create_budget(&env, "weekend", json!({"maintenanceWindows": leap_day_window()})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1", "worker-2"], None)).await.expect("m");

    let opens = "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2028-02-29T03:00:00+01:00).";
    wait_for("both nodes wait for the window", WAIT, || async {
        let (one, two) = (node_message(&c, "m", "worker-1").await, node_message(&c, "m", "worker-2").await);
        if one == opens && two == opens { Ok(()) } else { Err(format!("{one:?} {two:?}")) }
    })
    .await;
    let b = budget_with_reason(&c, "weekend", "OutsideMaintenanceWindow").await;
    assert_eq!(b["status"]["maintenanceWindow"], json!({"open": false, "nextOpensAt": "2028-02-29T02:00:00Z"}));
    assert_eq!(b["status"]["disruptionsAllowed"], 0);
    assert_eq!(b["status"]["closedGates"][0]["reason"], "OutsideMaintenanceWindow");
    for n in ["worker-1", "worker-2"] {
        let node = node(&c, n).await;
        assert!(!is_cordoned(&node), "{n} waits uncordoned");
        let planned = support::envtest::objects::condition(&node, "MaintenancePlanned");
        assert_eq!(planned, Some(("True".into(), "MaintenanceWindow".into())), "{n}");
    }
    assert!(env.evictions().is_empty());

    // Opened by an edit: the nodes start within seconds.
    patch_budget(&c, "weekend", json!({"maintenanceWindows": always_open_window()})).await;
    wait_for("free evicted, guarded refused", Duration::from_secs(20), || async {
        let free = env.accepted_evictions().iter().any(|(p, _)| p == "free");
        if free && eviction_requests(&env, "guarded") > 0 { Ok(()) } else { Err(format!("{:?}", env.evictions())) }
    })
    .await;
    let b = wait_for("the budget's window open", WAIT, || async {
        let b = budget_json(&c, "weekend").await;
        if b["status"]["maintenanceWindow"]["open"] == true { Ok(b) } else { Err(b["status"].to_string()) }
    })
    .await;
    assert!(b["status"]["closedGates"].is_null(), "no gate closed: {}", b["status"]);

    // Closed again mid-drain: the started node finishes (its guarded pod goes once its
    // budget is gone), and a pod that arrives on it now is evicted too.
    patch_budget(&c, "weekend", json!({"maintenanceWindows": leap_day_window()})).await;
    wait_for("the window closed again", WAIT, || async {
        let b = budget_json(&c, "weekend").await;
        if b["status"]["maintenanceWindow"]["open"] == false { Ok(()) } else { Err(b["status"].to_string()) }
    })
    .await;
    Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(c.clone(), "default")
        .delete("guarded", &DeleteParams::default())
        .await
        .expect("delete the PDB");
    create_pods(&c, &[app_pod("late", "worker-1")]).await;
    wait_for("m drained", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        if m["status"]["conditions"][0]["status"] == "True" { Ok(()) } else { Err(m["status"].to_string()) }
    })
    .await;
    let accepted = env.accepted_evictions();
    assert!(["guarded", "late"].iter().all(|p| accepted.iter().any(|(a, _)| a == p)), "{accepted:?}");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackout_holds_until_removed_and_a_pause_holds_until_the_last_party_withdraws_its_request() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1", "worker-2"]).await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let hour = k8s_openapi::jiff::SignedDuration::from_hours(1);
    let blackout =
        json!([{"start": (now - hour).to_string(), "end": (now + hour).to_string(), "reason": "year-end freeze"}]);
    create_budget(&env, "general", json!({"maxUnavailable": 2, "blackouts": blackout})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m1", "Cordon", &["worker-1"], None)).await.expect("m1");
    wait_for("worker-1 waits for the blackout", WAIT, || async {
        let message = node_message(&c, "m1", "worker-1").await;
        if message.contains("is in a blackout until") && message.contains("year-end freeze") {
            Ok(())
        } else {
            Err(message)
        }
    })
    .await;
    budget_with_reason(&c, "general", "Blackout").await;
    assert!(!is_cordoned(&node(&c, "worker-1").await));
    patch_budget(&c, "general", json!({"blackouts": null})).await;
    wait_for("worker-1 cordoned once the blackout is gone", Duration::from_secs(20), || async {
        if is_cordoned(&node(&c, "worker-1").await) { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;

    // Two parties pause the budget, each with its own entry (server-side apply).
    apply_pause_requests(&c, "team-a", json!([{"name": "team-a", "reason": "kernel regression"}])).await;
    apply_pause_requests(&c, "team-b", json!([{"name": "team-b"}])).await;
    let b = budget_json(&c, "general").await;
    assert_eq!(b["spec"]["pauseRequests"].as_array().map(Vec::len), Some(2), "{}", b["spec"]);
    create_maintenance(&c, maintenance("m2", "Cordon", &["worker-2"], None)).await.expect("m2");
    wait_for("worker-2 waits for the pause", WAIT, || async {
        let message = node_message(&c, "m2", "worker-2").await;
        let want = "NodeDisruptionBudget general is paused by team-a (kernel regression) and team-b.";
        if message == want { Ok(()) } else { Err(message) }
    })
    .await;
    // team-a withdraws its request: team-b's keeps the pause.
    apply_pause_requests(&c, "team-a", json!([])).await;
    wait_for("paused by team-b alone", WAIT, || async {
        let message = node_message(&c, "m2", "worker-2").await;
        if message == "NodeDisruptionBudget general is paused by team-b." { Ok(()) } else { Err(message) }
    })
    .await;
    assert!(!is_cordoned(&node(&c, "worker-2").await), "still paused");
    assert!(is_cordoned(&node(&c, "worker-1").await), "a pause keeps the holds there are");
    apply_pause_requests(&c, "team-b", json!([])).await;
    wait_for("worker-2 cordoned once no pause is left", Duration::from_secs(20), || async {
        if is_cordoned(&node(&c, "worker-2").await) { Ok(()) } else { Err(node_message(&c, "m2", "worker-2").await) }
    })
    .await;
    budget_with_reason(&c, "general", "InsufficientNodes").await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_unhealthy_nodes_hold_new_starts_until_they_recover() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1", "worker-2", "worker-3"]).await;
    create_budget(&env, "general", json!({"healthGate": {"maxUnhealthy": 0}})).await;
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(c.clone());
    let not_ready = |value: Option<&str>| json!({"metadata": {"annotations": {"fake-kubelet.nodemaintenance.test/not-ready": value}}});
    nodes.patch("worker-3", &PatchParams::default(), &Patch::Merge(not_ready(Some("true")))).await.expect("patch");
    // The fake kubelet reports it at its next status update: the gate must see it first.
    wait_for("worker-3 NotReady", WAIT, || async {
        let ready = support::envtest::objects::condition(&node(&c, "worker-3").await, "Ready");
        if ready.as_ref().is_some_and(|(status, _)| status == "False") { Ok(()) } else { Err(format!("{ready:?}")) }
    })
    .await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-1"], None)).await.expect("m");
    wait_for("worker-1 waits for node health", WAIT, || async {
        let message = node_message(&c, "m", "worker-1").await;
        if message.contains("1 of 3 selected nodes are unhealthy (maxUnhealthy allows 0)") {
            Ok(())
        } else {
            Err(message)
        }
    })
    .await;
    budget_with_reason(&c, "general", "TooManyUnhealthyNodes").await;
    assert!(!is_cordoned(&node(&c, "worker-1").await));
    nodes.patch("worker-3", &PatchParams::default(), &Patch::Merge(not_ready(None))).await.expect("patch");
    wait_for("worker-1 cordoned once worker-3 is Ready", WAIT, || async {
        if is_cordoned(&node(&c, "worker-1").await) { Ok(()) } else { Err(node_message(&c, "m", "worker-1").await) }
    })
    .await;
    ctl.stop().await;
}

/// Maintenance `m` holds `worker-1` in Cordon while budget `nights`' window is open; the
/// window closes, then `m` moves to Drain. Returns the running controller.
async fn held_in_cordon_then_drain_behind_a_closed_window(
    env: &Envtest,
    c: &kube::Client,
) -> support::controller::Running {
    create_budget(env, "nights", json!({"maintenanceWindows": always_open_window()})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(c, maintenance("m", "Cordon", &["worker-1"], None)).await.expect("m");
    wait_for("worker-1 held in Cordon", WAIT, || async {
        if is_cordoned(&node(c, "worker-1").await) { Ok(()) } else { Err(node_message(c, "m", "worker-1").await) }
    })
    .await;
    patch_budget(c, "nights", json!({"maintenanceWindows": leap_day_window()})).await;
    wait_for("the window closed", WAIT, || async {
        let b = budget_json(c, "nights").await;
        if b["status"]["maintenanceWindow"]["open"] == false { Ok(()) } else { Err(b["status"].to_string()) }
    })
    .await;
    support::envtest::objects::set_stage(c, "m", "Drain").await;
    ctl
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_maintenance_held_in_cordon_and_moved_to_drain_while_its_window_is_closed_evicts_nothing_until_it_opens()
 {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1"]).await;
    create_pods(&c, &[app_pod("app", "worker-1")]).await;
    pods_running(&c, WAIT).await;
    let ctl = held_in_cordon_then_drain_behind_a_closed_window(&env, &c).await;
    wait_for("worker-1's drain waits for the window", WAIT, || async {
        let message = node_message(&c, "m", "worker-1").await;
        if message.starts_with("Waiting for the maintenance window") { Ok(()) } else { Err(message) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(env.evictions().is_empty(), "no eviction while the window is closed: {:?}", env.evictions());
    assert!(is_cordoned(&node(&c, "worker-1").await), "the hold stays");
    // A wait for a gate is not a stall: no progress time for the stall alert to read.
    let m = maintenance_json(&c, "m").await.expect("m");
    assert_eq!(m["status"]["conditions"][0]["reason"], "WaitingForGate", "{}", m["status"]);
    let scrape = ctl.metrics_text();
    assert!(!scrape.contains("node_maintenance_drain_last_progress_timestamp_seconds{"), "{scrape}");
    patch_budget(&c, "nights", json!({"maintenanceWindows": always_open_window()})).await;
    wait_for("app evicted once the window opens", Duration::from_secs(20), || async {
        if env.accepted_evictions().iter().any(|(p, _)| p == "app") { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firing_matching_alert_holds_an_ignored_one_does_not_and_an_unreachable_prometheus_holds() {
    let Some(binary) = support::prometheus::required_binary("prometheus") else { return };
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    for (node, gate) in [("worker-1", "a"), ("worker-2", "b"), ("worker-3", "c")] {
        create_node(&c, node, &[("gate", gate)]).await;
    }
    let groups = json!([{"name": "cluster", "rules": [
        {"alert": "NodeDown", "expr": "vector(1)", "for": "0s", "labels": {"severity": "critical"}},
        {"alert": "BatchSlow", "expr": "vector(1)", "for": "0s", "labels": {"severity": "critical", "team": "batch"}},
        {"alert": "DiskFilling", "expr": "vector(1)", "for": "1h", "labels": {"severity": "critical"}},
    ]}]);
    let dir = tempfile::tempdir().expect("tempdir");
    let (_prometheus, url) = support::prometheus::start(&binary, dir.path(), &[], &groups, WAIT).await;
    let client =
        node_maintenance::cluster::alerts::AlertsClient::new(&url.parse().expect("URL"), None, WAIT).expect("client");
    wait_for("both alerts firing", WAIT, || async {
        let firing = client.firing().await.map_err(|e| e.to_string())?;
        if firing.len() == 2 { Ok(()) } else { Err(format!("{firing:?}")) }
    })
    .await;
    let critical = json!({"healthGate": {"alerts": {"matchers": ["{severity=\"critical\"}"]}}});
    create_budget_over(&env, "a", ("gate", "a"), critical.clone()).await;
    let ignoring = json!({"healthGate": {"alerts": {"matchers": ["{severity=\"critical\"}"],
        "ignore": ["{alertname=\"NodeDown\"}", "{team=~\"batch|ml\"}"]}}});
    create_budget_over(&env, "b", ("gate", "b"), ignoring).await;
    let mut controller = options(false);
    controller.prometheus.url = Some(url.parse().expect("URL"));
    let ctl = start_with(c.clone(), controller).await;
    create_maintenance(&c, maintenance("m1", "Cordon", &["worker-1"], None)).await.expect("m1");
    create_maintenance(&c, maintenance("m2", "Cordon", &["worker-2"], None)).await.expect("m2");
    wait_for("worker-2 cordoned: its firing alerts are ignored", WAIT, || async {
        if is_cordoned(&node(&c, "worker-2").await) { Ok(()) } else { Err(node_message(&c, "m2", "worker-2").await) }
    })
    .await;
    let want = "NodeDisruptionBudget a holds while alerts fire: BatchSlow and NodeDown.";
    wait_for("worker-1 waits for the firing alerts", WAIT, || async {
        let message = node_message(&c, "m1", "worker-1").await;
        if message == want { Ok(()) } else { Err(message) }
    })
    .await;
    assert!(!is_cordoned(&node(&c, "worker-1").await), "a pending alert does not count, the firing ones do");
    budget_with_reason(&c, "a", "AlertsFiring").await;
    let reads = support::envtest::requests::metric_sum(
        &ctl.metrics_text(),
        "node_maintenance_alert_reads_total",
        &["result=\"success\""],
    );
    assert!(reads.is_some_and(|n| n >= 1.0), "the reads are counted: {reads:?}");
    ctl.stop().await;

    // No Prometheus answering: the gate is closed until a read succeeds (fail closed).
    let mut controller = options(false);
    let port = support::envtest::process::free_port();
    controller.prometheus.url = Some(format!("http://127.0.0.1:{port}").parse().expect("URL"));
    let ctl = start_with(c.clone(), controller).await;
    create_budget_over(&env, "c", ("gate", "c"), critical).await;
    create_maintenance(&c, maintenance("m3", "Cordon", &["worker-3"], None)).await.expect("m3");
    wait_for("worker-3 waits while alerts cannot be read", WAIT, || async {
        let message = node_message(&c, "m3", "worker-3").await;
        if message.starts_with("NodeDisruptionBudget c holds while alerts cannot be read") {
            Ok(())
        } else {
            Err(message)
        }
    })
    .await;
    assert!(!is_cordoned(&node(&c, "worker-3").await));
    ctl.stop().await;
}

/// Edges of a window that opens at every minute's second 0 and closes at second 20, in
/// `(from, to)`.
fn edges_between(from: k8s_openapi::jiff::Timestamp, to: k8s_openapi::jiff::Timestamp) -> usize {
    let (from, to) = (from.as_second(), to.as_second());
    ((from + 1)..=to).filter(|s| s.rem_euclid(60) == 0 || s.rem_euclid(60) == 20).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_wakes_at_a_window_edge_without_polling_and_writes_only_what_the_edge_changes() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1"]).await;
    create_budget(&env, "minutes", json!({"maintenanceWindows": [{"schedule": "* * * * *", "duration": "20s"}]})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    wait_for("the budget has a status", WAIT, || async {
        let b = budget_json(&c, "minutes").await;
        if b["status"]["maintenanceWindow"].is_object() { Ok(()) } else { Err(b.to_string()) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (start, before) = (k8s_openapi::jiff::Timestamp::now(), RequestCounts::parse(&env.metrics().await));
    let reconciles = ctl.metrics.reconciles.get();
    tokio::time::sleep(Duration::from_secs(45)).await;
    let (end, delta) = (k8s_openapi::jiff::Timestamp::now(), RequestCounts::parse(&env.metrics().await).since(&before));
    let reconciles = ctl.metrics.reconciles.get() - reconciles;
    // An edge is seen a second after it (the wake's margin): count those, give or take one
    // at each end of the window.
    let one = k8s_openapi::jiff::SignedDuration::from_secs(1);
    let (least, most) = (edges_between(start, end - one - one), edges_between(start - one - one, end));
    let writes = delta.writes_on("nodedisruptionbudgets");
    assert!(
        (least..=most).contains(&(writes as usize)) && least > 0,
        "one status write per edge ({least}..={most}): {:?}",
        delta.writes()
    );
    assert_eq!(delta.writes_on("nodes"), 0, "{:?}", delta.writes());
    // Each edge: the wake-up, and the budget's own status event (which decides nothing).
    assert!(reconciles as usize <= 2 * most + 1, "{reconciles} decisions for at most {most} edges: no polling");
    ctl.stop().await;
}

/// The README's worked example (between its `worked-example` markers), as YAML.
fn readme_example() -> String {
    readme_block("worked-example")
}

/// The YAML block of the README between its `<!-- NAME:begin -->` and `<!-- NAME:end -->`.
fn readme_block(name: &str) -> String {
    let readme = include_str!("../README.md");
    let begin = readme.find(&format!("<!-- {name}:begin -->")).expect("begin marker");
    let end = readme.find(&format!("<!-- {name}:end -->")).expect("end marker");
    let block = &readme[begin..end];
    let yaml = block.split("```yaml\n").nth(1).and_then(|b| b.split("```").next()).expect("a yaml block");
    yaml.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_worked_example_applies_and_holds_its_nodes_while_its_alerts_cannot_be_read() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1", "worker-2", "worker-3"]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(&readme_example())).await;
    assert!(out.status.success(), "the README's example: {}", String::from_utf8_lossy(&out.stderr));
    // No --prometheus-url: its alert gate stays closed whatever the clock says (fail closed).
    let ctl = start_with(c.clone(), options(false)).await;
    let b = wait_for("the budget reports its gates", WAIT, || async {
        let b = budget_json(&c, "general").await;
        if b["status"]["closedGates"].is_array() { Ok(b) } else { Err(b.to_string()) }
    })
    .await;
    let reasons: Vec<&str> =
        b["status"]["closedGates"].as_array().into_iter().flatten().filter_map(|g| g["reason"].as_str()).collect();
    assert!(reasons.contains(&"AlertsFiring"), "{reasons:?}");
    let now = k8s_openapi::jiff::Timestamp::now();
    let freeze = "2026-12-18T00:00:00Z".parse().expect("t").."2027-01-04T00:00:00Z".parse().expect("t");
    assert_eq!(reasons.contains(&"Blackout"), freeze.contains(&now), "{reasons:?}");
    let window = &b["status"]["maintenanceWindow"];
    let open = window["open"] == true;
    assert_eq!(reasons.contains(&"OutsideMaintenanceWindow"), !open, "{window}");
    assert!(if open { window["closesAt"].is_string() } else { window["nextOpensAt"].is_string() }, "{window}");
    assert_eq!(condition(&b, "DisruptionAllowed").map(|c| c["status"].clone()), Some(json!("False")));
    wait_for("every node waits, naming the budget's gates", WAIT, || async {
        for n in ["worker-1", "worker-2", "worker-3"] {
            let message = node_message(&c, "general-kernel-6-12", n).await;
            if !message.contains("NodeDisruptionBudget general holds while alerts cannot be read") {
                return Err(format!("{n}: {message}"));
            }
        }
        Ok(())
    })
    .await;
    for n in ["worker-1", "worker-2", "worker-3"] {
        assert!(!is_cordoned(&node(&c, n).await), "{n} waits uncordoned");
    }
    ctl.stop().await;
}

/// A node draining under a pool budget (windows) and a pause-only team budget: the window
/// closes, a third budget gets a blackout, the team budget a pause request. The pause
/// freezes the started node whatever else is closed, whichever budget the caches list
/// first: `pool` and `team` name the two budgets.
async fn a_pause_freezes_a_started_node_under_other_closed_budgets(pool: &str, team: &str) {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    guarded_node(&env, &c).await;
    create_budget(&env, pool, json!({"maintenanceWindows": always_open_window()})).await;
    create_budget(&env, team, json!({})).await;
    create_budget(&env, "zone", json!({})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.expect("create m");
    draining_until_guarded(&env).await;

    patch_budget(&c, pool, json!({"maintenanceWindows": leap_day_window()})).await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let day = k8s_openapi::jiff::SignedDuration::from_hours(24);
    let blackout = json!([{"start": (now - day).to_string(), "end": (now + day).to_string(), "reason": "freeze"}]);
    patch_budget(&c, "zone", json!({"blackouts": blackout})).await;
    budget_with_reason(&c, pool, "OutsideMaintenanceWindow").await;
    budget_with_reason(&c, "zone", "Blackout").await;
    apply_pause_requests_to(&c, team, "oncall", json!([{"name": "oncall", "reason": "incident"}])).await;
    let paused = format!("NodeDisruptionBudget {team} is paused by oncall (incident)");
    no_new_eviction_while_paused(&env, &c, "m", &paused).await;
    let message = node_message(&c, "m", "worker-1").await;
    assert!(!message.contains(pool) && !message.contains("zone"), "a started node names only the pause: {message}");
    apply_pause_requests_to(&c, team, "oncall", json!([])).await;
    // The window and the blackout do not stop a node whose drain started.
    drained_after_resume(&env, &c, "m").await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_freezes_a_started_node_when_its_budget_sorts_after_the_closed_ones() {
    a_pause_freezes_a_started_node_under_other_closed_budgets("a-pool", "z-team").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_freezes_a_started_node_when_its_budget_sorts_before_the_closed_ones() {
    a_pause_freezes_a_started_node_under_other_closed_budgets("z-pool", "a-team").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_under_two_closed_budgets_names_both_and_every_closed_gate() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1"]).await;
    let now = k8s_openapi::jiff::Timestamp::now();
    let day = k8s_openapi::jiff::SignedDuration::from_hours(24);
    let until = (now + day).round(k8s_openapi::jiff::Unit::Second).expect("round");
    let blackout = json!([{"start": (now - day).to_string(), "end": until.to_string(), "reason": "freeze"}]);
    create_budget(&env, "zone", json!({"blackouts": blackout, "maintenanceWindows": leap_day_window()})).await;
    create_budget(&env, "team", json!({"pauseRequests": [{"name": "ops", "reason": "incident"}]})).await;
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.expect("create m");
    let want = format!(
        "NodeDisruptionBudget team is paused by ops (incident); NodeDisruptionBudget zone is in a blackout until \
         {until} (freeze); Waiting for the maintenance window of NodeDisruptionBudget zone (opens \
         2028-02-29T03:00:00+01:00)."
    );
    wait_for("the node names both budgets and every closed gate", WAIT, || async {
        let message = node_message(&c, "m", "worker-1").await;
        if message == want { Ok(()) } else { Err(message) }
    })
    .await;
    assert!(!is_cordoned(&node(&c, "worker-1").await), "it waits uncordoned");
    let m = maintenance_json(&c, "m").await.expect("m");
    assert_eq!(m["status"]["nodeStatuses"][0]["phase"], "Waiting", "{}", m["status"]);
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_node_with_nothing_to_evict_is_not_drained_behind_a_closed_window_and_is_once_it_opens() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    general_nodes(&c, &["worker-1"]).await;
    let ctl = held_in_cordon_then_drain_behind_a_closed_window(&env, &c).await;
    let node_drained = |n: &k8s_openapi::api::core::v1::Node| support::envtest::objects::condition(n, "Drained");
    wait_for("the empty node waits for the window, not Drained", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let waits = m["status"]["conditions"][0]["reason"] == "WaitingForGate";
        let on_node = node_drained(&node(&c, "worker-1").await);
        if waits && on_node == Some(("False".into(), "WaitingForGate".into())) {
            Ok(())
        } else {
            Err(format!("{} {on_node:?}", m["status"]))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let m = maintenance_json(&c, "m").await.expect("m");
    assert_eq!(m["status"]["conditions"][0]["status"], "False", "not Drained behind the window: {}", m["status"]);
    assert_ne!(m["status"]["nodeStatuses"][0]["phase"], "Drained", "{}", m["status"]);
    assert!(
        node_message(&c, "m", "worker-1")
            .await
            .starts_with("Waiting for the maintenance window of NodeDisruptionBudget nights"),
        "{}",
        m["status"]
    );
    patch_budget(&c, "nights", json!({"maintenanceWindows": always_open_window()})).await;
    wait_for("Drained once the window opens", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let on_node = node_drained(&node(&c, "worker-1").await);
        if m["status"]["conditions"][0]["status"] == "True" && on_node == Some(("True".into(), "DrainCompleted".into()))
        {
            Ok(())
        } else {
            Err(format!("{} {on_node:?}", m["status"]))
        }
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_two_budget_example_names_both_budgets_and_withdrawing_the_pause_leaves_the_window() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    create_node(&c, "worker-1", &[("pool", "general"), ("team", "payments")]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(&readme_block("two-budgets"))).await;
    assert!(out.status.success(), "the README's example: {}", String::from_utf8_lossy(&out.stderr));
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.expect("create m");
    let both = "Waiting for the maintenance window of NodeDisruptionBudget pool-general (opens \
                2028-02-29T03:00:00+01:00); NodeDisruptionBudget team-payments is paused by payments-oncall (incident \
                INC-4711).";
    wait_for("the node names both budgets", WAIT, || async {
        let message = node_message(&c, "m", "worker-1").await;
        if message == both { Ok(()) } else { Err(message) }
    })
    .await;
    let team = budget_with_reason(&c, "team-payments", "Paused").await;
    assert_eq!(team["status"]["disruptionsAllowed"], 0, "{}", team["status"]);
    // The pause is withdrawn: the node still waits for the window.
    patch_budget(&c, "team-payments", json!({"pauseRequests": []})).await;
    budget_with_reason(&c, "team-payments", "SufficientNodes").await;
    let window = "Waiting for the maintenance window of NodeDisruptionBudget pool-general (opens \
                  2028-02-29T03:00:00+01:00).";
    wait_for("only the window is left", WAIT, || async {
        let message = node_message(&c, "m", "worker-1").await;
        if message == window { Ok(()) } else { Err(message) }
    })
    .await;
    assert!(!is_cordoned(&node(&c, "worker-1").await), "it waits uncordoned");
    ctl.stop().await;
}
