//! Admission through a real kube-apiserver (SPEC 3): the webhook in cluster mode registered
//! by URL, the fixtures' kubectl steps (tests/fixtures/README.md) run by kubectl as admin,
//! alice (`ops`: may delete worker-1 and worker-2) and bob (`dev`: may delete no node) with
//! real RBAC behind the SubjectAccessReviews, defaults as stored, and warnings as kubectl
//! prints them.

mod support;

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use serde_json::{Value, json};
use std::time::Duration;
use support::cluster::{
    Recorded, Webhook, as_user, denial, maintenance_by_names, recorded, response, sar_names, selector,
    start_with_kubeconfig, warnings, with_selector,
};
use support::envtest::objects::{create_fixture_nodes, create_maintenance, wait_for};
use support::envtest::requests::RequestCounts;
use support::envtest::{Envtest, Options, fixture};

/// A kubectl run: whether it succeeded, stdout, stderr.
struct Run {
    ok: bool,
    out: String,
    err: String,
}

fn run(o: std::process::Output) -> Run {
    Run {
        ok: o.status.success(),
        out: String::from_utf8_lossy(&o.stdout).into_owned(),
        err: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn manifest(name: &str) -> String {
    fixture(&format!("manifests/{name}")).display().to_string()
}

/// The fixture nodes and the webhook (as admin), registered and called by the apiserver.
async fn setup() -> Option<(Envtest, Webhook)> {
    let env = Envtest::start(Options::default()).await?;
    create_fixture_nodes(&env.client()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let hook = start_with_kubeconfig(dir, &env.admin_kubeconfig.clone(), &[]).await;
    hook.wait_ready(Duration::from_secs(30)).await;
    let ca = std::fs::read(hook.dir.path().join("certs/ca.crt")).expect("dev CA");
    env.register_webhooks(hook.bound.addr.port(), &ca).await;
    Some((env, hook))
}

macro_rules! setup_or_skip {
    () => {
        match setup().await {
            Some(parts) => parts,
            None => return,
        }
    };
}

async fn as_admin(env: &Envtest, args: &[&str]) -> Run {
    run(env.kubectl(args, None).await)
}

async fn stored(env: &Envtest, name: &str) -> Value {
    serde_json::from_str(&env.kubectl_ok(&["get", "nm", name, "-o", "json"]).await).expect("JSON")
}

fn plan(nm: &Value) -> Vec<(String, i64, bool)> {
    nm["spec"]["drainPlan"]
        .as_array()
        .expect("drainPlan")
        .iter()
        .map(|e| {
            (
                e["podType"].as_str().unwrap().to_owned(),
                e["podPriority"].as_i64().unwrap(),
                e.get("podSelector").is_some(),
            )
        })
        .collect()
}

#[tokio::test]
async fn defaults_are_stored_and_stage_rules_are_enforced() {
    let (env, _hook) = setup_or_skip!();
    // 01: only nodeSelector and reason; stored with stage Idle and the 12 defaults in order.
    assert!(as_admin(&env, &["create", "-f", &manifest("nm-general.yaml")]).await.ok);
    let general = stored(&env, "general-pool-kernel-upgrade").await;
    assert_eq!(general["spec"]["stage"], "Idle");
    let p = plan(&general);
    assert_eq!(p.len(), 12);
    assert_eq!(p[0], ("Default".into(), 1_000_000_000, false));
    assert_eq!(p[11], ("Static".into(), 2_147_483_647, false));
    // 02: a partial, unordered plan is completed and put in canonical order.
    assert!(as_admin(&env, &["create", "-f", &manifest("nm-custom-plan.yaml")]).await.ok);
    let p = plan(&stored(&env, "gpu-firmware").await);
    assert_eq!(
        p[..4],
        [
            ("Default".into(), 5000, true),
            ("Default".into(), 5000, false),
            ("Default".into(), 15000, false),
            ("Default".into(), 1_000_000_000, false)
        ]
    );
    assert_eq!(p.len(), 16);
    // 03: a server-side dry run is defaulted and not stored.
    let dry = as_admin(&env, &["create", "--dry-run=server", "-o", "json", "-f", &manifest("nm-dryrun.yaml")]).await;
    assert!(dry.ok, "{}", dry.err);
    assert_eq!(plan(&serde_json::from_str(&dry.out).unwrap()).len(), 12);
    assert!(!as_admin(&env, &["get", "nm", "zone-a-rack-swap"]).await.ok);
    // 04, 05: forward; 06: backwards is denied with the field path.
    let patch = |stage: &str| format!(r#"{{"spec":{{"stage":"{stage}"}}}}"#);
    for stage in ["Cordon", "Drain"] {
        let r = as_admin(&env, &["patch", "nm", "general-pool-kernel-upgrade", "--type", "merge", "-p", &patch(stage)])
            .await;
        assert!(r.ok, "{stage}: {}", r.err);
    }
    let back =
        as_admin(&env, &["patch", "nm", "general-pool-kernel-upgrade", "--type", "merge", "-p", &patch("Cordon")])
            .await;
    assert!(!back.ok && back.err.contains("spec.stage"), "{}", back.err);
    // 07: the plan is immutable; 08: the selector is immutable outside Idle.
    let r = as_admin(
        &env,
        &[
            "patch",
            "nm",
            "gpu-firmware",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/drainPlan/0/podPriority","value":16000}]"#,
        ],
    )
    .await;
    assert!(!r.ok && r.err.contains("drainPlan"), "{}", r.err);
    let r = as_admin(
        &env,
        &[
            "patch",
            "nm",
            "general-pool-kernel-upgrade",
            "--type",
            "json",
            "-p",
            r#"[{"op":"replace","path":"/spec/nodeSelector/nodeSelectorTerms/0/matchExpressions/0/values","value":["general","gpu"]}]"#,
        ],
    ).await;
    assert!(!r.ok && r.err.contains("nodeSelector"), "{}", r.err);
    // 17: created directly in Complete; 18: deleted by admin.
    assert!(as_admin(&env, &["create", "-f", &manifest("nm-complete.yaml")]).await.ok);
    let del = as_admin(&env, &["delete", "nm", "general-pool-kernel-upgrade", "--wait=false"]).await;
    assert!(del.ok, "{}", del.err);
}

#[tokio::test]
async fn invalid_objects_are_denied_with_field_paths() {
    let (env, _hook) = setup_or_skip!();
    let r = as_admin(&env, &["create", "-f", &manifest("nm-bad-selector.yaml")]).await;
    assert!(!r.ok, "invalid selector stored");
    for path in ["matchExpressions[0]", "matchExpressions[1]", "matchExpressions[2]", "matchFields[0]"] {
        assert!(r.err.contains(path), "{path} named: {}", r.err);
    }
    let r = as_admin(&env, &["create", "-f", &manifest("nm-bad-plan.yaml")]).await;
    assert!(!r.ok, "invalid plan stored");
    assert!(r.err.contains("stage") && r.err.contains("drainPlan"), "{}", r.err);
}

#[tokio::test]
async fn status_updates_keep_cordon_before_drain() {
    let (env, _hook) = setup_or_skip!();
    assert!(as_admin(&env, &["create", "-f", &manifest("nm-general.yaml")]).await.ok);
    assert!(as_admin(&env, &["create", "-f", &manifest("nm-custom-plan.yaml")]).await.ok);
    let ok = r#"{"status":{"stageStatuses":[{"name":"Cordon","startTimestamp":"2026-11-21T23:40:00Z"},{"name":"Drain","startTimestamp":"2026-11-21T23:40:05Z"}]}}"#;
    let r = as_admin(
        &env,
        &["patch", "nm", "general-pool-kernel-upgrade", "--subresource=status", "--type", "merge", "-p", ok],
    )
    .await;
    assert!(r.ok, "{}", r.err);
    let bad = r#"{"status":{"stageStatuses":[{"name":"Drain","startTimestamp":"2026-11-21T23:41:00Z"}]}}"#;
    let r =
        as_admin(&env, &["patch", "nm", "gpu-firmware", "--subresource=status", "--type", "merge", "-p", bad]).await;
    assert!(!r.ok && r.err.contains("Cordon"), "{}", r.err);
}

#[tokio::test]
async fn authorization_follows_real_rbac_for_each_user() {
    let (env, _hook) = setup_or_skip!();
    assert!(as_admin(&env, &["create", "-f", &manifest("nm-custom-plan.yaml")]).await.ok);
    // 11: bob may label a maintenance (metadata only: no node rights needed).
    let r = run(env.kubectl_as("bob", Some("dev"), &["label", "nm", "gpu-firmware", "team=infra"], None).await);
    assert!(r.ok, "{}", r.err);
    // 12: alice may delete worker-1 and worker-2, so she may maintain exactly those.
    let r = run(env.kubectl_as("alice", Some("ops"), &["create", "-f", &manifest("nm-alice.yaml")], None).await);
    assert!(r.ok, "{}", r.err);
    // 13: bob may delete no node: denied, naming the nodes.
    let r = run(env.kubectl_as("bob", Some("dev"), &["create", "-f", &manifest("nm-bob.yaml")], None).await);
    assert!(!r.ok, "bob's maintenance stored");
    assert!(r.err.contains("Forbidden") || r.err.contains("forbidden"), "{}", r.err);
    assert!(r.err.contains("worker-1, worker-2, worker-3 and worker-4"), "{}", r.err);
    // alice may not widen her selection to the gpu nodes, nor touch the gpu maintenance.
    let r = run(env
        .kubectl_as(
            "alice",
            Some("ops"),
            &["patch", "nm", "gpu-firmware", "--type", "merge", "-p", r#"{"spec":{"stage":"Drain"}}"#],
            None,
        )
        .await);
    assert!(!r.ok && r.err.contains("gpu-1"), "{}", r.err);
    let r = run(env.kubectl_as("bob", Some("dev"), &["delete", "nm", "alice-worker-1-2"], None).await);
    assert!(!r.ok && r.err.contains("worker-1"), "{}", r.err);
    let r = run(env.kubectl_as("alice", Some("ops"), &["delete", "nm", "alice-worker-1-2"], None).await);
    assert!(r.ok, "{}", r.err);
}

#[tokio::test]
async fn warnings_reach_the_user() {
    let (env, _hook) = setup_or_skip!();
    // 14: a selector matching every node warns, naming the control plane too.
    let r = as_admin(&env, &["create", "-f", &manifest("nm-all.yaml")]).await;
    assert!(r.ok, "{}", r.err);
    assert!(r.err.contains("Warning:") && r.err.contains("all 9 nodes"), "{}", r.err);
    assert!(r.err.contains("control-plane"), "{}", r.err);
    // A maintenance overlapping an active one names it once the webhook's cache has it.
    let alice = run(env.kubectl_as("alice", Some("ops"), &["create", "-f", &manifest("nm-alice.yaml")], None).await);
    assert!(alice.ok && alice.err.contains("everything"), "overlap warning: {}", alice.err);
    // 19, 20: cordon is silent; uncordon of a node an active maintenance holds warns.
    let r = as_admin(&env, &["cordon", "worker-1"]).await;
    assert!(r.ok && !r.err.contains("Warning"), "{}", r.err);
    let r = wait_for("uncordon warning", Duration::from_secs(10), || async {
        let r = as_admin(&env, &["uncordon", "worker-1"]).await;
        if r.err.contains("alice-worker-1-2") {
            Ok(r)
        } else {
            as_admin(&env, &["cordon", "worker-1"]).await;
            Err(r.err)
        }
    })
    .await;
    assert!(r.ok && r.err.contains("Warning:"), "{}", r.err);
}

/// `spec.maxUnavailable` and `spec.drainTimeout` (issue 14): the CRD takes an integer or a
/// string and a string, the webhook rejects what the controller could not read.
#[tokio::test]
async fn budget_and_deadline_are_validated_with_their_field_paths() {
    let (env, _hook) = setup_or_skip!();
    let nm = |field: &str| {
        format!(
            "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeMaintenance\nmetadata: {{name: budget}}\n\
             spec:\n  nodeSelector: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, \
             values: [worker-1]}}]}}]}}\n  {field}\n"
        )
    };
    let bad = [
        ("maxUnavailable: 0", "spec.maxUnavailable"),
        ("maxUnavailable: \"0%\"", "spec.maxUnavailable"),
        ("maxUnavailable: \"150%\"", "spec.maxUnavailable"),
        ("maxUnavailable: \"two\"", "spec.maxUnavailable"),
        ("drainTimeout: 30M", "spec.drainTimeout"),
        ("drainTimeout: 0s", "spec.drainTimeout"),
    ];
    for (field, path) in bad {
        let r = run(env.kubectl(&["create", "-f", "-"], Some(&nm(field))).await);
        assert!(!r.ok && r.err.contains(path), "{field}: {}", r.err);
    }
    let r = run(env.kubectl(&["create", "-f", "-"], Some(&nm("maxUnavailable: \"25%\"\n  drainTimeout: 1h30m"))).await);
    assert!(r.ok, "{}", r.err);
    let stored = stored(&env, "budget").await;
    assert_eq!(
        (&stored["spec"]["maxUnavailable"], &stored["spec"]["drainTimeout"]),
        (&Value::from("25%"), &Value::from("1h30m"))
    );
    let patch = r#"{"spec":{"maxUnavailable":2,"drainTimeout":"2h"}}"#;
    let r = as_admin(&env, &["patch", "nm", "budget", "--type", "merge", "-p", patch]).await;
    assert!(r.ok, "both may change: {}", r.err);
    // `kubectl explain` shows the fields' documentation (the CRD's, from the doc comments).
    for (field, says) in [
        ("nodemaintenance.spec.maxUnavailable", "Rolling maintenance"),
        ("nodemaintenance.spec.releaseNodesOn", "Reboot"),
        ("nodedisruptionbudget.spec.minAvailable", "At most one of"),
        ("nodemaintenance.spec.drainTimeout", "DrainTimedOut"),
        ("nodemaintenance.status.drainStatus.lastProgressTime", "last made progress"),
    ] {
        wait_for(&format!("kubectl explain {field}"), Duration::from_secs(30), || async {
            let r = as_admin(&env, &["explain", field]).await;
            if r.ok && r.out.contains(says) { Ok(()) } else { Err(format!("{}{}", r.out, r.err)) }
        })
        .await;
    }
}

/// Alert selectors Prometheus refuses (SPEC 4.6: every matcher matches the empty string, so
/// they select every alert, the always-firing Watchdog included) are refused by the webhook
/// with their field path; a selector with a matcher that needs a value is taken.
#[tokio::test]
async fn alert_selectors_prometheus_refuses_are_refused_with_their_field_path() {
    let (env, _hook) = setup_or_skip!();
    let budget = |name: &str, matchers: &str| {
        format!(
            "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {{name: {name}}}\n\
             spec:\n  nodeSelector: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, \
             values: [worker-1]}}]}}]}}\n  healthGate: {{alerts: {{matchers: {matchers}}}}}\n"
        )
    };
    for (matchers, path) in [
        (r#"['{severity!="info"}']"#, "spec.healthGate.alerts.matchers[0]"),
        (r#"['{severity="critical"}', '{team=""}']"#, "spec.healthGate.alerts.matchers[1]"),
        (r#"['{alertname=~".*"}']"#, "spec.healthGate.alerts.matchers[0]"),
    ] {
        let r = run(env.kubectl(&["create", "-f", "-"], Some(&budget("refused", matchers))).await);
        assert!(!r.ok && r.err.contains(path) && r.err.contains("empty string"), "{matchers}: {}", r.err);
    }
    let r =
        run(env.kubectl(&["create", "-f", "-"], Some(&budget("taken", r#"['{severity!="info",team="db"}']"#))).await);
    assert!(r.ok, "{}", r.err);
}

// ---------------------------------------------------------------------------------------
// The webhook's own requests to the apiserver (SPEC 3.4 to 3.6; issue 24: moved here from the
// stand-in). The test plays the apiserver's side of admission (the recorded requests of
// tests/fixtures/apiserver, replayed unchanged or derived and saying so); the webhook's
// SubjectAccessReviews are answered by the real RBAC authorizer and read back from the
// apiserver's audit log, its Node and NodeMaintenance caches watch the real apiserver.

/// The fixture nodes and a cluster-mode webhook (not registered: the test calls it) started
/// with `flags`.
async fn cluster_webhook(flags: &[&str]) -> Option<(Envtest, Webhook)> {
    let env = Envtest::start(Options::default()).await?;
    create_fixture_nodes(&env.client()).await;
    let hook = start_webhook(&env, flags).await;
    Some((env, hook))
}

async fn start_webhook(env: &Envtest, flags: &[&str]) -> Webhook {
    let hook = start_with_kubeconfig(tempfile::tempdir().expect("tempdir"), &env.admin_kubeconfig, flags).await;
    hook.wait_ready(Duration::from_secs(30)).await;
    hook
}

/// Every SubjectAccessReview the apiserver has answered, but ours. One of ours is sent and
/// waited for in the audit log first, so every review answered before it is in the list.
async fn sars(env: &Envtest) -> Vec<Value> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let marker = format!("audit-marker-{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let review: SubjectAccessReview = serde_json::from_value(json!({"spec": {"user": marker,
        "resourceAttributes": {"verb": "get", "resource": "nodes"}}}))
    .expect("a SubjectAccessReview");
    kube::Api::<SubjectAccessReview>::all(env.client()).create(&Default::default(), &review).await.expect("marker");
    wait_for("the marker review in the audit log", Duration::from_secs(10), || async {
        let all = env.subject_access_reviews();
        match all.iter().any(|s| s["spec"]["user"] == marker.as_str()) {
            true => Ok(all),
            false => Err(format!("{} reviews logged", all.len())),
        }
    })
    .await
    .into_iter()
    .filter(|s| !s["spec"]["user"].as_str().is_some_and(|u| u.starts_with("audit-marker-")))
    .collect()
}

/// Sends `review` to `/validate?timeout=10s`; the answer and the SubjectAccessReviews it caused.
async fn validate(env: &Envtest, hook: &Webhook, review: &Value) -> (Value, Vec<Value>) {
    let before = sars(env).await.len();
    let answer = hook.post("/validate?timeout=10s", review).await;
    (answer, sars(env).await.split_off(before))
}

/// Replays a recorded request unchanged; the answer and the SubjectAccessReviews it caused.
async fn replay(env: &Envtest, hook: &Webhook, f: &Recorded) -> (Value, Vec<Value>) {
    let before = sars(env).await.len();
    let answer = hook.replay(f).await;
    (answer, sars(env).await.split_off(before))
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
/// A status update by bob (no node rights) sends none either, and the caller's uid, groups and
/// `extra` reach every review.
#[tokio::test]
async fn fixtures_replayed_in_cluster_mode_send_exactly_the_sars_spec_3_4_requires() {
    let Some((env, hook)) = cluster_webhook(&["--sar-cache-ttl", "1ms"]).await else { return };
    let all = support::cluster::all_recorded();
    assert_eq!(all.len(), 29);
    for f in &all {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let (answer, sars) = replay(&env, &hook, f).await;
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
            assert_eq!(s["spec"]["extra"], req["userInfo"]["extra"], "{name}");
            let attrs = &s["spec"]["resourceAttributes"];
            assert_eq!((&attrs["verb"], &attrs["resource"]), (&json!("delete"), &json!("nodes")), "{name}");
            assert!(attrs.get("group").is_none_or(|g| g == ""), "{name}: core group");
        }
        if !want_allowed && validate {
            let (code, message) = denial(&answer);
            match step {
                13 => {
                    assert_eq!(code, 403, "{name}");
                    assert_eq!(resp["status"]["reason"], "Forbidden");
                    assert_eq!(
                        message,
                        "user \"bob\" may not delete nodes worker-1, worker-2, worker-3 and worker-4; a \
                         NodeMaintenance needs \"delete\" on every node it selects"
                    );
                }
                _ => assert!(![403, 500, 503].contains(&code), "{name}: {code} {message}"),
            }
        }
    }
    // The status update again, by bob: still allowed, still no SAR.
    let bob = as_user(&recorded("09-status-cordon-then-drain-validate").review(), user("bob", &["dev"]));
    let (answer, sars) = validate(&env, &hook, &bob).await;
    assert!(allowed(&answer) && sars.is_empty(), "{answer} {sars:?}");
    // alice's recorded uid, plus an extra added to her identity: on every per-node SAR.
    let alice = recorded("12-create-by-alice-matchfields-validate");
    let mut info = alice.user_info();
    assert_eq!(info["uid"], "uid-alice");
    info["extra"] = json!({"authentication.kubernetes.io/pod-name": ["debug-1"], "scopes": ["a", "b"]});
    let (answer, sars) = validate(&env, &hook, &as_user(&alice.review(), info.clone())).await;
    assert!(allowed(&answer), "{answer}");
    assert_eq!(sars.len(), 3);
    for s in &sars {
        assert_eq!((&s["spec"]["uid"], &s["spec"]["extra"]), (&json!("uid-alice"), &info["extra"]));
    }
}

/// RBAC shapes (a group allowed every node, a group allowed some nodes by `resourceNames`) and
/// the SAR cache (answers reused, per identity, until the TTL passes) against real RBAC.
#[tokio::test]
async fn sars_follow_real_rbac_and_the_cache_keeps_identities_apart() {
    let Some((env, hook)) = cluster_webhook(&["--sar-cache-ttl", "1h"]).await else { return };
    let rbac = "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: delete-nodes}
rules: [{apiGroups: [''], resources: [nodes], verbs: [delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: node-admins}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: delete-nodes}
subjects: [{kind: Group, name: node-admins, apiGroup: rbac.authorization.k8s.io}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: delete-gpu-nodes}
rules: [{apiGroups: [''], resources: [nodes], resourceNames: [gpu-1, gpu-2], verbs: [delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpu-ops}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: delete-gpu-nodes}
subjects: [{kind: Group, name: gpu-ops, apiGroup: rbac.authorization.k8s.io}]
";
    let r = run(env.kubectl(&["apply", "-f", "-"], Some(rbac)).await);
    assert!(r.ok, "{}", r.err);
    env.wait_may_delete_node("carol", "node-admins", "worker-1").await;
    env.wait_may_delete_node("dana", "gpu-ops", "gpu-1").await;

    // carol may delete every node through a group: the all-nodes review alone.
    let carol = user("carol", &["node-admins", "system:authenticated"]);
    let (answer, sars) =
        validate(&env, &hook, &as_user(&recorded("14-create-selects-all-nodes-validate").review(), carol)).await;
    assert!(allowed(&answer), "{answer}");
    assert_eq!(sar_names(&sars), [""], "the all-nodes review alone");

    // dana through a group allowed per node; the same user name without the group is denied.
    let gpu = with_selector(&recorded("01-create-minimal-validate").review(), selector("pool", "In", &["gpu"]));
    let (answer, sars) =
        validate(&env, &hook, &as_user(&gpu, user("dana", &["gpu-ops", "system:authenticated"]))).await;
    assert!(allowed(&answer), "{answer}");
    assert_eq!(sars.len(), 3);
    let (answer, sars) = validate(&env, &hook, &as_user(&gpu, user("dana", &["system:authenticated"]))).await;
    let (code, message) = denial(&answer);
    assert_eq!((code, sars.len()), (403, 3), "not answered from dana/gpu-ops' cache entries");
    assert!(message.contains("nodes gpu-1 and gpu-2;"), "{message}");

    // alice (worker-1 and worker-2) selecting the general pool: exactly the others denied.
    let alice = recorded("12-create-by-alice-matchfields-validate");
    let general = as_user(&recorded("13-create-by-bob-denied-validate").review(), alice.user_info());
    let (answer, sars) = validate(&env, &hook, &general).await;
    assert_eq!(sars.len(), 5, "all-nodes + one per general-pool node");
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert!(message.starts_with("user \"alice\" may not delete nodes worker-3 and worker-4;"), "{message}");
    // Her own create: answered from the cache, allowed, no review sent.
    let (answer, sars) = replay(&env, &hook, &alice).await;
    assert!(allowed(&answer) && sars.is_empty(), "{answer} {sars:?}");
    // Same username, other groups: asked and denied; another uid or extra: asked again.
    let mut other = alice.user_info();
    other["groups"] = json!(["dev", "system:authenticated"]);
    let (answer, sars) = validate(&env, &hook, &as_user(&alice.review(), other)).await;
    assert_eq!(sars.len(), 3, "not answered from alice/ops' cache entries");
    assert!(denial(&answer).1.contains("nodes worker-1 and worker-2;"), "{answer}");
    for change in [json!({"uid": "uid-alice-2"}), json!({"extra": {"scopes": ["nodes"]}})] {
        let mut other = alice.user_info();
        for (k, v) in change.as_object().unwrap() {
            other[k] = v.clone();
        }
        let (answer, sars) = validate(&env, &hook, &as_user(&alice.review(), other)).await;
        assert!(allowed(&answer), "{change}: {answer}");
        assert_eq!(sars.len(), 3, "{change}");
    }

    // bob's Idle -> Cordon of the general pool, then his delete of admin's maintenance (both
    // pools): the general pool's answers come from the cache, only gpu-1 and gpu-2 are asked.
    let bob = user("bob", &["dev", "system:authenticated"]);
    let (answer, sars) =
        validate(&env, &hook, &as_user(&recorded("04-update-idle-to-cordon-validate").review(), bob.clone())).await;
    assert_eq!((denial(&answer).0, sars.len()), (403, 5));
    let (answer, sars) = validate(&env, &hook, &as_user(&recorded("18-delete-by-admin-validate").review(), bob)).await;
    let (code, message) = denial(&answer);
    assert_eq!(code, 403);
    assert!(message.contains("gpu-1, gpu-2, worker-1, worker-2, worker-3 and worker-4;"), "{message}");
    let mut names = sar_names(&sars);
    names.sort();
    assert_eq!(names, ["gpu-1", "gpu-2"]);

    // A node that joins later is in the watch cache and gets checked too.
    support::envtest::objects::create_node(&env.client(), "worker-5", &[("pool", "general")]).await;
    wait_for("worker-5 checked", Duration::from_secs(10), || async {
        let (answer, _) = validate(&env, &hook, &general).await;
        let (_, message) = denial(&answer);
        if message.contains("worker-3, worker-4 and worker-5;") { Ok(()) } else { Err(message) }
    })
    .await;

    // With a short TTL, rights taken away are seen once the entries expire.
    let short = start_webhook(&env, &["--sar-cache-ttl", "200ms"]).await;
    let worker_1 = json!({"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["worker-1"]}]}]});
    let only_hers = as_user(&with_selector(&alice.review(), worker_1), alice.user_info());
    let (answer, sars) = validate(&env, &short, &only_hers).await;
    assert!(allowed(&answer) && sars.len() == 2, "{answer} {sars:?}");
    let r = run(env.kubectl(&["delete", "clusterrolebinding", "delete-general-workers-1-2"], None).await);
    assert!(r.ok, "{}", r.err);
    let code = wait_for("the revoked rights applied", Duration::from_secs(30), || async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (answer, sars) = validate(&env, &short, &only_hers).await;
        assert_eq!(sars.len(), 2, "expired entries asked again: {sars:?}");
        if allowed(&answer) { Err("still allowed".to_owned()) } else { Ok(denial(&answer).0) }
    })
    .await;
    assert_eq!(code, 403);
}

/// The webhook answers from its watch caches: no Node LIST or GET per admission request,
/// warnings from the watched nodes, and overlap warnings naming the active maintenances put
/// into the apiserver (the uncordon warning is in `warnings_reach_the_user`).
#[tokio::test]
async fn the_webhook_answers_from_its_watch_caches() {
    let Some((env, hook)) = cluster_webhook(&[]).await else { return };
    let count = |verb: &'static str| {
        let env = &env;
        async move { RequestCounts::parse(&env.metrics().await).get(verb, "nodes", "") }
    };
    let (lists, gets) = (count("LIST").await, count("GET").await);
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
    assert_eq!(count("LIST").await, lists, "a LIST of nodes during admission");
    assert_eq!(count("GET").await, gets, "a GET of a node during admission");

    let base = recorded("01-create-minimal-validate").review();
    let lower = |a: &Value| warnings(a).iter().map(|w| w.to_lowercase()).collect::<Vec<_>>();
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
    let (none, sars) = validate(&env, &hook, &with_selector(&base, selector("pool", "In", &["none"]))).await;
    assert!(allowed(&none));
    assert!(sars.is_empty(), "no node selected: nothing to authorize");
    let w = lower(&none);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("matches no node"), "{w:?}");
    for w in [&all, &cp, &none] {
        assert!(warnings(w).iter().all(|w| w.len() <= 120 && !w.chars().any(char::is_control)));
    }

    // The general pool (fixture 01 unchanged): no warning until an active maintenance overlaps.
    let f01 = recorded("01-create-minimal-validate");
    assert!(warnings(&hook.replay(&f01).await).is_empty());
    for (name, stage, nodes) in [
        ("idle-general", "Idle", &["worker-3"][..]),
        ("gpu-cordon", "Cordon", &["gpu-1"]),
        ("alice-worker-1-2", "Cordon", &["worker-1", "worker-2"]),
    ] {
        create_maintenance(&env.client(), maintenance_by_names(name, stage, nodes)).await.expect("created");
    }
    let w = wait_for("the overlap warning", Duration::from_secs(10), || async {
        let w = warnings(&hook.replay(&f01).await);
        if w.is_empty() { Err("no warning".to_owned()) } else { Ok(w) }
    })
    .await;
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("alice-worker-1-2"), "{w:?}");
    assert!(!w[0].contains("idle-general") && !w[0].contains("gpu-cordon"), "{w:?}");
    create_maintenance(&env.client(), maintenance_by_names("drain-4", "Drain", &["worker-4"])).await.expect("created");
    wait_for("drain-4 named too", Duration::from_secs(10), || async {
        let w = warnings(&hook.replay(&f01).await);
        if w.iter().any(|w| w.contains("alice-worker-1-2 and drain-4")) { Ok(()) } else { Err(format!("{w:?}")) }
    })
    .await;
}

/// SPEC 4.7: creating a maintenance whose budgets' windows never open outside their blackouts
/// within a year warns, as kubectl shows it; the same maintenance without such a budget does not.
#[tokio::test]
async fn a_maintenance_that_can_never_start_is_warned_about_at_creation() {
    let (env, _hook) = setup_or_skip!();
    let maintenance = |name: &str| {
        format!(
            "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeMaintenance\nmetadata: {{name: {name}}}\n\
             spec:\n  nodeSelector: {{nodeSelectorTerms: [{{matchExpressions: [{{key: pool, operator: In, values: [gpu]}}]}}]}}\n\
             \x20 stage: Idle\n  maxUnavailable: 1\n"
        )
    };
    let r = run(env.kubectl(&["create", "-f", "-"], Some(&maintenance("gpu-before"))).await);
    assert!(r.ok && !r.err.contains("cannot start"), "{}", r.err);
    // A window on New Year's Day only, inside a blackout of two years.
    let budget = "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {name: gpu-frozen}\n\
                  spec:\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [gpu]}]}]}\n\
                  \x20 maintenanceWindows: [{schedule: '0 0 1 1 *', duration: 1h}]\n\
                  \x20 blackouts: [{start: '2020-01-01T00:00:00Z', end: '2099-01-01T00:00:00Z', reason: frozen}]\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(budget)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = wait_for("the forecast warning", Duration::from_secs(10), || async {
        let name = format!("gpu-{}", k8s_openapi::jiff::Timestamp::now().as_millisecond());
        let r = run(env.kubectl(&["create", "-f", "-"], Some(&maintenance(&name))).await);
        if r.err.contains("cannot start within a year") { Ok(r) } else { Err(r.err) }
    })
    .await;
    assert!(r.ok, "a warning, not a denial: {}", r.err);
    assert!(
        r.err.contains(
            "Warning: 2 selected nodes cannot start within a year: no maintenance window opens outside the blackouts"
        ),
        "{}",
        r.err
    );
}
