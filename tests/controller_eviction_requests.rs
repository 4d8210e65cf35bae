//! Evictions through KEP-4563 EvictionRequests (`lifecycle.k8s.io/v1alpha1`, issue 14) against
//! the apiserver stand-in. The real tier's kube-apiserver is v1.36 and does not serve the
//! API (it is alpha in 1.37 behind the `EvictionRequestAPI` feature gate), so this is tested
//! on the stand-in, which serves it when a test turns it on; `tests/envtest_drain_policies.rs`
//! checks that the v1.36 apiserver answers the discovery with 404 and the controller keeps the
//! Eviction API there.

mod support;

use k8s_openapi::api::lifecycle::v1alpha1::EvictionRequest;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use node_maintenance::api::NodeMaintenance;
use node_maintenance::controller::context::ControllerOptions;
use node_maintenance::controller::eviction_requests::{DEFAULT_REQUESTER, EvictionApiChoice};
use serde_json::{Value, json};
use std::time::Duration;
use support::apiserver::ApiServer;
use support::controller::{Running, maintenance, options, pod, set_stage, start, status_at, unschedulable};

const WAIT: Duration = Duration::from_secs(20);

async fn api(serve: bool) -> ApiServer {
    let api = ApiServer::start().await;
    api.load_nodes_yaml(support::apiserver::objects::fixture_nodes_path());
    api.serve_eviction_requests(serve);
    for name in ["low", "high"] {
        api.put_pod(pod("default", name, "worker-1", if name == "low" { 100 } else { 1_500_000_000 }, None));
    }
    api
}

/// Our EvictionRequests in `default`: pod name → (intent, the whole object).
async fn requests(api: &ApiServer) -> Vec<(String, String, Value)> {
    let list = Api::<EvictionRequest>::namespaced(api.client(), "default").list(&ListParams::default()).await;
    let mut out: Vec<_> = list
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|er| {
            let target = er.spec.target.pod.as_ref().map(|p| p.name.clone()).unwrap_or_default();
            (target, er.spec.intent.clone(), serde_json::to_value(&er).unwrap_or_default())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn intents(reqs: &[(String, String, Value)]) -> Vec<(String, String)> {
    reqs.iter().map(|(p, i, _)| (p.clone(), i.clone())).collect()
}

fn pair(pod: &str, intent: &str) -> (String, String) {
    (pod.to_owned(), intent.to_owned())
}

fn eviction_posts(api: &ApiServer) -> usize {
    api.request_log().iter().filter(|r| r.method == "POST" && r.path.ends_with("/eviction")).count()
}

fn request_writes(api: &ApiServer) -> usize {
    api.request_log().iter().filter(|r| r.method != "GET" && r.path.contains("/evictionrequests")).count()
}

async fn wait_intents(api: &ApiServer, want: &[(String, String)]) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = intents(&requests(api).await);
        if got == want {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "EvictionRequests {got:?}, want {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sets (or, with `None`, clears) the `Failed` condition of the request for `pod`, as the
/// eviction-request controller would.
async fn set_failed(api: &ApiServer, pod: &str, message: Option<&str>) {
    let name =
        requests(api).await.into_iter().find(|(p, _, _)| p == pod).map(|(_, _, v)| v["metadata"]["name"].clone());
    let name = name.and_then(|n| n.as_str().map(str::to_owned)).expect("a request for the pod");
    let conditions = match message {
        Some(m) => json!([{"type": "Failed", "status": "True", "reason": "EvictionBlocked", "message": m,
            "lastTransitionTime": "2026-11-23T00:00:00Z"}]),
        None => json!([]),
    };
    Api::<EvictionRequest>::namespaced(api.client(), "default")
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": {"conditions": conditions}})))
        .await
        .expect("status patched");
}

/// A cluster serving EvictionRequests, a controller and a Drain maintenance of worker-1 whose
/// first request (for "low") is asking. Plan order holds: "high" waits until "low" is gone.
async fn asking_to_evict_low() -> (ApiServer, Running) {
    let api = api(true).await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Drain", &["worker-1"], None));
    wait_intents(&api, &[pair("low", "Eviction")]).await;
    (api, ctl)
}

#[tokio::test]
async fn eviction_requests_replace_evictions_where_the_cluster_serves_them() {
    let (api, ctl) = asking_to_evict_low().await;
    let (_, _, body) = &requests(&api).await[0];
    let low = api.pod("default", "low").expect("low");
    let uid = low.metadata.uid.clone().unwrap_or_default();
    assert_eq!(body["metadata"]["name"], format!("nodemaintenance-{uid}"));
    assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
    assert_eq!(body["metadata"]["annotations"]["nodemaintenance.k8s.io/node"], "worker-1");
    assert_eq!(body["spec"]["requester"], DEFAULT_REQUESTER);
    assert_eq!(body["spec"]["target"]["pod"], json!({"name": "low", "uid": uid}));
    api.wait_for("counted as active", WAIT, |a| {
        (status_at(a, "m", "/drainStatus/activeEvictionRequests") == Some(json!(1))).then_some(())
    })
    .await;
    assert_eq!(eviction_posts(&api), 0, "no Eviction API call");

    // A restarted controller counts the request from its watch and asks nothing again.
    ctl.stop().await;
    let writes = request_writes(&api);
    let ctl = start(&api, options(false)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(status_at(&api, "m", "/drainStatus/activeEvictionRequests"), Some(json!(1)));
    assert_eq!(request_writes(&api), writes, "nothing asked twice");

    // A failed request is withdrawn and reported, then asked again after the backoff.
    set_failed(&api, "low", Some("no responder could evict the pod")).await;
    wait_intents(&api, &[pair("low", "Withdrawn")]).await;
    api.wait_for("reported", WAIT, |a| {
        let message = status_at(a, "m", "/nodeStatuses/0/drainMessage")?;
        message.as_str()?.contains("eviction failing: 1 pod").then_some(())
    })
    .await;
    set_failed(&api, "low", None).await;
    wait_intents(&api, &[pair("low", "Eviction")]).await;

    // The pod goes; the drain moves on to "high".
    api.delete_pod("default", "low");
    wait_intents(&api, &[pair("high", "Eviction"), pair("low", "Eviction")]).await;

    // Complete: the requests still asking are withdrawn.
    set_stage(&api, "m", "Complete");
    wait_intents(&api, &[pair("high", "Withdrawn"), pair("low", "Withdrawn")]).await;
    assert_eq!(eviction_posts(&api), 0);
    ctl.stop().await;
}

#[tokio::test]
async fn deleting_the_maintenance_withdraws_its_eviction_requests() {
    let (api, ctl) = asking_to_evict_low().await;
    Api::<NodeMaintenance>::all(api.client()).delete("m", &DeleteParams::default()).await.expect("delete accepted");
    // The finalizer holds the object until the node is released and the request withdrawn.
    wait_intents(&api, &[pair("low", "Withdrawn")]).await;
    api.wait_for("maintenance gone", WAIT, |a| a.maintenance("m").is_none().then_some(())).await;
    assert!(!unschedulable(&api, "worker-1"), "uncordoned");
    assert_eq!(eviction_posts(&api), 0);
    ctl.stop().await;
}

#[tokio::test]
async fn the_eviction_api_stays_where_the_cluster_does_not_serve_them_or_the_flag_says_so() {
    for (serve, choice) in [(false, EvictionApiChoice::Auto), (true, EvictionApiChoice::Eviction)] {
        let api = api(serve).await;
        let ctl = start(&api, ControllerOptions { eviction_api: choice, ..options(false) }).await;
        api.put_maintenance(maintenance("m", "Drain", &["worker-1"], None));
        api.wait_for("evicted through the Eviction API", WAIT, |a| (eviction_posts(a) >= 1).then_some(())).await;
        assert_eq!(request_writes(&api), 0, "no EvictionRequest ({serve}, {choice:?})");
        let asked = api.request_log().iter().any(|r| r.path == "/apis/lifecycle.k8s.io/v1alpha1");
        assert_eq!(asked, choice == EvictionApiChoice::Auto, "discovery only in auto mode");
        ctl.stop().await;
    }
}

#[tokio::test]
async fn a_refused_eviction_request_falls_back_to_the_eviction_api() {
    let api = api(true).await;
    let ctl = start(&api, options(false)).await;
    // Discovery saw the API; then it goes away (the feature gate turned off): the apply gets
    // a 404 and the pod is evicted through the Eviction API instead.
    api.wait_for("the EvictionRequest watch started", WAIT, |a| {
        let watching = |r: &support::apiserver::RequestRecord| {
            r.path == "/apis/lifecycle.k8s.io/v1alpha1/evictionrequests" && r.query.contains("watch=true")
        };
        a.request_log().iter().any(watching).then_some(())
    })
    .await;
    api.serve_eviction_requests(false);
    api.put_maintenance(maintenance("m", "Drain", &["worker-1"], None));
    api.wait_for("evicted through the Eviction API", WAIT, |a| (eviction_posts(a) >= 1).then_some(())).await;
    assert!(request_writes(&api) >= 1, "an EvictionRequest was tried first");
    ctl.stop().await;
}
