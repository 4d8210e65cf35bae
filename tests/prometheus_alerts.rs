//! The reader of Prometheus' alerts for the health gates (SPEC 4.6, `healthGate.alerts`;
//! src/cluster/alerts.rs) against a real Prometheus on loopback (Debian's `prometheus`): of a
//! rule that fires at once (`for: 0s`) and one that stays pending (`for: 1h`), the reader
//! returns exactly the firing one's labels. tests/alerts_reader.rs covers the failures
//! against small local servers.
//!
//! Without the prometheus binary the test skips on a workstation and fails in CI (`CI=true`
//! or `NM_ENVTEST_REQUIRED=1`, as hack/test-all.sh sets); hack/test-all.sh counts it among
//! the Prometheus tests.

mod support;

use node_maintenance::cluster::alerts::{AlertLabels, AlertsClient, AlertsReader, AlertsView, PrometheusOptions};
use node_maintenance::metrics::Metrics;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::envtest::objects::wait_for;
use support::prometheus;

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_gives_the_firing_alert_and_not_the_pending_one() {
    let Some(binary) = prometheus::required_binary("prometheus") else { return };
    let groups = json!([{"name": "health-gate", "rules": [
        {"alert": "GateTestFiring", "expr": "vector(1)", "for": "0s",
         "labels": {"severity": "critical", "team": "platform"}, "annotations": {"summary": "fires at once"}},
        {"alert": "GateTestPending", "expr": "vector(1)", "for": "1h", "labels": {"severity": "critical"}},
    ]}]);
    let dir = tempfile::tempdir().expect("tempdir");
    let (_prometheus, url) = prometheus::start(&binary, dir.path(), &[], &groups, WAIT).await;

    // Both rules evaluated: Prometheus lists one alert firing and one pending.
    let api = format!("{url}/api/v1/alerts");
    wait_for("one alert firing and one pending", WAIT, || async {
        let body: Value =
            reqwest::get(&api).await.map_err(|e| e.to_string())?.json().await.map_err(|e| e.to_string())?;
        let mut states: Vec<String> = body["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                format!("{}={}", a["labels"]["alertname"].as_str().unwrap_or("?"), a["state"].as_str().unwrap_or("?"))
            })
            .collect();
        states.sort();
        if states == ["GateTestFiring=firing", "GateTestPending=pending"] { Ok(()) } else { Err(format!("{states:?}")) }
    })
    .await;

    let expected: AlertLabels = [("alertname", "GateTestFiring"), ("severity", "critical"), ("team", "platform")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    let client = AlertsClient::new(&url.parse().expect("URL"), None, Duration::from_secs(5)).expect("client");
    assert_eq!(client.firing().await.expect("read"), vec![expected.clone()]);

    let options =
        PrometheusOptions { url: Some(url.parse().expect("URL")), ca_file: None, timeout: Duration::from_secs(5) };
    let (metrics, _) = Metrics::new();
    let mut reader = AlertsReader::new(&options, metrics).expect("reader");
    assert_eq!(*reader.refresh(Instant::now()).await, AlertsView::Firing(vec![expected]));
}
