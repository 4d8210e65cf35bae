//! The webhook in CLUSTER mode (SPEC 3.4 to 3.6) against the kube-apiserver stand-in: real
//! SubjectAccessReviews through the real `kube::Client`, Node and NodeMaintenance watch caches,
//! `/readyz`. The recorded requests of `tests/fixtures/apiserver` are replayed unchanged
//! (bodies and headers); other requests are derived from them (another user, another
//! selector) and say so.
//!
//! The stand-in holds `tests/fixtures/nodes.yaml` (cp-1..3, worker-1..4 `pool=general`,
//! gpu-1..2 `pool=gpu`) and the fixtures' RBAC: admin (`system:masters`) may do anything,
//! alice (`ops`) may delete worker-1 and worker-2 only, bob (`dev`) no node.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::apiserver::{ApiServer, SarFailure, Subject};
use support::cluster::{
    self, Webhook, as_user, denial, fixture_standin, maintenance_by_names, recorded, response, sar_names, selector,
    warnings, with_selector,
};

/// New SubjectAccessReview bodies since `before` were recorded.
fn new_sars(api: &ApiServer, before: usize) -> Vec<Value> {
    api.sar_requests()[before..].to_vec()
}

/// Sends `review` to `/validate?timeout=10s` and returns the answer and the SARs it caused.
async fn validate(hook: &Webhook, api: &ApiServer, review: &Value) -> (Value, Vec<Value>) {
    let before = api.sar_requests().len();
    let answer = hook.post("/validate?timeout=10s", review).await;
    (answer, new_sars(api, before))
}

fn allowed(answer: &Value) -> bool {
    response(answer)["allowed"] == json!(true)
}

fn user(name: &str, groups: &[&str]) -> Value {
    json!({"username": name, "uid": format!("uid-{name}"), "groups": groups})
}

/// Every recorded request, unchanged, in cluster mode: what each answers, and exactly which
/// SubjectAccessReviews each one causes. The SAR cache is made to expire between requests
/// (`--sar-cache-ttl 1ms` and a pause longer than that), so each count is the cold-cache one.
#[tokio::test]
async fn fixtures_replayed_in_cluster_mode_send_exactly_the_sars_spec_3_4_requires() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &["--sar-cache-ttl", "1ms"]).await;
    let all = cluster::all_recorded();
    assert_eq!(all.len(), 29);
    for f in &all {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = api.sar_requests().len();
        let answer = hook.replay(f).await;
        let sars = new_sars(&api, before);
        let req = f.review()["request"].clone();
        let resp = response(&answer);
        let name = f.name.as_str();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{name}");
        assert_eq!(resp["uid"], req["uid"], "{name}: uid echoed");
        let step: u32 = name[..2].parse().unwrap();
        let endpoint = name.rsplit_once('-').unwrap().1;
        let validate = f.path.starts_with("/validate?");
        // What each step must answer in cluster mode (the same as standalone except that
        // alice's create is allowed: she may delete the two nodes it selects).
        let (want_allowed, want_sars): (bool, Vec<&str>) = match (step, validate) {
            (_, false) => (true, vec![]),
            // Valid admin creates, spec updates and the delete: the all-nodes SAR only.
            (1 | 3 | 4 | 5 | 14 | 17 | 18, true) => (true, vec![""]),
            // Invalid objects and forbidden transitions: denied before any SAR.
            (2 | 6 | 7 | 8 | 15 | 16, true) => (false, vec![]),
            // Status subresource and metadata-only updates: never SAR-checked.
            (9 | 11, true) => (true, vec![]),
            (10, true) => (false, vec![]),
            (12, true) => (true, vec!["", "worker-1", "worker-2"]),
            (13, true) => (false, vec!["", "worker-1", "worker-2", "worker-3", "worker-4"]),
            _ => panic!("{name}: unexpected fixture"),
        };
        // Defaulting of objects that validation then rejects: either answer is fine.
        if !matches!(name, "15-create-invalid-selector-mutate.json" | "16-create-invalid-plan-mutate.json") {
            assert_eq!(resp["allowed"], json!(want_allowed), "{name} ({endpoint}): {resp}");
        }
        let mut got = sar_names(&sars);
        let first = 1.min(got.len());
        got[first..].sort();
        assert_eq!(got, want_sars, "{name}: SubjectAccessReviews sent");
        for s in &sars {
            assert_eq!(s["spec"]["user"], req["userInfo"]["username"], "{name}");
            assert_eq!(s["spec"]["groups"], req["userInfo"]["groups"], "{name}");
            let attrs = &s["spec"]["resourceAttributes"];
            assert_eq!((&attrs["verb"], &attrs["resource"]), (&json!("delete"), &json!("nodes")), "{name}");
            assert!(attrs.get("group").is_none_or(|g| g == ""), "{name}: core group");
        }
        if !want_allowed && validate {
            let (code, message) = denial(&answer);
            match step {
                13 => {
                    assert_eq!(code, 403, "{name}");
                    assert!(
                        message.contains("\"bob\"") && message.contains("worker-1, worker-2, worker-3 and worker-4;"),
                        "{name}: {message}"
                    );
                    for other in ["cp-", "gpu-"] {
                        assert!(!message.contains(other), "{name}: names only the denied nodes: {message}");
                    }
                }
                _ => assert!(![403, 500, 503].contains(&code), "{name}: {code} {message}"),
            }
        }
    }
}

#[tokio::test]
async fn alice_create_of_her_two_nodes_is_allowed_by_per_node_sars() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let before = api.sar_requests().len();
    let answer = hook.replay(&recorded("12-create-by-alice-matchfields-validate")).await;
    assert!(allowed(&answer), "{answer}");
    let sars = new_sars(&api, before);
    // The all-nodes review first (denied: her rule names nodes), then one per node.
    assert_eq!(sar_names(&sars[..1]), [""]);
    let mut rest = sar_names(&sars[1..]);
    rest.sort();
    assert_eq!(rest, ["worker-1", "worker-2"]);
}

#[tokio::test]
async fn bob_create_is_denied_403_naming_the_general_pool_nodes() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let answer = hook.replay(&recorded("13-create-by-bob-denied-validate")).await;
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert_eq!(response(&answer)["status"]["reason"], "Forbidden");
    assert_eq!(
        message,
        "user \"bob\" may not delete nodes worker-1, worker-2, worker-3 and worker-4; a NodeMaintenance needs \
         \"delete\" on every node it selects"
    );
}

#[tokio::test]
async fn admin_creates_send_exactly_one_sar_the_all_nodes_one() {
    let api = fixture_standin().await;
    for fixture in [
        "01-create-minimal-validate",
        "03-create-dry-run-validate",
        "14-create-selects-all-nodes-validate",
        "17-create-stage-complete-validate",
    ] {
        // A fresh webhook each time: a cold SAR cache.
        let hook = cluster::start(&api, &[]).await;
        let before = api.sar_requests().len();
        let answer = hook.replay(&recorded(fixture)).await;
        assert!(allowed(&answer), "{fixture}: {answer}");
        let sars = new_sars(&api, before);
        assert_eq!(sars.len(), 1, "{fixture}: {sars:?}");
        let attrs = &sars[0]["spec"]["resourceAttributes"];
        assert!(attrs.get("name").is_none_or(|n| n == ""), "{fixture}: the all-nodes review has no name");
        assert_eq!(sars[0]["spec"]["user"], "admin");
    }
}

#[tokio::test]
async fn status_and_metadata_only_updates_send_no_sar() {
    let api = fixture_standin().await;
    // Nobody may delete anything: a SAR would deny.
    api.sar_clear();
    let hook = cluster::start(&api, &[]).await;
    for (fixture, want_allowed) in [
        ("09-status-cordon-then-drain-validate", true),
        ("10-status-drain-without-cordon-validate", false),
        ("11-metadata-only-by-bob-validate", true),
    ] {
        let before = api.sar_requests().len();
        let answer = hook.replay(&recorded(fixture)).await;
        assert_eq!(allowed(&answer), want_allowed, "{fixture}: {answer}");
        assert!(new_sars(&api, before).is_empty(), "{fixture} sent a SubjectAccessReview");
    }
    // The same status update by bob (no node rights): still allowed, still no SAR.
    let bob = as_user(&recorded("09-status-cordon-then-drain-validate").review(), user("bob", &["dev"]));
    let (answer, sars) = validate(&hook, &api, &bob).await;
    assert!(allowed(&answer) && sars.is_empty(), "{answer} {sars:?}");
}

#[tokio::test]
async fn wildcard_allowed_means_one_sar_whatever_the_selection() {
    let api = fixture_standin().await;
    // carol may delete every node through a group rule without resourceNames.
    api.sar_allow(Subject::Group("node-admins"), "delete", "nodes", None);
    let hook = cluster::start(&api, &[]).await;
    let carol = json!({"username": "carol", "groups": ["node-admins", "system:authenticated"]});
    let review = as_user(&recorded("14-create-selects-all-nodes-validate").review(), carol);
    let (answer, sars) = validate(&hook, &api, &review).await;
    assert!(allowed(&answer), "{answer}");
    assert_eq!(sar_names(&sars), [""], "the all-nodes review alone");
}

#[tokio::test]
async fn user_allowed_through_a_group_rule() {
    let api = fixture_standin().await;
    // A group allowed per node (resourceNames), the user named in no rule.
    api.sar_allow(Subject::Group("gpu-ops"), "delete", "nodes", Some("gpu-1"));
    api.sar_allow(Subject::Group("gpu-ops"), "delete", "nodes", Some("gpu-2"));
    let hook = cluster::start(&api, &[]).await;
    let gpu = with_selector(&recorded("01-create-minimal-validate").review(), selector("pool", "In", &["gpu"]));
    let dana = as_user(&gpu, user("dana", &["gpu-ops", "system:authenticated"]));
    let (answer, sars) = validate(&hook, &api, &dana).await;
    assert!(allowed(&answer), "{answer}");
    assert_eq!(sars.len(), 3);
    // The same user name without the group is denied both nodes.
    let dana_alone = as_user(&gpu, user("dana", &["system:authenticated"]));
    let (answer, _) = validate(&hook, &api, &dana_alone).await;
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert!(message.contains("nodes gpu-1 and gpu-2;"), "{message}");
}

#[tokio::test]
async fn only_some_nodes_allowed_names_exactly_the_denied_ones() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    // alice (delete on worker-1 and worker-2) creates bob's maintenance of the general pool.
    let review = as_user(
        &recorded("13-create-by-bob-denied-validate").review(),
        recorded("12-create-by-alice-matchfields-validate").user_info(),
    );
    let (answer, sars) = validate(&hook, &api, &review).await;
    assert_eq!(sars.len(), 5, "all-nodes + one per general-pool node");
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert!(message.starts_with("user \"alice\" may not delete nodes worker-3 and worker-4;"), "{message}");
    for allowed_node in ["worker-1", "worker-2"] {
        assert!(!message.contains(allowed_node), "{message}");
    }
    // A node that joins later is in the watch cache and gets checked too.
    let mut n5 = api.node("worker-4").unwrap();
    n5.metadata.name = Some("worker-5".into());
    n5.metadata.uid = None;
    n5.metadata.resource_version = None;
    api.put_node(n5);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (answer, _) = validate(&hook, &api, &review).await;
        let (_, message) = denial(&answer);
        if message.contains("worker-3, worker-4 and worker-5;") {
            break;
        }
        assert!(Instant::now() < deadline, "worker-5 never checked: {message}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn spec_update_and_delete_by_a_user_without_rights_are_denied() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let bob = user("bob", &["dev", "system:authenticated"]);
    // Idle -> Cordon of the general pool, as bob.
    let update = as_user(&recorded("04-update-idle-to-cordon-validate").review(), bob.clone());
    let (answer, sars) = validate(&hook, &api, &update).await;
    assert_eq!(denial(&answer).0, 403);
    assert_eq!(sars.len(), 5);
    // Deleting admin's maintenance (stored selector: general and gpu pools), as bob.
    let delete = as_user(&recorded("18-delete-by-admin-validate").review(), bob);
    let (answer, sars) = validate(&hook, &api, &delete).await;
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert!(message.contains("gpu-1, gpu-2, worker-1, worker-2, worker-3 and worker-4;"), "{message}");
    // bob's answers for the all-nodes review and the general pool are cached from the update.
    let mut names = sar_names(&sars);
    names.sort();
    assert_eq!(names, ["gpu-1", "gpu-2"]);
}

#[tokio::test]
async fn sar_errors_fail_closed_with_503() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let alice = recorded("12-create-by-alice-matchfields-validate");
    for failure in [SarFailure::Status(500), SarFailure::Close, SarFailure::Status(403), SarFailure::Status(429)] {
        api.sar_fail(failure);
        let answer = hook.replay(&alice).await;
        let (code, message) = denial(&answer);
        assert_eq!(code, 503, "{failure:?}: {message}");
        assert_eq!(response(&answer)["status"]["reason"], "ServiceUnavailable");
        assert!(message.contains("alice") && message.contains("SubjectAccessReview"), "{failure:?}: {message}");
    }
    // A failure is not cached: once SARs answer again, so does the webhook.
    api.sar_fail(SarFailure::None);
    let before = api.sar_requests().len();
    assert!(allowed(&hook.replay(&alice).await));
    assert_eq!(new_sars(&api, before).len(), 3);
}

#[tokio::test]
async fn failure_of_a_per_node_sar_fails_closed() {
    let api = fixture_standin().await;
    // The all-nodes review is answered (denied) and cached; then the per-node ones fail.
    let hook = cluster::start(&api, &["--sar-cache-ttl", "1h"]).await;
    let everything =
        as_user(&recorded("14-create-selects-all-nodes-validate").review(), user("erin", &["system:authenticated"]));
    let warm = with_selector(&everything, selector("pool", "In", &["gpu"]));
    let (answer, sars) = validate(&hook, &api, &warm).await;
    assert_eq!(denial(&answer).0, 403);
    assert_eq!(sars.len(), 3);
    api.sar_fail(SarFailure::Status(500));
    let (answer, sars) = validate(&hook, &api, &everything).await;
    assert_eq!(denial(&answer).0, 503, "gpu-1/2 denied from cache, the rest unanswerable: {answer}");
    assert!(!sars.is_empty() && sars.iter().all(|s| s["spec"]["resourceAttributes"]["name"] != ""));
}

#[tokio::test]
async fn hanging_sar_is_answered_503_within_the_apiserver_deadline() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    api.sar_fail(SarFailure::Hang);
    let alice = recorded("12-create-by-alice-matchfields-validate");
    let started = Instant::now();
    let answer = hook.post_with("/validate?timeout=2s", &alice.headers, alice.body.clone()).await;
    let elapsed = started.elapsed();
    let (code, message) = denial(&answer);
    assert_eq!(code, 503, "{message}");
    assert!(elapsed < Duration::from_millis(1900), "answered after {elapsed:?}, past the apiserver's 2s");
}

#[tokio::test]
async fn sar_timeout_bounds_a_hanging_sar() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &["--sar-timeout", "300ms"]).await;
    api.sar_fail(SarFailure::Hang);
    let started = Instant::now();
    // The apiserver would wait 10 s; the SAR timeout answers first.
    let answer = hook.replay(&recorded("12-create-by-alice-matchfields-validate")).await;
    let elapsed = started.elapsed();
    let (code, message) = denial(&answer);
    assert_eq!(code, 503);
    assert!(message.contains("timed out after 300ms"), "{message}");
    assert!(elapsed < Duration::from_secs(5), "answered after {elapsed:?}");
    // A slow (not hanging) SAR past the timeout is the same.
    api.sar_fail(SarFailure::None);
    api.sar_latency(Duration::from_secs(2));
    let answer = hook.replay(&recorded("13-create-by-bob-denied-validate")).await;
    let (code, message) = denial(&answer);
    assert_eq!(code, 503);
    assert!(message.contains("timed out"), "{message}");
}

#[tokio::test]
async fn identical_review_is_served_from_the_sar_cache() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &["--sar-cache-ttl", "1h"]).await;
    let alice = recorded("12-create-by-alice-matchfields-validate");
    let before = api.sar_requests().len();
    assert!(allowed(&hook.replay(&alice).await));
    assert_eq!(new_sars(&api, before).len(), 3);
    let before = api.sar_requests().len();
    assert!(allowed(&hook.replay(&alice).await));
    assert!(new_sars(&api, before).is_empty(), "second identical review sent SARs");
    // Denials are cached too.
    let bob = recorded("13-create-by-bob-denied-validate");
    assert_eq!(denial(&hook.replay(&bob).await).0, 403);
    let before = api.sar_requests().len();
    assert_eq!(denial(&hook.replay(&bob).await).0, 403);
    assert!(new_sars(&api, before).is_empty());
}

#[tokio::test]
async fn sar_cache_entries_expire_after_the_ttl() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &["--sar-cache-ttl", "200ms"]).await;
    let alice = recorded("12-create-by-alice-matchfields-validate");
    let before = api.sar_requests().len();
    assert!(allowed(&hook.replay(&alice).await));
    assert_eq!(new_sars(&api, before).len(), 3);
    // Rights change in between: the fresh answers are used.
    api.sar_clear();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let before = api.sar_requests().len();
    let answer = hook.replay(&alice).await;
    assert_eq!(new_sars(&api, before).len(), 3, "expired entries asked again");
    assert_eq!(denial(&answer).0, 403);
}

#[tokio::test]
async fn another_identity_with_the_same_username_is_not_served_from_the_cache() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &["--sar-cache-ttl", "1h"]).await;
    let alice = recorded("12-create-by-alice-matchfields-validate");
    assert!(allowed(&hook.replay(&alice).await));
    // Same username "alice", other groups (not ops): must be asked and denied.
    let mut other = alice.user_info();
    other["groups"] = json!(["dev", "system:authenticated"]);
    let (answer, sars) = validate(&hook, &api, &as_user(&alice.review(), other)).await;
    assert_eq!(sars.len(), 3, "not answered from alice/ops' cache entries");
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert!(message.contains("nodes worker-1 and worker-2;"), "{message}");
    // Same username and groups, another uid or extra: asked again too (allowed).
    for change in [json!({"uid": "uid-alice-2"}), json!({"extra": {"scopes": ["nodes"]}})] {
        let mut other = alice.user_info();
        for (k, v) in change.as_object().unwrap() {
            other[k] = v.clone();
        }
        let (answer, sars) = validate(&hook, &api, &as_user(&alice.review(), other)).await;
        assert!(allowed(&answer));
        assert_eq!(sars.len(), 3, "{change}");
    }
}

#[tokio::test]
async fn uid_and_extra_are_passed_through_to_the_sar() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    // Fixture 01: admin with `extra` (the x509 credential id).
    let f = recorded("01-create-minimal-validate");
    let before = api.sar_requests().len();
    assert!(allowed(&hook.replay(&f).await));
    let sars = new_sars(&api, before);
    let info = f.user_info();
    assert!(info["extra"].is_object());
    assert_eq!(sars[0]["spec"]["extra"], info["extra"]);
    assert_eq!(sars[0]["spec"]["groups"], info["groups"]);
    // alice's recorded uid, plus an extra added to her identity: on every per-node SAR.
    let alice = recorded("12-create-by-alice-matchfields-validate");
    let mut info = alice.user_info();
    assert_eq!(info["uid"], "uid-alice");
    info["extra"] = json!({"authentication.kubernetes.io/pod-name": ["debug-1"], "scopes": ["a", "b"]});
    let (answer, sars) = validate(&hook, &api, &as_user(&alice.review(), info.clone())).await;
    assert!(allowed(&answer));
    assert_eq!(sars.len(), 3);
    for s in &sars {
        assert_eq!(s["spec"]["uid"], "uid-alice");
        assert_eq!(s["spec"]["extra"], info["extra"]);
        assert_eq!(s["spec"]["user"], "alice");
    }
}

#[tokio::test]
async fn sar_concurrency_never_exceeds_the_flag() {
    let api = fixture_standin().await;
    api.sar_latency(Duration::from_millis(50));
    for concurrency in [1usize, 2, 4] {
        let flag = concurrency.to_string();
        let hook = cluster::start(&api, &["--sar-concurrency", &flag]).await;
        api.sar_reset();
        // bob selecting all 9 nodes: the all-nodes review, then 9 per-node ones.
        let review = as_user(
            &recorded("14-create-selects-all-nodes-validate").review(),
            recorded("13-create-by-bob-denied-validate").user_info(),
        );
        let (answer, sars) = validate(&hook, &api, &review).await;
        assert_eq!(denial(&answer).0, 403);
        assert_eq!(sars.len(), 10);
        let max = api.sar_max_concurrency();
        assert!(max <= concurrency, "{max} SARs in flight with --sar-concurrency {concurrency}");
        assert!(max >= 1);
    }
}

#[tokio::test]
async fn no_node_list_per_admission_request() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let lists = api.count_requests("list", "nodes");
    let gets = api.count_requests("get", "nodes");
    assert!(lists >= 1, "the reflector's initial list");
    let requests = [
        "01-create-minimal-validate",
        "12-create-by-alice-matchfields-validate",
        "13-create-by-bob-denied-validate",
        "14-create-selects-all-nodes-validate",
        "20-node-uncordon-validate-node",
    ];
    for i in 0..20 {
        let answer = hook.replay(&recorded(requests[i % requests.len()])).await;
        assert!(answer["response"]["uid"].is_string());
    }
    assert_eq!(api.count_requests("list", "nodes"), lists, "a LIST of nodes during admission");
    assert_eq!(api.count_requests("get", "nodes"), gets, "a GET of a node during admission");
    assert_eq!(api.count_requests("list", "nodemaintenances"), 1);
}

#[tokio::test]
async fn readyz_is_503_until_the_caches_synced() {
    let api = fixture_standin().await;
    api.set_down(true);
    let hook = cluster::start_unready(&api, &[]).await;
    for _ in 0..5 {
        assert_eq!(hook.readyz().await, 503);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Not ready, the node view is empty: "selects no node" must not let bob through.
    let answer = hook.replay(&recorded("13-create-by-bob-denied-validate")).await;
    let (code, message) = denial(&answer);
    assert_eq!(code, 503, "bob before the caches synced: {message}");
    assert!(message.contains("not synced"), "{message}");
    api.set_down(false);
    hook.wait_ready(Duration::from_secs(60)).await;
    assert_eq!(denial(&hook.replay(&recorded("13-create-by-bob-denied-validate")).await).0, 403);
}

#[tokio::test]
async fn warnings_from_the_watched_nodes() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let base = recorded("01-create-minimal-validate").review();
    let lower = |a: &Value| warnings(a).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>();

    // Fixture 14 unchanged: every node (and so every control-plane node).
    let all = hook.replay(&recorded("14-create-selects-all-nodes-validate")).await;
    let w = lower(&all);
    assert!(w.iter().any(|w| w.contains("all 9 nodes")), "{w:?}");
    assert!(w.iter().any(|w| w.contains("every control-plane node")), "{w:?}");

    let cp = hook
        .post("/validate", &with_selector(&base, selector("node-role.kubernetes.io/control-plane", "Exists", &[])))
        .await;
    let w = lower(&cp);
    assert!(allowed(&cp));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("every control-plane node (3)"), "{w:?}");

    let before = api.sar_requests().len();
    let none = hook.post("/validate", &with_selector(&base, selector("pool", "In", &["none"]))).await;
    assert!(allowed(&none));
    assert!(new_sars(&api, before).is_empty(), "no node selected: nothing to authorize");
    let w = lower(&none);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("matches no node"), "{w:?}");

    // The general pool (fixture 01 unchanged): no warning yet.
    let f01 = recorded("01-create-minimal-validate");
    assert!(warnings(&hook.replay(&f01).await).is_empty());
    for w in [&all, &cp, &none] {
        assert!(warnings(w).iter().all(|w| w.len() <= 120 && !w.chars().any(char::is_control)));
    }
}

#[tokio::test]
async fn overlap_warning_names_an_active_maintenance_put_into_the_apiserver() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let f01 = recorded("01-create-minimal-validate");
    assert!(warnings(&hook.replay(&f01).await).is_empty());
    // Inactive and non-overlapping maintenances are not named.
    api.put_maintenance(maintenance_by_names("idle-general", "Idle", &["worker-3"]));
    api.put_maintenance(maintenance_by_names("gpu-cordon", "Cordon", &["gpu-1"]));
    api.put_maintenance(maintenance_by_names("alice-worker-1-2", "Cordon", &["worker-1", "worker-2"]));
    let deadline = Instant::now() + Duration::from_secs(10);
    let w = loop {
        let w = warnings(&hook.replay(&f01).await);
        if !w.is_empty() {
            break w;
        }
        assert!(Instant::now() < deadline, "the webhook's cache never saw the maintenance");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("alice-worker-1-2"), "{w:?}");
    assert!(!w[0].contains("idle-general") && !w[0].contains("gpu-cordon"), "{w:?}");
    // A Drain one on worker-4 joins the list.
    api.put_maintenance(maintenance_by_names("drain-4", "Drain", &["worker-4"]));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let w = warnings(&hook.replay(&f01).await);
        if w.iter().any(|w| w.contains("alice-worker-1-2 and drain-4")) {
            break;
        }
        assert!(Instant::now() < deadline, "{w:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn uncordon_of_a_held_node_warns_naming_the_maintenance() {
    let api = fixture_standin().await;
    let hook = cluster::start(&api, &[]).await;
    let f20 = recorded("20-node-uncordon-validate-node");
    let answer = hook.replay(&f20).await;
    assert!(allowed(&answer) && warnings(&answer).is_empty(), "{answer}");
    api.put_maintenance(maintenance_by_names("alice-worker-1-2", "Cordon", &["worker-1", "worker-2"]));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = hook.replay(&f20).await;
        assert!(allowed(&answer), "the node webhook never denies");
        let w = warnings(&answer);
        if let Some(w) = w.first() {
            assert!(w.contains("alice-worker-1-2") && w.contains("worker-1"), "{w}");
            assert!(w.len() <= 120);
            break;
        }
        assert!(Instant::now() < deadline, "no uncordon warning");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Cordoning (fixture 19) never warns.
    assert!(warnings(&hook.replay(&recorded("19-node-cordon-validate-node")).await).is_empty());
}

/// Regression: kube-runtime's `Store::wait_until_ready` wakes only the last of several
/// concurrent waiters; `ClusterCache` must wake every `wait_synced` caller and `synced()`.
#[tokio::test]
async fn every_waiter_sees_the_caches_synced() {
    use node_maintenance::admission::ClusterView;
    let api = fixture_standin().await;
    api.set_down(true);
    let (cache, drive) = node_maintenance::cluster::cache::ClusterCache::start(api.client());
    let drive = tokio::spawn(drive);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.wait_synced().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!cache.synced());
    api.set_down(false);
    for w in waiters {
        tokio::time::timeout(Duration::from_secs(60), w).await.expect("every waiter woken").unwrap();
    }
    assert!(cache.synced());
    assert_eq!(cache.node_index().len(), 9, "synced means the Node index is built");
    drive.abort();
}
