//! `forecast` (SPEC 4.7) through the real binary, offline (`--nodes-file`, as
//! tests/cli_review.rs does): a manifest not applied yet under the weekend nights and
//! year-end freeze (golden text, JSON, the Gantt chart's SVG), a stored maintenance half way
//! through (its finished nodes are the basis), no basis, and the exit codes of bad input.

mod support;

use std::path::{Path, PathBuf};
use support::cli::run;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p.to_str().unwrap().to_owned()
}

fn golden(name: &str, got: &str) {
    let path = root().join("tests/golden/cli").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it, then review it)", path.display()));
    assert_eq!(got, want, "output differs from {}", path.display());
}

/// `n` Ready nodes of pool `general`; those in `held` carry the holders annotation of
/// `kernel` and its cordon.
fn pool(n: usize, held: &[usize]) -> String {
    (1..=n)
        .map(|i| {
            let (annotations, spec) = if held.contains(&i) {
                (
                    "annotations: {nodemaintenance.k8s.io/maintenances: '{\"maintenances\":[\"kernel\"],\"unschedulableBefore\":false}'}, ",
                    "spec: {unschedulable: true}\n",
                )
            } else {
                ("", "")
            };
            format!(
                "---\napiVersion: v1\nkind: Node\nmetadata: {{name: general-{i:02}, {annotations}labels: {{pool: general}}}}\n\
                 {spec}status: {{conditions: [{{type: Ready, status: 'True'}}]}}\n"
            )
        })
        .collect()
}

/// The pool's budget: five at a time, Friday and Saturday nights in Berlin, the year-end
/// freeze, and a health gate (assumed open).
const BUDGET: &str = "---
apiVersion: nodemaintenance.k8s.io/v1alpha1
kind: NodeDisruptionBudget
metadata: {name: general}
spec:
  maxUnavailable: 5
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: pool, operator: In, values: [general]}]
  maintenanceWindows: [{schedule: '0 22 * * 5,6', duration: 8h, timeZone: Europe/Berlin}]
  blackouts: [{start: '2026-12-18T00:00:00Z', end: '2027-01-04T00:00:00Z', reason: year-end freeze}]
  healthGate: {maxUnhealthy: 1}
";

const KERNEL: &str = "apiVersion: nodemaintenance.k8s.io/v1alpha1
kind: NodeMaintenance
metadata: {name: kernel}
spec:
  nodeSelector:
    nodeSelectorTerms:
    - matchExpressions: [{key: pool, operator: In, values: [general]}]
  stage: Drain
  maxUnavailable: 2
  reason: kernel upgrade
";

/// The example: 30 nodes two at a time, 3 hours each: two weekends before the
/// freeze, the last six nodes on the first Friday after it.
#[test]
fn a_manifest_not_applied_yet_is_forecast_under_its_windows_and_blackouts() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", &format!("{}{BUDGET}", pool(30, &[])));
    let manifest = write(dir.path(), "kernel.yaml", KERNEL);
    let args = ["forecast", "-f", &manifest, "--nodes-file", &cluster, "--at", "2026-12-01T10:00:00Z"];
    let (code, out) = run(&[&args[..], &["--node-duration", "3h"]].concat());
    assert_eq!(code, 0, "{out}");
    golden("forecast-weekend-nights.txt", &out);
    // The README's worked example is this one: its input files and its chart.
    let example = |name: &str| std::fs::read_to_string(root().join("examples/forecast").join(name)).unwrap();
    assert_eq!(example("cluster.yaml"), format!("{}{BUDGET}", pool(30, &[])));
    assert_eq!(example("kernel.yaml"), KERNEL);

    let (code, out) = run(&[&args[..], &["--node-duration", "3h", "-o", "json"]].concat());
    assert_eq!(code, 0, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["completionTime"], "2027-01-09T06:00:00Z");
    assert_eq!(json["basis"], serde_json::json!({"type": "Given", "seconds": 10800}));
    assert_eq!(json["nodes"].as_array().unwrap().len(), 30);
    assert_eq!(json["nodes"][29]["windowOpened"], "2027-01-08T21:00:00Z");
    let freeze: Vec<&serde_json::Value> =
        json["edges"].as_array().unwrap().iter().filter(|e| e["kind"] == "BlackoutStarts").collect();
    assert_eq!(freeze.len(), 1);
    assert_eq!(freeze[0]["reasons"], serde_json::json!(["year-end freeze"]));
    assert_eq!(json["assumptions"][0], serde_json::json!({"type": "HealthGatesOpen", "budgets": ["general"]}));

    // The Gantt chart: one expected bar per node (the late timeline, the same here, behind it
    // at 30 % opacity), every node named, the completion in the title.
    let (code, svg) = run(&[&args[..], &["--node-duration", "3h", "-o", "svg"]].concat());
    assert_eq!(code, 0, "{svg}");
    assert_eq!(svg, std::fs::read_to_string(root().join("docs/forecast-example.svg")).unwrap(), "the README's chart");
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"), "{svg}");
    assert!(svg.contains("NodeMaintenance kernel, 2 at a time: done Sat 2027-01-09 06:00Z"), "{svg}");
    let bars = |opacity: &str| {
        svg.lines()
            .filter(|l| l.starts_with("<rect") && l.contains(&format!("opacity=\"{opacity}\" fill=\"#1F77B4\"")))
            .count()
    };
    assert_eq!((bars("1"), bars("0.3")), (30 + 1, 30 + 1), "a bar per node and one in the legend");
    assert!((1..=30).all(|i| svg.contains(&format!(">\ngeneral-{i:02}\n<"))), "{svg}");

    // Without a basis: the first pair starts when the window opens; nothing else is known.
    let (code, out) = run(&args);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Basis: no basis: no node has finished yet\n"), "{out}");
    assert!(out.contains("  general-02  Fri 2026-12-04 21:00Z -> ?\n"), "{out}");
    assert!(
        out.contains("Not foreseen (no basis for the releases they wait for):\n  general-03  waits for a release\n")
    );
    assert!(out.contains("Completion: not foreseen: no basis (give --node-duration until a node has finished)\n"));
}

/// A stored maintenance on a Friday night: two nodes released after 1h and 2h (the basis:
/// median 1h, p90 2h, nearest rank), two draining since 22:00 and 23:00, two waiting. The
/// node draining since 22:00 is overdue on the expected timeline (expected now).
#[test]
fn a_stored_maintenance_is_forecast_from_its_finished_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let status = "status:
  nodeStatuses:
  - {nodeRef: {name: general-01}, phase: Released, heldTime: '2026-12-04T21:00:00Z', finishedTime: '2026-12-04T22:00:00Z'}
  - {nodeRef: {name: general-02}, phase: Released, heldTime: '2026-12-04T21:00:00Z', finishedTime: '2026-12-04T23:00:00Z'}
  - {nodeRef: {name: general-03}, phase: Draining, heldTime: '2026-12-04T22:00:00Z'}
  - {nodeRef: {name: general-04}, phase: Draining, heldTime: '2026-12-04T23:00:00Z'}
  - {nodeRef: {name: general-05}, phase: Waiting}
  - {nodeRef: {name: general-06}, phase: Waiting}
";
    let stored = format!("---\n{KERNEL}{status}");
    let cluster = write(dir.path(), "cluster.yaml", &format!("{}{BUDGET}{stored}", pool(6, &[3, 4])));
    let args =
        ["forecast", "kernel", "--nodes-file", &cluster, "--at", "2026-12-04T23:30:00Z", "--node-duration", "9h"];
    let (code, out) = run(&args);
    assert_eq!(code, 0, "{out}");
    golden("forecast-stored.txt", &out);
    let (_, out) = run(&[&args[..], &["-o", "json"]].concat());
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        json["basis"],
        serde_json::json!({"type": "FinishedNodes", "nodes": 2, "medianSeconds": 3600, "p90Seconds": 7200})
    );
    let node = |name: &str| json["nodes"].as_array().unwrap().iter().find(|n| n["node"] == name).unwrap().clone();
    assert_eq!(node("general-01")["state"], "Done");
    assert_eq!(
        (node("general-03")["state"].as_str(), node("general-03")["release"].as_str()),
        (Some("Started"), Some("2026-12-04T23:30:00Z"))
    );
    assert_eq!(node("general-03")["lateRelease"], "2026-12-05T00:00:00Z");
    assert_eq!(
        (node("general-05")["start"].as_str(), node("general-05")["lateStart"].as_str()),
        (Some("2026-12-04T23:30:00Z"), Some("2026-12-05T00:00:00Z"))
    );
    assert_eq!(json["completionTime"], "2026-12-05T01:00:00Z");
    assert_eq!(json["lateCompletionTime"], "2026-12-05T03:00:00Z");
}

#[test]
fn bad_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = write(dir.path(), "cluster.yaml", &format!("{}{BUDGET}", pool(2, &[])));
    for args in [
        &["forecast", "missing", "--nodes-file", &cluster][..],
        &["forecast", "--nodes-file", &cluster],
        &["forecast", "kernel", "--nodes-file", &cluster, "--node-duration", "3d"],
        &["forecast", "-f", &cluster, "--nodes-file", &cluster],
    ] {
        let (code, out) = run(args);
        assert_eq!(code, 2, "{args:?}: {out}");
    }
}
