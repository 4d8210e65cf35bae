//! Issue 23 on a real kube-apiserver with a real Prometheus (Debian's `prometheus` package,
//! installed by hack/setup-test-deps.sh): `serve` in cluster mode, scraped by a Prometheus on
//! loopback that loads the chart's own PrometheusRule (rendered by hack/render-chart.sh with a
//! short `for:` on the drain-timeout alert), sees `NodeMaintenanceDrainTimedOut` firing once a
//! real drain passes its `spec.drainTimeout`; and every metric the rules and the dashboard name
//! is on `/metrics` of a running `serve`, so renaming a metric fails here.
//!
//! Without the prometheus binary the tests skip on a workstation and fail in CI (`CI=true`
//! or `NM_ENVTEST_REQUIRED=1`, as hack/test-all.sh sets), like the real-apiserver tier itself.

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::envtest::objects::{create_maintenance, create_node, create_pods, maintenance_json, wait_for};
use support::envtest::{Envtest, Options};
use support::prometheus::{self, INTERVAL_SECONDS};

/// `for:` of the drain-timeout alert in this test (the chart's default is 1m).
const FOR_SECONDS: u64 = 5;
const DRAIN_TIMEOUT_SECONDS: u64 = 3;
const WAIT: Duration = Duration::from_secs(60);

/// The chart's PrometheusRule (release `nm`, namespace `nm-system`) selecting the series of
/// scrape job `nm`, with `extra` further `--set` assignments; returns its rule groups.
fn chart_rule_groups(extra: &[&str]) -> Value {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let mut sets = vec!["metrics.prometheusRule.enabled=true", "metrics.prometheusRule.selector=job=\"nm\""];
    sets.extend_from_slice(extra);
    let status = Command::new("bash")
        .arg(repo.join("hack/render-chart.sh"))
        .arg(out.path())
        .args(["--namespace", "nm-system", "--skip-crds"])
        .args(sets.iter().flat_map(|s| ["--set", s]))
        .status()
        .expect("hack/render-chart.sh runs");
    assert!(status.success(), "hack/render-chart.sh failed ({status})");
    let text = std::fs::read_to_string(out.path()).expect("rendered chart");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("rendered chart parses");
    let rule = docs.into_iter().find(|d| d["kind"] == "PrometheusRule").expect("a PrometheusRule");
    rule["spec"]["groups"].clone()
}

/// A pod on `w1` in `default` owned by a ReplicaSet, with `extra` merged into its JSON.
fn pod(name: &str, extra: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "rs", "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]},
        "spec": {"nodeName": "w1", "containers": [{"name": "c", "image": "i"}]},
    });
    json_patch::merge(&mut p, &extra);
    serde_json::from_value(p).expect("a Pod")
}

/// The dashboard shipped in the chart.
fn dashboard() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/node-maintenance/dashboards/node-maintenance.json");
    std::fs::read_to_string(path).expect("dashboard JSON")
}

/// Every `node_maintenance_*` name in `text` (PromQL expressions, dashboard JSON).
fn metric_names(text: &str) -> BTreeSet<String> {
    text.match_indices("node_maintenance_")
        .map(|(at, _)| text[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect())
        .collect()
}

/// The sample names `/metrics` (OpenMetrics text) can carry: every family of a `# TYPE`
/// line with the suffixes of its type.
fn exported_names(metrics: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in metrics.lines() {
        let mut words = line.strip_prefix("# TYPE ").unwrap_or_default().split_whitespace();
        let (Some(family), Some(kind)) = (words.next(), words.next()) else { continue };
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        names.extend(suffixes.iter().map(|s| format!("{family}{s}")));
    }
    names
}

/// `serve` in cluster mode as `admin`, controller on; returns it and its `/metrics` URL.
async fn serve(env: &Envtest) -> (support::cluster::Webhook, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let hook = support::cluster::start_with_kubeconfig(dir, &env.admin_kubeconfig, &["--controller=true"]).await;
    hook.wait_ready(WAIT).await;
    let metrics = format!("http://{}/metrics", hook.bound.metrics_addr);
    (hook, metrics)
}

/// The alerts Prometheus reports (`/api/v1/alerts`).
async fn alerts(prometheus: &str) -> Vec<Value> {
    let body: Value = reqwest::get(format!("{prometheus}/api/v1/alerts"))
        .await
        .expect("GET /api/v1/alerts")
        .json()
        .await
        .expect("alerts JSON");
    body["data"]["alerts"].as_array().cloned().unwrap_or_default()
}

fn seconds_since(earlier: Timestamp, later: Timestamp) -> f64 {
    later.duration_since(earlier).as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_of_the_rules_and_the_dashboard_is_on_metrics() {
    let used: BTreeSet<String> =
        metric_names(&chart_rule_groups(&[]).to_string()).into_iter().chain(metric_names(&dashboard())).collect();
    // The extraction itself: both sources name their metrics, among them the ones issue 23 added.
    for name in [
        "node_maintenance_drain_deadline_timestamp_seconds",
        "node_maintenance_leader",
        "node_maintenance_serving_certificate_expiration_timestamp_seconds",
        "node_maintenance_admission_request_duration_seconds_bucket",
        "node_maintenance_nodes",
        "node_maintenance_budget_gate_closed_since_timestamp_seconds",
        "node_maintenance_budget_pause_requests",
        "node_maintenance_budget_window_next_open_timestamp_seconds",
        "node_maintenance_forecast_completion_timestamp_seconds",
        "node_maintenance_forecast_late_completion_timestamp_seconds",
        "node_maintenance_forecast_next_blackout_start_timestamp_seconds",
    ] {
        assert!(used.contains(name), "{name} in {used:?}");
    }
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    create_node(&c, "w1", &[]).await;
    create_node(&c, "w2", &[("pool", "held")]).await;
    create_pods(&c, &[pod("web", json!({}))]).await;
    // A paused budget whose only window (a minute a year) is closed, over w2 alone so that
    // the drain of w1 goes on: its gate series (closed since, next opening) exist only then.
    let budget = "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {name: held}\n\
                  spec:\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [held]}]}]}\n\
                  \x20 maintenanceWindows: [{schedule: '0 0 1 1 *', duration: 1m}]\n\
                  \x20 pauseRequests: [{name: test, reason: metrics}]\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(budget)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A node without pods under a budget with a blackout far ahead: its maintenance drains it
    // at once, so its forecast has a basis (one finished node) and a next blackout start.
    create_node(&c, "w3", &[("pool", "forecast")]).await;
    let freeze = "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {name: freeze}\n\
                  spec:\n  nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [forecast]}]}]}\n\
                  \x20 blackouts: [{start: '2099-12-18T00:00:00Z', end: '2100-01-04T00:00:00Z', reason: year-end freeze}]\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(freeze)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (hook, metrics_url) = serve(&env).await;
    // Labelled families appear with their first series: an admission request (and its
    // SubjectAccessReview), a drain (an eviction, pods pending) and the budget make them.
    let review = support::cluster::recorded("12-create-by-alice-matchfields-validate").review();
    let answer = hook.client.post(hook.url("/validate?timeout=10s")).json(&review).send().await.expect("POST");
    assert_eq!(answer.status(), 200);
    create_maintenance(&c, support::controller::maintenance("m", "Drain", &["w1"], None)).await.expect("created");
    create_maintenance(&c, support::controller::maintenance("f", "Drain", &["w3"], None)).await.expect("created");
    let missing = wait_for("every metric of the rules and the dashboard on /metrics", WAIT, || async {
        let text =
            reqwest::get(&metrics_url).await.map_err(|e| e.to_string())?.text().await.map_err(|e| e.to_string())?;
        let exported = exported_names(&text);
        let missing: Vec<&String> = used.iter().filter(|n| !exported.contains(*n)).collect();
        if missing.is_empty() { Ok(()) } else { Err(format!("not exported: {missing:?}\n{text}")) }
    });
    missing.await;
    // The same budget as `kubectl get ndb` prints it: the gate that holds it and its window.
    let table = wait_for("kubectl get ndb shows the budget paused", WAIT, || async {
        let out = env.kubectl(&["get", "ndb", "held", "-o", "wide"], None).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
        if rows.len() == 2 && rows[1].contains(&"Paused") {
            Ok(rows.iter().map(|r| r.join(" ")).collect::<Vec<_>>())
        } else {
            Err(text)
        }
    })
    .await;
    assert!(table[0].starts_with("NAME SELECTED UNAVAILABLE ALLOWED GATE WINDOW NEXT WINDOW AGE"), "{table:?}");
    // w2 has no kubelet (not Ready): unavailable already, and nothing allowed while paused.
    assert!(table[1].starts_with("held 1 1 0 Paused false "), "{table:?}");
    assert!(table[1].contains("-01-01T00:00:00Z"), "the next opening: {table:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_fires_the_drain_timeout_alert_of_the_chart() {
    let Some(prometheus_bin) = prometheus::required_binary("prometheus") else { return };
    let groups =
        chart_rule_groups(&[&format!("metrics.prometheusRule.alerts.NodeMaintenanceDrainTimedOut.for={FOR_SECONDS}s")]);
    let env = envtest_or_skip!(Options::default());
    let c = env.client();
    create_node(&c, "w1", &[]).await;
    // An opted-out pod: never evicted, it holds the drain until the deadline passes.
    create_pods(&c, &[pod("keep", json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}))])
        .await;

    let (_hook, metrics_url) = serve(&env).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let target = metrics_url.trim_start_matches("http://").trim_end_matches("/metrics");
    let (prometheus, prom_url) = prometheus::start(&prometheus_bin, dir.path(), &[target], &groups, WAIT).await;

    let mut nm = support::controller::maintenance("m", "Drain", &["w1"], None);
    nm["spec"]["drainTimeout"] = json!(format!("{DRAIN_TIMEOUT_SECONDS}s"));
    create_maintenance(&c, nm).await.expect("created");
    let drain_start = wait_for("the Drain stage started", WAIT, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let stages = m["status"]["stageStatuses"].as_array().cloned().unwrap_or_default();
        let start = stages.iter().find(|s| s["name"] == "Drain").and_then(|s| s["startTimestamp"].as_str());
        start.and_then(|s| s.parse::<Timestamp>().ok()).ok_or_else(|| m["status"].to_string())
    })
    .await;
    let deadline =
        drain_start.checked_add(Duration::from_secs(DRAIN_TIMEOUT_SECONDS)).expect("a representable deadline");

    // Pending first (the condition holds, `for:` has not elapsed), then firing.
    let pending_seen = AtomicBool::new(false);
    let firing = wait_for("NodeMaintenanceDrainTimedOut firing", WAIT, || {
        let (prom_url, pending_seen) = (&prom_url, &pending_seen);
        async move {
            let all = alerts(prom_url).await;
            let mine = all.iter().find(|a| a["labels"]["alertname"] == "NodeMaintenanceDrainTimedOut");
            match mine.map(|a| (a["state"].as_str().unwrap_or_default(), a)) {
                Some(("firing", a)) => Ok((a.clone(), Timestamp::now())),
                Some(("pending", _)) => {
                    pending_seen.store(true, Ordering::Relaxed);
                    Err("pending".to_owned())
                }
                _ => Err(format!("{all:?}")),
            }
        }
    })
    .await;
    let (alert, fired_at) = firing;
    assert!(pending_seen.load(Ordering::Relaxed), "the alert waited for its `for:` before firing");
    assert_eq!(alert["labels"]["maintenance"], "m", "{alert:#}");
    assert_eq!(alert["labels"]["severity"], "warning", "{alert:#}");
    assert_eq!(alert["annotations"]["runbook_url"], "docs/runbooks/NodeMaintenanceDrainTimedOut.md");
    let description = alert["annotations"]["description"].as_str().unwrap_or_default();
    assert!(description.starts_with("The drain of NodeMaintenance m has not finished"), "{description}");
    let active_at: Timestamp = alert["activeAt"].as_str().and_then(|t| t.parse().ok()).expect("activeAt");
    let (to_active, to_firing) = (seconds_since(deadline, active_at), seconds_since(deadline, fired_at));
    eprintln!(
        "drain deadline {deadline}: alert pending after {to_active:.1} s, firing seen after {to_firing:.1} s (for: {FOR_SECONDS}s)"
    );
    // Pending within a scrape and an evaluation (plus a second of timestamp rounding) of the
    // deadline; firing `for:` later, give or take an evaluation and this test's polling.
    let slack = (2 * INTERVAL_SECONDS + 1) as f64;
    assert!(to_active <= slack, "pending {to_active:.1} s after the deadline");
    assert!(to_firing >= FOR_SECONDS as f64 - 1.0, "fired {to_firing:.1} s after the deadline: before its for:");
    assert!(to_firing <= FOR_SECONDS as f64 + slack + 1.0, "firing {to_firing:.1} s after the deadline");
    drop(prometheus);
}
