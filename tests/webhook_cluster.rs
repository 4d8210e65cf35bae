//! The webhook in CLUSTER mode (SPEC 3.4 to 3.6) through faults a real kube-apiserver cannot
//! produce on demand, on the apiserver stand-in: SubjectAccessReviews answered 500, 403 or 429,
//! cut off, hanging or slow (with the number in flight counted), and the apiserver down while
//! the caches sync. The recorded requests of `tests/fixtures/apiserver` are replayed unchanged
//! or derived from them and say so. What a real apiserver does (SubjectAccessReviews against
//! real RBAC, the SAR cache, the watch caches and their warnings) is in
//! tests/envtest_admission.rs.
//!
//! The stand-in holds `tests/fixtures/nodes.yaml` (cp-1..3, worker-1..4 `pool=general`,
//! gpu-1..2 `pool=gpu`) and answers SubjectAccessReviews with the fixtures' RBAC: admin
//! (`system:masters`) may do anything, alice (`ops`) may delete worker-1 and worker-2 only, bob
//! (`dev`) no node.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::apiserver::{ApiServer, SarFailure};
use support::cluster::{self, Webhook, as_user, denial, fixture_standin, recorded, response, selector, with_selector};

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
