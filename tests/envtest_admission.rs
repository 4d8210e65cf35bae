//! Admission through a real kube-apiserver (SPEC 3): the webhook in cluster mode registered
//! by URL, the fixtures' kubectl steps (tests/fixtures/README.md) run by kubectl as admin,
//! alice (`ops`: may delete worker-1 and worker-2) and bob (`dev`: may delete no node) with
//! real RBAC behind the SubjectAccessReviews, defaults as stored, and warnings as kubectl
//! prints them.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::cluster::{Webhook, start_with_kubeconfig};
use support::envtest::objects::{create_fixture_nodes, wait_for};
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
        ("nodedisruptionbudget.spec.minAvailable", "Exactly one of"),
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
