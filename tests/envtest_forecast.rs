//! The forecast of SPEC 4.7 against what happens, on a real kube-apiserver with the fake
//! kubelet: a rolling maintenance over 8 nodes, two at a time, under a NodeDisruptionBudget
//! whose maintenance window (the first 40 seconds of every minute) closes and reopens during
//! the run; an upgrade agent signals each drained node done after a fixed time. The forecast
//! the controller writes once the first nodes finished (`status.forecast`) must put the
//! completion within 20 % of the time that was actually left. The figures are printed for
//! docs/benchmarks.md ("The forecast against a real run").

mod support;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ListParams, Patch, PatchParams};
use node_maintenance::api::DONE_ANNOTATION;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{create_maintenance, create_node, maintenance_json, wait_for};
use support::envtest::{Envtest, Options};

const NODES: usize = 8;
/// What the upgrade agent takes on a drained node before it signals it done.
const WORK: Duration = Duration::from_secs(13);
/// Seconds of each minute the window stays open.
const OPEN_SECONDS: i64 = 40;

fn ts(v: &Value) -> Option<Timestamp> {
    v.as_str()?.parse().ok()
}

fn node_statuses(m: &Value) -> Vec<Value> {
    m["status"]["nodeStatuses"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forecast_from_the_first_finished_nodes_is_within_a_fifth_of_the_time_left() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Default::default() }).await else { return };
    let c = env.client();
    let names: Vec<String> = (0..NODES).map(|i| format!("f{i}")).collect();
    for n in &names {
        create_node(&c, n, &[("pool", "forecast")]).await;
    }
    wait_for("nodes Ready", Duration::from_secs(60), || async {
        let nodes = Api::<Node>::all(c.clone()).list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let ready = |n: &Node| {
            let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        };
        if nodes.items.iter().filter(|n| ready(n)).count() == NODES { Ok(()) } else { Err("not Ready yet".into()) }
    })
    .await;
    let budget = format!(
        "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {{name: forecast}}\n\
         spec:\n  nodeSelector: {{nodeSelectorTerms: [{{matchExpressions: [{{key: pool, operator: In, values: [forecast]}}]}}]}}\n\
         \x20 maintenanceWindows: [{{schedule: '* * * * *', duration: {OPEN_SECONDS}s}}]\n"
    );
    let out = env.kubectl(&["apply", "-f", "-"], Some(&budget)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ctl = start_with(c.clone(), options(false)).await;
    // Start on a window's opening, so that no start falls within a second of its closing
    // (pairs start at about 1, 15 and 29 seconds; the fourth waits for the next minute).
    let second = Timestamp::now().as_second().rem_euclid(60);
    tokio::time::sleep(Duration::from_secs(u64::try_from(60 - second).unwrap_or(0))).await;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut m = maintenance("kernel", "Drain", &refs, None);
    m["spec"]["maxUnavailable"] = json!(2);
    create_maintenance(&c, m).await.expect("created");

    // The upgrade agent: each drained node is signalled done WORK after it was seen drained.
    let agent = {
        let c = c.clone();
        tokio::spawn(async move {
            let mut drained: BTreeMap<String, Instant> = BTreeMap::new();
            let mut signalled: BTreeSet<String> = BTreeSet::new();
            while signalled.len() < NODES {
                let m = maintenance_json(&c, "kernel").await.unwrap_or_default();
                for s in node_statuses(&m) {
                    let node = s["nodeRef"]["name"].as_str().unwrap_or_default().to_owned();
                    if s["phase"] == "Drained" {
                        drained.entry(node).or_insert_with(Instant::now);
                    }
                }
                for (node, since) in &drained {
                    if since.elapsed() >= WORK && signalled.insert(node.clone()) {
                        let patch = json!({"metadata": {"annotations": {DONE_ANNOTATION: "kernel"}}});
                        Api::<Node>::all(c.clone())
                            .patch(node, &PatchParams::default(), &Patch::Merge(patch))
                            .await
                            .expect("signalled done");
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    let run = Duration::from_secs(300);
    // The first forecast made from finished nodes while some are still to go. A pair's two
    // nodes finish within a moment of each other, so on a slow machine the first such forecast
    // may already count two.
    let first = wait_for("a forecast from finished nodes, with nodes still to go", run, || async {
        let m = maintenance_json(&c, "kernel").await.unwrap_or_default();
        let f = &m["status"]["forecast"];
        let finished = |b: &str| b.split_once(" finished node").and_then(|(n, _)| n.parse::<usize>().ok());
        let based = f["basis"].as_str().and_then(finished).is_some_and(|n| n < NODES);
        match (based, ts(&f["completionTime"]), ts(&f["computedAt"])) {
            (true, Some(completion), Some(at)) => Ok((completion, ts(&f["lateCompletionTime"]), at)),
            _ => Err(format!("{f}")),
        }
    })
    .await;
    let (forecast, late, made_at) = first;
    let done = wait_for("every node released", run, || async {
        let m = maintenance_json(&c, "kernel").await.unwrap_or_default();
        let statuses = node_statuses(&m);
        let released = statuses.iter().filter(|s| s["phase"] == "Released").count();
        if released == NODES { Ok(m) } else { Err(format!("{released} of {NODES} released")) }
    })
    .await;
    agent.await.expect("agent");
    let statuses = node_statuses(&done);
    let actual = statuses.iter().filter_map(|s| ts(&s["finishedTime"])).max().expect("finish times");
    let held: Vec<Timestamp> = statuses.iter().filter_map(|s| ts(&s["heldTime"])).collect();
    // The run crossed a closing and a reopening: some node started in a later window.
    let minutes: BTreeSet<i64> = held.iter().map(|t| t.as_second().div_euclid(60)).collect();
    assert!(minutes.len() >= 2, "every node started in the same window: {held:?}");
    let left = actual.duration_since(made_at);
    let error = forecast.duration_since(actual);
    eprintln!(
        "forecast made at {made_at}: completion {forecast} (late {late:?}); actual {actual}; \
         time left {left:#}, error {error:#} ({:.1} %)",
        100.0 * error.as_secs_f64() / left.as_secs_f64()
    );
    assert!(left > SignedDuration::ZERO, "the forecast was made before the end");
    assert!(
        error.abs().as_secs_f64() <= 0.2 * left.as_secs_f64(),
        "forecast {forecast} vs actual {actual}: off by {error:#} of {left:#} left"
    );
}
