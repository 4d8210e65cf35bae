//! Evictions through KEP-4563 EvictionRequests (`lifecycle.k8s.io/v1alpha1`, issue 14) against
//! the apiserver stand-in. The real tier's kube-apiserver is v1.36 and does not serve the
//! API (it is alpha in 1.37 behind the `EvictionRequestAPI` feature gate), so this is tested
//! on the stand-in, which serves it when a test turns it on and validates EvictionRequests as
//! the 1.37 apiserver does (`tests/support/apiserver/lifecycle.rs`, issue 22); no
//! evictionrequest-controller runs there, so the tests write the conditions and Evictions it
//! would. `tests/envtest_drain_policies.rs` checks that the v1.36 apiserver answers the
//! discovery with 404 and the controller keeps the Eviction API there.

mod support;

use k8s_openapi::api::lifecycle::v1alpha1::{Eviction, EvictionRequest};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use node_maintenance::api::NodeMaintenance;
use node_maintenance::cluster::eviction_requests::apply_body;
use node_maintenance::cluster::eviction_requests::{
    DEFAULT_REQUESTER, EvictionApiChoice, INTENT_EVICTION, INTENT_WITHDRAWN,
};
use node_maintenance::controller::context::ControllerOptions;
use node_maintenance::planner::PodRef;
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

/// Sets the `Failed` condition of the request for `pod` True, for the request's current
/// generation, as the evictionrequest-controller does (it writes `status.observedGeneration`
/// with its conditions).
async fn set_failed(api: &ApiServer, pod: &str, message: &str) {
    let (_, _, body) = requests(api).await.into_iter().find(|(p, _, _)| p == pod).expect("a request for the pod");
    let name = body["metadata"]["name"].as_str().expect("a name").to_owned();
    let generation = body["metadata"]["generation"].as_i64().expect("the apiserver sets generation");
    let status = json!({"status": {"observedGeneration": generation, "conditions": [{"type": "Failed",
        "status": "True", "reason": "NoFurtherResponder", "message": message, "observedGeneration": generation,
        "lastTransitionTime": "2026-11-23T00:00:00Z"}]}});
    Api::<EvictionRequest>::namespaced(api.client(), "default")
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status patched");
}

/// The pod as the controller names it.
fn pod_ref(api: &ApiServer, name: &str) -> PodRef {
    let uid = api.pod("default", name).and_then(|p| p.metadata.uid).expect("the pod exists");
    PodRef { namespace: "default".into(), name: name.into(), uid: uid.into() }
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

    // A failed request is withdrawn and reported, then asked again after the backoff. The
    // new intent is a new generation: the Failed condition of the old one is stale until the
    // evictionrequest-controller has seen it, and must not withdraw the new intent.
    set_failed(&api, "low", "no responder could evict the pod").await;
    wait_intents(&api, &[pair("low", "Withdrawn")]).await;
    api.wait_for("reported", WAIT, |a| {
        let message = status_at(a, "m", "/nodeStatuses/0/drainMessage")?;
        message.as_str()?.contains("eviction failing: 1 pod").then_some(())
    })
    .await;
    wait_intents(&api, &[pair("low", "Eviction")]).await;
    let asked_again = request_writes(&api);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(intents(&requests(&api).await), [pair("low", "Eviction")], "the stale Failed withdrew nothing");
    assert_eq!(request_writes(&api), asked_again, "and wrote nothing");

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
async fn a_refused_eviction_request_falls_back_to_the_eviction_api_when_none_asks() {
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

/// The stand-in refuses what kube-apiserver 1.37 refuses (issue 22), with its wording: the
/// old default requester under the reserved `k8s.io`, a malformed requester, a missing or
/// malformed pod UID, an unknown intent, and changes to the immutable requester and target.
/// Our own request passes, and withdrawing it keeps its requester.
#[tokio::test]
async fn eviction_requests_are_validated_as_the_real_api_validates_them() {
    let api = api(true).await;
    let requests = Api::<EvictionRequest>::namespaced(api.client(), "default");
    let low = pod_ref(&api, "low");
    let apply = |body: Value| {
        let requests = requests.clone();
        async move {
            let name = body["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            requests.patch(&name, &PatchParams::apply("test").force(), &Patch::Apply(&body)).await
        }
    };
    let refused = |result: kube::Result<EvictionRequest>, want: &str| match result {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{}", s.message);
            assert!(s.message.contains(want), "{:?} does not say {want:?}", s.message);
        }
        other => panic!("accepted, want 422 {want:?}: {other:?}"),
    };
    let old_default = apply_body(&low, "worker-1", "nodemaintenance.k8s.io/controller", INTENT_EVICTION);
    refused(
        apply(old_default).await,
        "spec.requester: Invalid value: \"nodemaintenance.k8s.io/controller\": domain names *.k8s.io, *.kubernetes.io are reserved",
    );
    refused(apply(apply_body(&low, "worker-1", "controller", INTENT_EVICTION)).await, "must include a prefix");
    refused(
        apply(apply_body(&low, "worker-1", "Acme.io/x", INTENT_EVICTION)).await,
        "prefix part a lowercase RFC 1123 subdomain",
    );
    refused(
        apply(apply_body(&low, "worker-1", DEFAULT_REQUESTER, "Evict")).await,
        "spec.intent: Unsupported value: \"Evict\"",
    );
    let mut no_uid = apply_body(&low, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION);
    no_uid["spec"]["target"]["pod"].as_object_mut().expect("pod").remove("uid");
    refused(apply(no_uid).await, "spec.target.pod.uid: Required value");
    let bad_uid = PodRef { uid: "u-1".into(), ..low.clone() };
    refused(
        apply(apply_body(&bad_uid, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION)).await,
        "must be a lowercase UUID in 8-4-4-4-12 format",
    );
    let mut no_target = apply_body(&low, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION);
    no_target["spec"]["target"] = json!({});
    refused(apply(no_target).await, "spec.target: Invalid value: \"\": must specify one of: `pod`");
    assert_eq!(request_writes(&api), 7, "seven refused writes");
    assert!(requests.list(&ListParams::default()).await.expect("list").items.is_empty(), "nothing stored");

    let created = apply(apply_body(&low, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION)).await.expect("ours passes");
    assert_eq!(created.metadata.generation, Some(1));
    refused(
        apply(apply_body(&low, "worker-1", "other.example.com/x", INTENT_WITHDRAWN)).await,
        "spec.requester: Invalid value: \"other.example.com/x\": field is immutable",
    );
    let high = pod_ref(&api, "high");
    let mut other_target = apply_body(&low, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION);
    other_target["spec"]["target"] =
        apply_body(&high, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION)["spec"]["target"].clone();
    refused(apply(other_target).await, "spec.target: Invalid value: \"\": field is immutable");
    let withdrawn = apply(apply_body(&low, "worker-1", DEFAULT_REQUESTER, INTENT_WITHDRAWN)).await.expect("withdrawn");
    assert_eq!(withdrawn.metadata.generation, Some(2), "a new intent is a new generation");
}

/// A request created under an earlier `--eviction-requester` keeps it (the field is
/// immutable): the controller withdraws and re-asks it under that requester instead of being
/// refused, and never evicts the pod through the Eviction API meanwhile (issue 22).
#[tokio::test]
async fn a_request_keeps_the_requester_it_was_made_with() {
    let api = api(true).await;
    let earlier = "previous.example.com/node-maintenance";
    let low = pod_ref(&api, "low");
    let body = apply_body(&low, "worker-1", earlier, INTENT_EVICTION);
    let name = body["metadata"]["name"].as_str().expect("name").to_owned();
    Api::<EvictionRequest>::namespaced(api.client(), "default")
        .patch(&name, &PatchParams::apply("node-maintenance").force(), &Patch::Apply(&body))
        .await
        .expect("the earlier run's request");
    set_failed(&api, "low", "no responder could evict the pod").await;
    let ctl = start(&api, options(false)).await;
    api.put_maintenance(maintenance("m", "Drain", &["worker-1"], None));
    wait_intents(&api, &[pair("low", "Withdrawn")]).await;
    wait_intents(&api, &[pair("low", "Eviction")]).await;
    let (_, _, stored) = requests(&api).await.remove(0);
    assert_eq!(stored["spec"]["requester"], earlier);
    assert_eq!(eviction_posts(&api), 0, "the cluster's responders evict it, not us");
    ctl.stop().await;
}

/// Progress is on the Eviction the evictionrequest-controller makes of our request (labelled
/// with our requester): what its active responder reports shows in the node's drain message,
/// and the controller leaves the eviction to that responder (issue 22).
#[tokio::test]
async fn the_active_responders_message_is_reported_and_no_eviction_is_sent() {
    let (api, ctl) = asking_to_evict_low().await;
    let low = pod_ref(&api, "low");
    let evictions = Api::<Eviction>::namespaced(api.client(), "default");
    let eviction: Eviction = serde_json::from_value(json!({
        "apiVersion": "lifecycle.k8s.io/v1alpha1", "kind": "Eviction",
        "metadata": {"name": "low-eviction", "labels": {DEFAULT_REQUESTER: "requester"}},
        "spec": {"target": {"pod": {"name": "low", "uid": &*low.uid}}},
    }))
    .expect("an Eviction");
    evictions.create(&PostParams::default(), &eviction).await.expect("created");
    let evictor = "imperative-eviction.k8s.io/evictor";
    let pdb = "Cannot evict pod as it would violate the pod's disruption budget.";
    let status = json!({"status": {
        "targetResponders": [{"name": evictor, "priority": 100, "state": "Active"}],
        "responders": [{"name": evictor, "startTime": "2026-11-23T00:00:00Z", "message": pdb}],
    }});
    evictions.patch_status("low-eviction", &PatchParams::default(), &Patch::Merge(status)).await.expect("status");
    let want = format!("evicting ({evictor}: {pdb}): 1 pod");
    api.wait_for("the responder's message reported", WAIT, |a| {
        let message = status_at(a, "m", "/nodeStatuses/0/drainMessage")?;
        message.as_str()?.contains(&want).then_some(())
    })
    .await;
    api.wait_for("counted as active", WAIT, |a| {
        (status_at(a, "m", "/drainStatus/activeEvictionRequests") == Some(json!(1))).then_some(())
    })
    .await;
    assert_eq!(eviction_posts(&api), 0, "the responder evicts, not us");
    ctl.stop().await;
}
