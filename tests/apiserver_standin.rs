//! Self-tests of the kube-apiserver stand-in (`tests/support/apiserver/`), through the real
//! kube client and kube-runtime.

mod support;

use futures::StreamExt;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use node_maintenance::api::NodeMaintenance;
use serde_json::{Value, json};
use std::time::Duration;
use support::apiserver::objects::{eviction, fixture_nodes_path, node_delete_review, pod};
use support::apiserver::{ApiServer, DownMode, Refusal, SarFailure};

const WAIT: Duration = Duration::from_secs(10);

async fn server_with_nodes() -> ApiServer {
    let server = ApiServer::start().await;
    assert_eq!(server.load_nodes_yaml(fixture_nodes_path()), 9);
    server
}

fn api_code(err: &kube::Error) -> u16 {
    match err {
        kube::Error::Api(status) => status.code,
        other => panic!("expected kube::Error::Api, got {other:?}"),
    }
}

/// Spawns a reflector over all Nodes and waits until it has synced.
async fn node_reflector(server: &ApiServer, config: watcher::Config) -> reflector::Store<Node> {
    let (reader, writer) = reflector::store();
    let stream =
        reflector(writer, watcher(Api::<Node>::all(server.client()), config)).default_backoff().applied_objects();
    tokio::spawn(stream.for_each(|_| async {}));
    tokio::time::timeout(WAIT, reader.wait_until_ready()).await.expect("reflector syncs").unwrap();
    reader
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn reflector_lists_watches_and_sees_updates() {
    let server = server_with_nodes().await;
    let reader = node_reflector(&server, watcher::Config::default()).await;
    assert_eq!(reader.state().len(), 9);
    assert_eq!(server.count_requests("list", "nodes"), 1);
    until("watch open", || server.open_watches("/api/v1/nodes") == 1).await;

    let mut node = server.node("worker-1").unwrap();
    node.metadata.labels.get_or_insert_default().insert("touched".into(), "yes".into());
    server.put_node(node);
    until("update seen", || {
        reader
            .get(&reflector::ObjectRef::new("worker-1"))
            .is_some_and(|n| n.metadata.labels.as_ref().unwrap().contains_key("touched"))
    })
    .await;
    server.delete_node("gpu-2");
    until("delete seen", || reader.state().len() == 8).await;
    assert_eq!(server.count_requests("list", "nodes"), 1, "no re-list for updates");
    assert!(server.request_log().iter().all(|r| r.group.is_empty() && r.resource == "nodes" && r.verb != "get"));
}

#[tokio::test]
async fn watch_restarts_after_close_and_relists_after_expiry() {
    let server = server_with_nodes().await;
    let reader = node_reflector(&server, watcher::Config::default()).await;
    until("watch open", || server.open_watches("") == 1).await;
    let watches = server.count_requests("watch", "nodes");
    server.close_watches();
    until("re-watch", || server.count_requests("watch", "nodes") > watches).await;
    let mut node = server.node("cp-1").unwrap();
    node.spec.get_or_insert_default().unschedulable = Some(true);
    server.put_node(node);
    let cp1 = reflector::ObjectRef::new("cp-1");
    until("update after re-watch", || {
        reader.get(&cp1).is_some_and(|n| n.spec.as_ref().unwrap().unschedulable == Some(true))
    })
    .await;
    assert_eq!(server.count_requests("list", "nodes"), 1, "resumed from resourceVersion, no re-list");

    // Missed changes that the history no longer holds: the re-watch gets 410 Expired and
    // kube re-lists.
    server.set_path_down("/api/v1/nodes", Some(DownMode::Unavailable));
    let mut node = server.node("cp-2").unwrap();
    node.spec.get_or_insert_default().unschedulable = Some(true);
    server.put_node(node);
    server.compact();
    server.set_path_down("/api/v1/nodes", None);
    until("re-list after 410", || server.count_requests("list", "nodes") >= 2).await;
    let cp2 = reflector::ObjectRef::new("cp-2");
    until("missed change seen", || {
        reader.get(&cp2).is_some_and(|n| n.spec.as_ref().unwrap().unschedulable == Some(true))
    })
    .await;
}

#[tokio::test]
async fn watch_from_resource_version_replays_and_selectors_transition() {
    let server = server_with_nodes().await;
    let api = Api::<Node>::all(server.client());
    let list = api.list(&ListParams::default().labels("pool=general")).await.unwrap();
    assert_eq!(list.items.len(), 4);
    let rv = list.metadata.resource_version.unwrap();
    // A change made before the watch starts is replayed from history.
    let mut node = server.node("worker-3").unwrap();
    node.metadata.labels.as_mut().unwrap().insert("pool".into(), "retired".into());
    server.put_node(node);
    let wp = WatchParams::default().labels("pool=general").timeout(5);
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    match stream.next().await.unwrap().unwrap() {
        WatchEvent::Deleted(n) => assert_eq!(n.metadata.name.as_deref(), Some("worker-3")),
        other => panic!("expected DELETED for a node leaving the selector, got {other:?}"),
    }
    let page = api.list(&ListParams::default().limit(4)).await.unwrap();
    assert_eq!((page.items.len(), page.metadata.remaining_item_count), (4, Some(5)));
    let rest = api
        .list(&ListParams::default().limit(10).continue_token(page.metadata.continue_.as_deref().unwrap()))
        .await
        .unwrap();
    assert_eq!((rest.items.len(), rest.metadata.continue_), (5, None));
    assert_eq!(rest.metadata.resource_version, page.metadata.resource_version);
    // What the product does not send is refused, not half-emulated.
    assert!(api.list(&ListParams::default().fields("spec.nodeName=x")).await.is_err_and(|e| api_code(&e) == 400));
    assert!(api.list(&ListParams::default().labels("pool in (gpu)")).await.is_err_and(|e| api_code(&e) == 400));
}

#[tokio::test]
async fn node_patches_merge_strategic_and_apply() {
    let server = server_with_nodes().await;
    let api = Api::<Node>::all(server.client());
    let before = api.get("worker-1").await.unwrap();
    let rv0: u64 = before.metadata.resource_version.clone().unwrap().parse().unwrap();

    let pp = PatchParams::default();
    let cordon = Patch::Merge(json!({"spec": {"unschedulable": true}}));
    let n = api.patch("worker-1", &pp, &cordon).await.unwrap();
    assert_eq!(n.spec.as_ref().unwrap().unschedulable, Some(true));
    let rv1: u64 = n.metadata.resource_version.clone().unwrap().parse().unwrap();
    assert!(rv1 > rv0);
    assert_eq!(n.metadata.uid, before.metadata.uid);
    // A no-op patch changes nothing, not even the resourceVersion.
    let same = api.patch("worker-1", &pp, &cordon).await.unwrap();
    assert_eq!(same.metadata.resource_version, n.metadata.resource_version);

    // Strategic: taints are replaced, annotations merged.
    let taints =
        json!({"metadata": {"annotations": {"a": "1"}}, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
    let n = api.patch("worker-1", &pp, &Patch::Strategic(taints)).await.unwrap();
    assert_eq!(n.spec.as_ref().unwrap().taints.as_ref().unwrap().len(), 1);
    assert_eq!(n.metadata.annotations.as_ref().unwrap()["a"], "1");

    // Status conditions merge by type on /status; spec changes there are ignored.
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status("worker-1", &pp, &Patch::Strategic(ready)).await.unwrap();
    let drained =
        json!({"spec": {"unschedulable": false}, "status": {"conditions": [{"type": "Drained", "status": "False"}]}});
    let n = api.patch_status("worker-1", &pp, &Patch::Strategic(drained)).await.unwrap();
    let types: Vec<_> = n.status.unwrap().conditions.unwrap().into_iter().map(|c| c.type_).collect();
    assert_eq!(types, ["Ready", "Drained"]);
    assert_eq!(n.spec.unwrap().unschedulable, Some(true));

    let jp: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/spec/unschedulable", "value": false}])).unwrap();
    let err = api.patch("worker-1", &pp, &Patch::Json::<()>(jp)).await.unwrap_err();
    assert_eq!(api_code(&err), 415, "no JSON patch: the product sends none");

    let apply =
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-1", "labels": {"applied": "x"}}});
    let n = api.patch("worker-1", &PatchParams::apply("test").force(), &Patch::Apply(apply)).await.unwrap();
    assert_eq!(n.metadata.labels.unwrap()["applied"], "x");

    // Optimistic concurrency: a stale resourceVersion is a 409.
    let stale = json!({"metadata": {"resourceVersion": rv1.to_string()}, "spec": {"unschedulable": true}});
    let err = api.patch("worker-1", &pp, &Patch::Merge(stale)).await.unwrap_err();
    assert_eq!(api_code(&err), 409);
    let err = api.get("nope").await.unwrap_err();
    assert_eq!(api_code(&err), 404);
}

#[tokio::test]
async fn eviction_preconditions_refusals_and_deletion() {
    let server = server_with_nodes().await;
    let stored = server.put_pod(pod("apps", "web-1", "worker-1"));
    let uid = stored.metadata.uid.clone().unwrap();
    server.put_pod(pod("apps", "web-2", "worker-2"));
    let api = Api::<Pod>::namespaced(server.client(), "apps");
    let pp = PostParams::default();
    let evict = |name: &'static str, uid: &str| {
        let body = eviction(name, uid);
        let api = api.clone();
        let pp = pp.clone();
        async move { api.create_subresource::<Value, Value>("eviction", name, &pp, &body).await }
    };

    let err = evict("web-1", "other-uid").await.unwrap_err();
    assert_eq!(api_code(&err), 409);
    let err = evict("ghost", "u").await.unwrap_err();
    assert_eq!(api_code(&err), 404);

    server.refuse_eviction("apps", "web-1", Refusal::Pdb { pdb: "web-pdb".into() });
    let err = evict("web-1", &uid).await.unwrap_err();
    let kube::Error::Api(status) = &err else { panic!("{err:?}") };
    assert_eq!((status.code, status.reason.as_str()), (429, "TooManyRequests"));
    assert_eq!(status.message, "Cannot evict pod as it would violate the pod's disruption budget.");
    let cause = &status.details.as_ref().unwrap().causes[0];
    assert_eq!(cause.reason, "DisruptionBudget");
    assert!(cause.message.contains("web-pdb"));

    server.refuse_eviction(
        "apps",
        "web-1",
        Refusal::Interceptor { message: "Eviction triggered evacuation of VMI".into() },
    );
    let err = evict("web-1", &uid).await.unwrap_err();
    let kube::Error::Api(status) = &err else { panic!("{err:?}") };
    assert_eq!(status.code, 429);
    assert!(status.details.as_ref().is_none_or(|d| d.causes.is_empty()));

    server.allow_eviction("apps", "web-1");
    server.set_pod_deletion_delay(Duration::from_millis(200));
    let ok = evict("web-1", &uid).await.unwrap();
    assert_eq!(ok["status"], "Success");
    assert!(server.pod("apps", "web-1").unwrap().metadata.deletion_timestamp.is_some());
    until("pod removed after the delay", || server.pod("apps", "web-1").is_none()).await;
    assert_eq!(server.evictions(), vec![("apps".to_string(), "web-1".to_string(), uid.clone())]);
    assert_eq!(server.eviction_attempts().iter().map(|a| a.code).collect::<Vec<_>>(), [409, 404, 429, 429, 201]);

    // kube's `Api::evict` sends `delete_options` (snake case), which the apiserver drops as
    // an unknown field: the uid precondition does not reach the server.
    let ep = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: Some(kube::api::Preconditions { uid: Some("wrong".into()), resource_version: None }),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    api.evict("web-2", &ep).await.expect("precondition silently dropped, as by kube-apiserver");
    assert_eq!(server.eviction_attempts().last().unwrap().uid, None);
}

#[tokio::test]
async fn maintenance_generation_status_and_finalizers() {
    let server = server_with_nodes().await;
    let api = Api::<NodeMaintenance>::all(server.client());
    let (pp, post) = (PatchParams::default(), PostParams::default());
    let nm: NodeMaintenance = serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": "m1", "finalizers": ["nodemaintenance.k8s.io/maintenance-completion"]},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "Exists"}]}]}},
        "status": {"observedGeneration": 99},
    }))
    .unwrap();
    let created = api.create(&post, &nm).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.status.is_none(), "status is dropped on create");
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(api_code(&api.create(&post, &nm).await.unwrap_err()), 409);

    let p = api.patch("m1", &pp, &Patch::Merge(json!({"spec": {"stage": "Cordon"}}))).await.unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    let status = json!({"spec": {"stage": "Drain"}, "status": {"observedGeneration": 2}});
    let p = api.patch_status("m1", &pp, &Patch::Merge(status)).await.unwrap();
    assert_eq!((p.metadata.generation, p.status.unwrap().observed_generation), (Some(2), Some(2)));
    assert_eq!(p.spec.stage.to_string(), "Cordon", "spec changes on /status are ignored");
    let p = api.patch("m1", &pp, &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}}))).await.unwrap();
    assert_eq!(p.metadata.generation, Some(2), "metadata changes do not bump generation");
    assert_eq!(api_code(&api.patch("m1", &pp, &Patch::Strategic(json!({}))).await.unwrap_err()), 415);

    let rv = p.metadata.resource_version.unwrap();
    let mut events = api.watch(&WatchParams::default().timeout(10), &rv).await.unwrap().boxed();
    let pending = api.delete("m1", &DeleteParams::default()).await.unwrap().left().expect("kept for its finalizer");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.generation, Some(3));
    let more = json!({"metadata": {"finalizers": ["a", "nodemaintenance.k8s.io/maintenance-completion"]}});
    assert_eq!(api_code(&api.patch("m1", &pp, &Patch::Merge(more)).await.unwrap_err()), 422);
    api.patch("m1", &pp, &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    assert!(server.maintenance("m1").is_none());
    let mut kinds = Vec::new();
    for _ in 0..2 {
        kinds.push(match events.next().await.unwrap().unwrap() {
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            other => panic!("unexpected {other:?}"),
        });
    }
    assert_eq!(kinds, ["MODIFIED", "DELETED"]);
}

/// The answers are the fixtures' RBAC (real RBAC answers the webhook in
/// tests/envtest_admission.rs); what matters here is the recording and the faults.
#[tokio::test]
async fn subject_access_reviews_are_recorded_and_fail_on_demand() {
    let server = ApiServer::start().await;
    let api = Api::<SubjectAccessReview>::all(server.client());
    let pp = PostParams::default();
    let allowed = |r: SubjectAccessReview| r.status.unwrap().allowed;
    assert!(allowed(api.create(&pp, &node_delete_review("admin", &["system:masters"], "")).await.unwrap()));
    assert!(allowed(api.create(&pp, &node_delete_review("alice", &["ops"], "worker-1")).await.unwrap()));
    assert!(!allowed(api.create(&pp, &node_delete_review("alice", &["ops"], "worker-3")).await.unwrap()));
    assert!(
        !allowed(api.create(&pp, &node_delete_review("alice", &["ops"], "")).await.unwrap()),
        "fast path needs an all-nodes rule"
    );
    assert!(!allowed(api.create(&pp, &node_delete_review("bob", &["dev"], "worker-1")).await.unwrap()));

    let recorded = server.sar_requests();
    assert_eq!(recorded.len(), 5);
    assert_eq!(recorded[1]["spec"]["uid"], "uid-alice");
    assert_eq!(recorded[1]["spec"]["extra"]["scopes"], json!(["a", "b"]));
    assert_eq!(recorded[1]["spec"]["resourceAttributes"]["name"], "worker-1");

    server.sar_latency(Duration::from_millis(30));
    let calls = (0..8).map(|i| {
        let api = api.clone();
        async move {
            api.create(&PostParams::default(), &node_delete_review("alice", &["ops"], &format!("worker-{i}"))).await
        }
    });
    for r in futures::future::join_all(calls).await {
        r.unwrap();
    }
    assert!(server.sar_max_concurrency() >= 2, "max {}", server.sar_max_concurrency());
    server.sar_latency(Duration::ZERO);

    server.sar_fail(SarFailure::Status(500));
    assert_eq!(api_code(&api.create(&pp, &node_delete_review("alice", &["ops"], "worker-1")).await.unwrap_err()), 500);
    server.sar_fail(SarFailure::Close);
    let err = api.create(&pp, &node_delete_review("alice", &["ops"], "worker-1")).await.unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");
    server.sar_fail(SarFailure::Hang);
    let hung = tokio::time::timeout(
        Duration::from_millis(300),
        api.create(&pp, &node_delete_review("alice", &["ops"], "worker-1")),
    )
    .await;
    assert!(hung.is_err());
    server.sar_fail(SarFailure::None);
    assert!(allowed(api.create(&pp, &node_delete_review("alice", &["ops"], "worker-2")).await.unwrap()));
}

#[tokio::test]
async fn outages_answer_503_or_drop_connections() {
    let server = server_with_nodes().await;
    let api = Api::<Node>::all(server.client());
    server.set_down(true);
    assert_eq!(api_code(&api.list(&ListParams::default()).await.unwrap_err()), 503);
    server.set_down(false);
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 9);

    server.set_path_down("/apis/authorization.k8s.io", Some(DownMode::DropConnection));
    let sars = Api::<SubjectAccessReview>::all(server.client());
    assert!(sars.create(&PostParams::default(), &node_delete_review("a", &["g"], "")).await.is_err());
    api.get("worker-1").await.expect("other paths stay up");
    server.set_path_down("/apis/authorization.k8s.io", None);
    sars.create(&PostParams::default(), &node_delete_review("a", &["g"], "")).await.unwrap();

    // kube's default client retries 503 and succeeds once the server is back.
    let retrying = kube::Client::try_from(server.config()).unwrap();
    server.set_down(true);
    let call = tokio::spawn(async move { Api::<Node>::all(retrying).get("worker-1").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    server.set_down(false);
    call.await.unwrap().expect("retried after the outage");
}

#[tokio::test]
async fn leases_and_events() {
    let server = ApiServer::start().await;
    let api = Api::<Lease>::namespaced(server.client(), "kube-system");
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "nm"}, "spec": {"holderIdentity": "a"}})).unwrap();
    let created = api.create(&PostParams::default(), &lease).await.unwrap();
    let mut next = created.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let replaced = api.replace("nm", &PostParams::default(), &next).await.unwrap();
    assert_eq!(replaced.spec.unwrap().holder_identity.as_deref(), Some("b"));
    assert_eq!(api_code(&api.replace("nm", &PostParams::default(), &next).await.unwrap_err()), 409, "stale rv");
    assert_eq!(server.lease("kube-system", "nm").unwrap()["spec"]["holderIdentity"], "b");

    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let recorder = Recorder::new(server.client(), Reporter { controller: "nm".into(), instance: None });
    let node_ref = k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("Node".into()),
        name: Some("worker-1".into()),
        api_version: Some("v1".into()),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Normal,
        reason: "Cordoned".into(),
        note: Some("cordoned".into()),
        action: "Cordon".into(),
        secondary: None,
    };
    recorder.publish(&ev, &node_ref).await.unwrap();
    recorder.publish(&ev, &node_ref).await.unwrap();
    let events = server.events();
    assert_eq!(events.len(), 2, "create, then a series patch");
    assert_eq!(events[0]["reason"], "Cordoned");
    assert_eq!(events[0]["metadata"]["namespace"], "default");
    assert_eq!(events[1]["series"]["count"], 2);
}

#[tokio::test]
async fn server_side_apply_conflicts_and_lease_manager_election() {
    let server = ApiServer::start().await;
    let api = Api::<Lease>::namespaced(server.client(), "nm");
    let apply = |holder: &str| {
        Patch::Apply(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {"holderIdentity": holder}}),
        )
    };
    api.patch("l", &PatchParams::apply("a"), &apply("a")).await.unwrap();
    api.patch("l", &PatchParams::apply("a"), &apply("a")).await.unwrap();
    let err = api.patch("l", &PatchParams::apply("b"), &apply("b")).await.unwrap_err();
    let kube::Error::Api(status) = &err else { panic!("{err:?}") };
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(status.message.contains(r#"conflict with "a""#) && status.message.contains(".spec.holderIdentity"));
    let same = api.patch("l", &PatchParams::apply("b"), &apply("a")).await.unwrap();
    assert_eq!(same.spec.unwrap().holder_identity.as_deref(), Some("a"), "equal values share ownership");
    // An update (strategic patch) takes ownership; then "a" conflicts.
    let release = Patch::Strategic(json!({"spec": {"holderIdentity": null}}));
    api.patch("l", &PatchParams { field_manager: Some("b".into()), ..Default::default() }, &release).await.unwrap();
    api.patch("l", &PatchParams::apply("b"), &apply("b")).await.unwrap();
    assert_eq!(api_code(&api.patch("l", &PatchParams::apply("a"), &apply("a")).await.unwrap_err()), 409);
    let forced = api.patch("l", &PatchParams::apply("a").force(), &apply("a")).await.unwrap();
    let managers: Vec<_> = forced.metadata.managed_fields.unwrap().into_iter().map(|m| m.manager.unwrap()).collect();
    assert!(managers.contains(&"a".to_string()));

    // Map-lists are owned per element: another manager's condition does not conflict.
    server.load_nodes_yaml(fixture_nodes_path());
    let nodes = Api::<Node>::all(server.client());
    let cond = |t: &str, s: &str| json!({"status": {"conditions": [{"type": t, "status": s}]}});
    let kubelet = PatchParams { field_manager: Some("kubelet".into()), ..Default::default() };
    nodes.patch_status("worker-1", &kubelet, &Patch::Strategic(cond("Ready", "True"))).await.unwrap();
    let mut drained = cond("Drained", "False");
    drained.as_object_mut().unwrap().extend([("apiVersion".into(), json!("v1")), ("kind".into(), json!("Node"))]);
    let n = nodes.patch_status("worker-1", &PatchParams::apply("nm"), &Patch::Apply(&drained)).await.unwrap();
    assert_eq!(n.status.unwrap().conditions.unwrap().len(), 2);
    let mut not_ready = cond("Ready", "False");
    not_ready.as_object_mut().unwrap().extend([("apiVersion".into(), json!("v1")), ("kind".into(), json!("Node"))]);
    let err = nodes.patch_status("worker-1", &PatchParams::apply("nm"), &Patch::Apply(&not_ready)).await.unwrap_err();
    assert_eq!(api_code(&err), 409);

    // kube-lease-manager (the project's leader election) over the stand-in: one leader.
    let mut receivers = Vec::new();
    for id in ["r1", "r2", "r3"] {
        let manager = kube_lease_manager::LeaseManagerBuilder::new(server.client(), "election")
            .with_namespace("nm")
            .with_identity(id)
            .with_duration(2)
            .with_grace(1)
            .build()
            .await
            .unwrap();
        receivers.push(manager.watch().await.0);
    }
    let leaders = |rs: &[tokio::sync::watch::Receiver<bool>]| rs.iter().filter(|r| *r.borrow()).count();
    until("a leader", || leaders(&receivers) == 1).await;
    for _ in 0..20 {
        assert_eq!(leaders(&receivers), 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let leader = receivers.iter().position(|r| *r.borrow()).unwrap();
    drop(receivers.remove(leader));
    until("a new leader", || leaders(&receivers) == 1).await;
}
