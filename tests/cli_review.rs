//! `review` (the what-if) through the real binary: golden outputs offline for allowed,
//! denied and warning cases, an UPDATE transition, JSON output and exit codes. `review`
//! against a real apiserver as the current user is in tests/envtest_review_drain.rs.

mod support;

use std::path::{Path, PathBuf};
use support::cli::run;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn manifest(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

const GENERAL: &str = "apiVersion: nodemaintenance.k8s.io/v1alpha1
kind: NodeMaintenance
metadata: {name: general-pool-kernel-upgrade}
spec:
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: pool, operator: In, values: [general]}]
  stage: Drain
  drainPlan:
  - {podPriority: 5000, podType: Default, podSelector: {matchLabels: {app: postgres}}}
  reason: kernel upgrade
";

const ALL_NODES: &str = "apiVersion: nodemaintenance.k8s.io/v1alpha1
kind: NodeMaintenance
metadata: {name: everything}
spec:
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: kubernetes.io/os, operator: In, values: [linux]}]
";

fn golden(name: &str, got: &str) {
    let path = root().join("tests/golden/cli").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it, then review it)", path.display()));
    assert_eq!(got, want, "output differs from {}", path.display());
}

#[test]
fn offline_review_golden_outputs_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = root().join("tests/fixtures/nodes.yaml");
    let nodes = nodes.to_str().unwrap();
    let general = manifest(dir.path(), "general.yaml", GENERAL);
    let all = manifest(dir.path(), "all.yaml", ALL_NODES);

    let (code, out) = run(&["review", "-f", general.to_str().unwrap(), "--nodes-file", nodes]);
    assert_eq!(code, 0);
    golden("review-allowed.txt", &out);

    let (code, out) =
        run(&["review", "-f", general.to_str().unwrap(), "--nodes-file", nodes, "--as", "bob", "--as-group", "dev"]);
    assert_eq!(code, 1, "denied exits 1");
    golden("review-denied.txt", &out);

    let (code, out) = run(&["review", "-f", all.to_str().unwrap(), "--nodes-file", nodes]);
    assert_eq!(code, 0);
    golden("review-warnings.txt", &out);

    let (code, out) = run(&["review", "-f", all.to_str().unwrap(), "--nodes-file", nodes, "-o", "json"]);
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["selectedCount"], 9);
    assert_eq!(json["selected"]["control-plane"].as_array().unwrap().len(), 3);
    assert!(json["warnings"][0].as_str().unwrap().contains("all 9 nodes"));

    let (code, _) = run(&["review", "--nodes-file", nodes]);
    assert_eq!(code, 2, "usage error exits 2");
    let (code, _) = run(&["review", "-f", "/nonexistent.yaml", "--nodes-file", nodes]);
    assert_eq!(code, 2);
}

#[test]
fn offline_review_of_an_update_says_whether_the_transition_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    // The cluster file holds the stored maintenance (as `kubectl get nodes,nm -o yaml` would).
    let nodes = std::fs::read_to_string(root().join("tests/fixtures/nodes.yaml")).unwrap();
    let stored = GENERAL
        .replace("stage: Drain", "stage: Drain\n  drainPlan: []")
        .replace("  drainPlan: []\n  drainPlan:", "  drainPlan:");
    let defaulted = {
        let mut v: serde_json::Value = serde_saphyr::from_str(&stored).unwrap();
        let user: Vec<node_maintenance::api::DrainPlanEntry> =
            serde_json::from_value(v["spec"]["drainPlan"].clone()).unwrap();
        v["spec"]["drainPlan"] = serde_json::to_value(node_maintenance::api::default_plan(&user)).unwrap();
        serde_json::to_string(&v).unwrap()
    };
    let cluster = manifest(dir.path(), "cluster.yaml", &format!("{nodes}\n---\n{defaulted}\n"));
    let backwards = manifest(dir.path(), "backwards.yaml", &GENERAL.replace("stage: Drain", "stage: Cordon"));
    let (code, out) = run(&[
        "review",
        "-f",
        backwards.to_str().unwrap(),
        "--nodes-file",
        cluster.to_str().unwrap(),
        "--against",
        "general-pool-kernel-upgrade",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("(UPDATE)") && out.contains("may not move backwards from Drain to Cordon"), "{out}");
}

const WORKER_1: &str = "apiVersion: nodemaintenance.k8s.io/v1alpha1
kind: NodeMaintenance
metadata: {name: worker-1-reboot}
spec:
  nodeSelector:
    nodeSelectorTerms:
    - matchFields: [{key: metadata.name, operator: In, values: [worker-1]}]
  stage: Drain
  reason: reboot
";

/// `manifest` as stored by the apiserver: defaulted drainPlan, a creation time, `stage`.
fn stored(manifest: &str, stage: &str, created: &str) -> String {
    let mut v: serde_json::Value = serde_saphyr::from_str(manifest).unwrap();
    v["spec"]["drainPlan"] = serde_json::to_value(node_maintenance::api::default_plan(&[])).unwrap();
    v["spec"]["stage"] = stage.into();
    v["metadata"]["creationTimestamp"] = created.into();
    serde_json::to_string(&v).unwrap()
}

/// Issue 16: the drain preview over a recorded `kubectl get nodes,pods,pdb -A -o yaml`
/// (tests/fixtures/cluster-dump.yaml): a Deployment behind a PDB with 1 disruption allowed, a
/// StatefulSet behind a PDB at 0, a Job, a bare pod with an emptyDir, two DaemonSets (one
/// tolerating every taint), a mirror pod, and a finished Job pod.
#[test]
fn offline_drain_preview_golden_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let dump = root().join("tests/fixtures/cluster-dump.yaml");
    let dump = dump.to_str().unwrap();
    // The general pool, default plan (the preview does not depend on the stage).
    let general = root().join("tests/fixtures/manifests/nm-general.yaml");
    let worker_1 = manifest(dir.path(), "worker-1.yaml", WORKER_1);

    // The pool: stuck behind the StatefulSet's PDB at 0 in the first step.
    let (code, out) = run(&["review", "-f", general.to_str().unwrap(), "--nodes-file", dump]);
    assert_eq!(code, 0, "{out}");
    golden("review-drain-stuck.txt", &out);

    // One node: drains; the mirror pod and the tolerating DaemonSet pod stay.
    let (code, out) = run(&["review", "-f", worker_1.to_str().unwrap(), "--nodes-file", dump, "--verbose"]);
    assert_eq!(code, 0, "{out}");
    golden("review-drain-verbose.txt", &out);

    let (code, out) = run(&["review", "-f", worker_1.to_str().unwrap(), "--nodes-file", dump, "-o", "json"]);
    assert_eq!(code, 0, "{out}");
    golden("review-drain.json", &out);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let preview = &json["drainPreview"];
    assert_eq!(preview["outcome"]["drained"], true);
    assert_eq!(preview["ownerResolution"], "podTemplateHash");
    assert_eq!(preview["steps"][0]["byOwner"][0]["owner"]["kind"], "Deployment");

    // Without Pods in the file, no preview (the admission goldens above stay as they were).
    let (_, out) = run(&[
        "review",
        "-f",
        worker_1.to_str().unwrap(),
        "--nodes-file",
        dump.replace("cluster-dump", "nodes").as_str(),
    ]);
    assert!(!out.contains("Drain preview"), "{out}");

    // UPDATE of a stored maintenance while an older one drains the pool: held back by it.
    let nodes = std::fs::read_to_string(dump).unwrap();
    let cluster = manifest(
        dir.path(),
        "cluster.yaml",
        &format!(
            "{nodes}\n---\n{}\n---\n{}\n",
            stored(&std::fs::read_to_string(&general).unwrap(), "Drain", "2026-01-01T00:00:00Z"),
            stored(WORKER_1, "Idle", "2026-01-02T00:00:00Z"),
        ),
    );
    let (code, out) = run(&[
        "review",
        "-f",
        worker_1.to_str().unwrap(),
        "--nodes-file",
        cluster.to_str().unwrap(),
        "--against",
        "worker-1-reboot",
    ]);
    assert_eq!(code, 0, "{out}");
    golden("review-drain-against.txt", &out);
    assert!(out.contains("Held back by: general-pool-kernel-upgrade"), "{out}");
}

/// Issue 20: a rolling maintenance under a NodeDisruptionBudget (both in the cluster file)
/// shows its roll order and why the other nodes wait.
#[test]
fn offline_review_previews_the_roll_order_under_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    // Four Ready workers (the recorded fixture's nodes have no kubelet: not Ready, so already
    // unavailable and free to take) and a budget of one over them.
    let mut cluster = String::new();
    for i in 1..=4 {
        cluster.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: worker-{i}, labels: {{pool: general}}}}\n\
             status: {{conditions: [{{type: Ready, status: 'True'}}]}}\n"
        ));
    }
    cluster.push_str(
        "---\napiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {name: general}\n\
         spec:\n  maxUnavailable: 1\n  nodeSelector:\n    nodeSelectorTerms:\n\
         \x20   - matchExpressions: [{key: pool, operator: In, values: [general]}]\n",
    );
    let cluster = manifest(dir.path(), "cluster.yaml", &cluster);
    let rolling =
        manifest(dir.path(), "rolling.yaml", &GENERAL.replace("  stage: Drain", "  stage: Drain\n  maxUnavailable: 2"));
    let (code, out) = run(&["review", "-f", rolling.to_str().unwrap(), "--nodes-file", cluster.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    golden("review-roll.txt", &out);
    let (_, out) =
        run(&["review", "-f", rolling.to_str().unwrap(), "--nodes-file", cluster.to_str().unwrap(), "-o", "json"]);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let roll = &json["rollPreview"];
    assert_eq!(roll["nodesAtOnce"], 2);
    assert_eq!(roll["budgets"], serde_json::json!(["general"]));
    assert_eq!(roll["waves"].as_array().unwrap().len(), 4, "the budget of one lets one node go at a time: {roll}");
}

/// A budget with a closed maintenance window and an alert gate over the reviewed nodes: the
/// roll preview says when the window opens, that every node waits for it, and that the alert
/// gate was not evaluated (review reads no Prometheus).
#[test]
fn offline_review_says_when_the_window_opens_and_that_alerts_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = String::new();
    for i in 1..=2 {
        cluster.push_str(&format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: worker-{i}, labels: {{pool: general}}}}\n\
             status: {{conditions: [{{type: Ready, status: 'True'}}]}}\n"
        ));
    }
    // One minute a year: closed whenever this runs (but for that minute).
    cluster.push_str(
        "---\napiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {name: new-year}\n\
         spec:\n  nodeSelector:\n    nodeSelectorTerms:\n\
         \x20   - matchExpressions: [{key: pool, operator: In, values: [general]}]\n\
         \x20 maintenanceWindows: [{schedule: '0 0 1 1 *', duration: 1m}]\n\
         \x20 healthGate: {alerts: {matchers: ['{severity=\"critical\"}']}}\n",
    );
    let cluster = manifest(dir.path(), "cluster.yaml", &cluster);
    let general = manifest(dir.path(), "general.yaml", GENERAL);
    let args = ["review", "-f", general.to_str().unwrap(), "--nodes-file", cluster.to_str().unwrap()];
    let (code, out) = run(&args);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(
            "Roll preview (NodeDisruptionBudgets: new-year):\n  maintenance window of new-year: closed, next opens "
        ),
        "{out}"
    );
    assert!(
        out.contains("  waiting now (worker-1, worker-2): Waiting for the maintenance window of NodeDisruptionBudget new-year (opens "),
        "{out}"
    );
    assert!(
        out.contains("  alert gates not evaluated (review reads no Prometheus; taken as open): new-year\n"),
        "{out}"
    );
    let (_, out) = run(&[&args[..], &["-o", "json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let roll = &json["rollPreview"];
    assert_eq!(roll["windows"]["new-year"]["open"], false, "{roll}");
    assert!(roll["windows"]["new-year"]["nextOpensAt"].as_str().unwrap().ends_with("-01-01T00:00:00Z"), "{roll}");
    assert_eq!(roll["alertsNotEvaluated"], serde_json::json!(["new-year"]));
    assert_eq!(roll["waves"], serde_json::json!([]));
}
