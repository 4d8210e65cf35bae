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
    let api = api().await;
    for name in ["young", "stale", "reborn"] {
        // "reborn" is created now, after its entry: a new pod under an earlier pod's name.
        api.put_pod(if name == "reborn" { pod("default", name, "worker-4", 0, None) } else { old_pod(name) });
        api.refuse_eviction("default", name, Refusal::Pdb { pdb: "web".into() });
    }
    budget_listing(&api, &[("young", 5), ("stale", 100), ("reborn", 5)]).await;
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

/// Pod `name` on worker-4, created 10 minutes ago (before any `disruptedPods` entry here).
fn old_pod(name: &str) -> k8s_openapi::api::core::v1::Pod {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    let mut p = pod("default", name, "worker-4", 0, None);
    p.metadata.creation_timestamp = Some(Time(Timestamp::now() - SignedDuration::from_secs(600)));
    p
}

/// PodDisruptionBudget `web` in `default` over the pods `listed` names (label `app`),
/// allowing no disruption, with each listed in `status.disruptedPods` that many seconds ago:
/// evictions the apiserver accepted and did not carry out (issue 25).
async fn budget_listing(api: &ApiServer, listed: &[(&str, i64)]) {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    use k8s_openapi::jiff::{SignedDuration, Timestamp};
    use kube::api::{Api, PostParams};
    let now = Timestamp::now();
    let names: Vec<&str> = listed.iter().map(|(n, _)| *n).collect();
    let at: serde_json::Map<String, Value> = listed
        .iter()
        .map(|(n, ago)| (n.to_string(), json!((now - SignedDuration::from_secs(*ago)).to_string())))
        .collect();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(api.client(), "default");
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 2, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": names}]}},
    }))
    .unwrap();
    let mut pdb = budgets.create(&PostParams::default(), &pdb).await.expect("PDB created");
    pdb.status = serde_json::from_value(json!({
        "currentHealthy": 2, "desiredHealthy": 2, "disruptionsAllowed": 0, "expectedPods": 3, "disruptedPods": at,
    }))
    .unwrap();
    budgets.replace_status("web", &PostParams::default(), &pdb).await.expect("PDB status");
}

#[tokio::test]
async fn a_half_applied_eviction_whose_delete_is_refused_is_evicted_instead_and_nothing_forced() {
    let api = api().await;
    // Both listed 5 s ago (young enough to finish). "changed" was modified between the
    // controller's read and its conditional delete (409, the resourceVersion precondition);
    // deleting "guarded" is denied (403: RBAC without pods/delete, or an admission policy
    // that leaves pods to the Eviction API).
    let refused = [
        ("changed", 409, "Precondition failed: ResourceVersion in precondition: 7, ResourceVersion in meta: 8"),
        ("guarded", 403, "pods \"guarded\" is forbidden"),
    ];
    for (name, code, message) in refused {
        api.put_pod(old_pod(name));
        api.refuse_eviction("default", name, Refusal::Pdb { pdb: "web".into() });
        api.refuse_delete("default", name, Refusal::Error { code, message: message.into() });
    }
    budget_listing(&api, &[("changed", 5), ("guarded", 5)]).await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Drain", &["worker-4"], None));
    // The fallback: the refused delete is followed by an eviction of the same pod.
    api.wait_for("each refused delete followed by an eviction", WAIT, |a| {
        let log = a.request_log();
        let evicted_after_delete = |name: &str| {
            let is = |r: &&support::apiserver::RequestRecord, resource: &str| {
                r.resource == resource && r.name.as_deref() == Some(name)
            };
            let d = log.iter().position(|r| r.verb == "delete" && is(&r, "pods"));
            d.is_some_and(|d| log[d..].iter().any(|r| is(&r, "pods/eviction")))
        };
        refused.iter().all(|(name, ..)| evicted_after_delete(name)).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Nothing forced: the budget refuses the evictions, so both pods stay, and no delete went
    // out without the controller's read (grace period 0 would skip the pod's own).
    assert!(api.pod("default", "changed").is_some() && api.pod("default", "guarded").is_some());
    let deletes: Vec<_> =
        api.request_log().into_iter().filter(|r| r.verb == "delete" && r.resource == "pods").collect();
    assert!(deletes.iter().all(|r| !r.query.contains("gracePeriodSeconds=0")), "{deletes:?}");
    let text = ctl.metrics_text();
    assert!(!text.contains("node_maintenance_evictions_total{result=\"completed\"}"), "none completed: {text}");
    assert!(text.contains("node_maintenance_evictions_total{result=\"blocked_by_pdb\"}"), "evicted instead: {text}");
    ctl.stop().await;
}
