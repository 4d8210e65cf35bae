//! The Drain stage through the real kube client against the apiserver stand-in (SPEC 4.3),
//! for what a real apiserver cannot produce on demand: an eviction interceptor's 429 (no
//! DisruptionBudget cause), and which half-applied evictions are finished (issue 25: budget
//! entries next to pods created before them, which a real apiserver cannot back-date). The plan
//! order, the UID precondition, Cordon before the first eviction and DaemonSet pods skipped or
//! reported are in tests/envtest_drain.rs; real PodDisruptionBudgets too; a leader killed
//! mid-eviction in tests/envtest_failover.rs.

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::apiserver::{ApiServer, Refusal};
use support::controller::{maintenance, options, pod, start, status_at};

const WAIT: Duration = Duration::from_secs(20);

async fn api() -> ApiServer {
    let api = ApiServer::start().await;
    api.load_nodes_yaml(support::apiserver::objects::fixture_nodes_path());
    api
}

fn drained(api: &ApiServer, name: &str) -> Option<Value> {
    let conds = status_at(api, name, "/conditions")?;
    conds.as_array()?.iter().find(|c| c["type"] == "Drained" && c["status"] == "True").cloned()
}

#[tokio::test]
async fn an_eviction_interceptor_429_counts_as_progress() {
    let api = api().await;
    api.put_pod(pod("default", "vm", "worker-2", 0, None));
    api.refuse_eviction(
        "default",
        "vm",
        Refusal::Interceptor { message: "Eviction triggered evacuation of VMI".into() },
    );
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Drain", &["worker-2"], None));
    api.wait_for("counted active, not pending", WAIT, |a| {
        let d = status_at(a, "m", "/drainStatus")?;
        (d["activeEvictionRequests"] == 1 && d["podsPendingEvictionRequest"] == 0).then_some(())
    })
    .await;
    let attempts = api.eviction_attempts().len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(api.eviction_attempts().len(), attempts, "not evicted again while the interceptor works");
    // The interceptor finishes its migration and deletes the pod.
    api.delete_pod("default", "vm");
    api.wait_for("drained", WAIT, |a| drained(a, "m")).await;
    ctl.stop().await;
}

/// Issue 25: a pod that a PodDisruptionBudget lists in `disruptedPods` (an eviction the
/// apiserver accepted and never carried out) is deleted, once, while the budget still counts
/// it as gone; an entry near the disruption controller's 2-minute timeout, or older than the
/// pod (about an earlier pod of that name), is left to the Eviction API and its refusals.
#[tokio::test]
async fn a_half_applied_eviction_is_finished_only_while_the_budget_counts_it_as_gone() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use kube::api::{Api, PostParams};
    let api = api().await;
    let now = Timestamp::now();
    let ago = |s: i64| (now - SignedDuration::from_secs(s)).to_string();
    for name in ["young", "stale", "reborn"] {
        let mut p = pod("default", name, "worker-4", 0, None);
        // "reborn" is created now, after its entry: a new pod under an earlier pod's name.
        if name != "reborn" {
            p.metadata.creation_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now - SignedDuration::from_secs(600)));
        }
        api.put_pod(p);
        api.refuse_eviction("default", name, Refusal::Pdb { pdb: "web".into() });
    }
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(api.client(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["young", "stale", "reborn"]}]}},
    }))
    .unwrap();
    let mut pdb = budgets.create(&PostParams::default(), &pdb).await.expect("PDB created");
    pdb.status = serde_json::from_value(json!({
        "currentHealthy": 2, "desiredHealthy": 2, "disruptionsAllowed": 0, "expectedPods": 3,
        "disruptedPods": {"young": ago(5), "stale": ago(100), "reborn": ago(5)},
    }))
    .unwrap();
    budgets.replace_status("web", &PostParams::default(), &pdb).await.expect("PDB status");
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Drain", &["worker-4"], None));
    api.wait_for("the young entry's pod deleted", WAIT, |a| a.pod("default", "young").is_none().then_some(())).await;
    api.wait_for("the others asked through the Eviction API", WAIT, |a| {
        let asked: Vec<String> = a.eviction_attempts().into_iter().map(|e| e.name).collect();
        (asked.contains(&"stale".to_owned()) && asked.contains(&"reborn".to_owned())).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(api.pod("default", "stale").is_some() && api.pod("default", "reborn").is_some());
    assert!(!api.eviction_attempts().iter().any(|e| e.name == "young"), "finished, not asked again");
    assert_eq!(api.count_requests("delete", "pods"), 1, "one delete: the young entry's pod");
    let text = ctl.metrics_text();
    assert!(text.contains("node_maintenance_evictions_total{result=\"completed\"} 1"), "{text}");
    ctl.stop().await;
}
