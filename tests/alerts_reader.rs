//! The reader of Prometheus' alerts for the health gates (SPEC 4.6, `healthGate.alerts`;
//! src/cluster/alerts.rs) against small local servers: firing and pending alerts, every kind
//! of failure (HTTP status, bad JSON, `status: error`, timeout, too large a body, no
//! connection, an untrusted certificate), TLS with `--prometheus-ca-file`, the 15 s minimum
//! interval between reads (an injected clock) and the flags. tests/prometheus_alerts.rs reads
//! a real Prometheus.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use node_maintenance::cluster::alerts::{
    AlertLabels, AlertsClient, AlertsError, AlertsReader, AlertsView, MAX_BODY_BYTES, PrometheusOptions, READ_INTERVAL,
};
use node_maintenance::metrics::{AlertReadLabels, Metrics};
use serde_json::json;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Serves `app` over plain HTTP on a loopback port.
async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A server answering every GET of `/api/v1/alerts` with `status` and `body`.
async fn answering(status: StatusCode, body: String) -> SocketAddr {
    serve(Router::new().route("/api/v1/alerts", get(move || async move { (status, body) }))).await
}

fn client(addr: SocketAddr, timeout: Duration) -> AlertsClient {
    AlertsClient::new(&format!("http://{addr}").parse().unwrap(), None, timeout).unwrap()
}

fn alert(state: &str, name: &str) -> serde_json::Value {
    json!({"labels": {"alertname": name, "severity": "critical"}, "annotations": {"summary": "s"},
           "state": state, "activeAt": "2026-11-26T10:00:00Z", "value": "1e+00"})
}

fn alerts_body(alerts: &[serde_json::Value]) -> String {
    json!({"status": "success", "data": {"alerts": alerts}}).to_string()
}

fn labels(name: &str) -> AlertLabels {
    [("alertname", name), ("severity", "critical")].map(|(k, v)| (k.to_owned(), v.to_owned())).into()
}

#[tokio::test]
async fn only_firing_alerts_count_and_a_path_in_the_url_is_kept() {
    let body =
        alerts_body(&[alert("firing", "A"), alert("pending", "B"), alert("inactive", "C"), alert("firing", "D")]);
    let app = Router::new().route("/prometheus/api/v1/alerts", get(move || async move { body }));
    let addr = serve(app).await;
    for url in [format!("http://{addr}/prometheus"), format!("http://{addr}/prometheus/")] {
        let c = AlertsClient::new(&url.parse().unwrap(), None, Duration::from_secs(5)).unwrap();
        assert_eq!(c.firing().await.unwrap(), vec![labels("A"), labels("D")], "{url}");
    }
    let none = answering(StatusCode::OK, alerts_body(&[alert("pending", "B")])).await;
    assert_eq!(client(none, Duration::from_secs(5)).firing().await.unwrap(), vec![]);
}

#[tokio::test]
async fn an_http_error_says_the_status_and_prometheus_error_but_no_password() {
    let body = json!({"status": "error", "errorType": "unavailable", "error": "TSDB not ready"}).to_string();
    let addr = answering(StatusCode::SERVICE_UNAVAILABLE, body).await;
    let url = format!("http://admin:s3cret@{addr}").parse().unwrap();
    let e = AlertsClient::new(&url, None, Duration::from_secs(5)).unwrap().firing().await.unwrap_err();
    assert!(matches!(e, AlertsError::Status { status: 503, .. }), "{e:?}");
    let text = e.to_string();
    assert!(text.contains("HTTP 503: TSDB not ready") && text.contains("/api/v1/alerts"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");

    let addr = answering(StatusCode::INTERNAL_SERVER_ERROR, "upstream broke".into()).await;
    let e = client(addr, Duration::from_secs(5)).firing().await.unwrap_err();
    assert!(e.to_string().ends_with("HTTP 500: upstream broke"), "{e}");
}

#[tokio::test]
async fn a_body_that_is_not_the_alerts_json_is_an_error() {
    for body in ["<html>", "{}", r#"{"status":"success"}"#, r#"{"status":"success","data":{"alerts":[{"state":1}]}}"#] {
        let addr = answering(StatusCode::OK, body.into()).await;
        let e = client(addr, Duration::from_secs(5)).firing().await.unwrap_err();
        assert!(matches!(e, AlertsError::Invalid { .. }), "{body}: {e:?}");
    }
}

#[tokio::test]
async fn a_status_other_than_success_is_an_error() {
    let body = json!({"status": "error", "errorType": "internal", "error": "rule manager down"}).to_string();
    let e = client(answering(StatusCode::OK, body).await, Duration::from_secs(5)).firing().await.unwrap_err();
    assert!(matches!(e, AlertsError::Unsuccessful { .. }), "{e:?}");
    assert!(e.to_string().ends_with(r#"status "error": internal: rule manager down"#), "{e}");
}

#[tokio::test]
async fn no_answer_within_the_timeout_is_a_timeout() {
    let slow = || async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        alerts_body(&[])
    };
    let addr = serve(Router::new().route("/api/v1/alerts", get(slow))).await;
    let started = Instant::now();
    let e = client(addr, Duration::from_millis(300)).firing().await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(matches!(e, AlertsError::Timeout { .. }), "{e:?}");
    assert!(e.to_string().ends_with("no answer within 300ms"), "{e}");
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let e = client(addr, Duration::from_secs(5)).firing().await.unwrap_err();
    assert!(matches!(e, AlertsError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().to_lowercase().contains("refused"), "the cause is named: {e}");
}

#[tokio::test]
async fn a_body_above_the_limit_is_refused_with_or_without_a_length() {
    let big =
        || format!("{{\"status\":\"success\",\"data\":{{\"alerts\":[]}},\"pad\":\"{}\"}}", "x".repeat(MAX_BODY_BYTES));
    let streamed = move || async move {
        // Chunks without a Content-Length: the limit applies while reading.
        let chunks =
            big().into_bytes().chunks(1 << 20).map(|c| Ok::<_, std::io::Error>(c.to_vec())).collect::<Vec<_>>();
        axum::body::Body::from_stream(futures::stream::iter(chunks))
    };
    let app = Router::new()
        .route("/sized/api/v1/alerts", get(move || async move { big() }))
        .route("/streamed/api/v1/alerts", get(streamed));
    let addr = serve(app).await;
    for path in ["sized", "streamed"] {
        let url = format!("http://{addr}/{path}").parse().unwrap();
        let e = AlertsClient::new(&url, None, Duration::from_secs(10)).unwrap().firing().await.unwrap_err();
        assert!(matches!(e, AlertsError::TooLarge { limit: MAX_BODY_BYTES, .. }), "{path}: {e:?}");
    }
}

#[tokio::test]
async fn https_is_trusted_with_the_ca_file_and_refused_without() {
    use node_maintenance::server::tls::{CertPaths, CertStore, server_config};
    let dir = tempfile::tempdir().unwrap();
    let dev = node_maintenance::server::devcert::ensure_dev_certs(dir.path(), &[]).unwrap();
    let store = CertStore::load(CertPaths { cert: dev.cert, key: dev.key }).unwrap();
    let tls = Arc::new(server_config(store, None).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let body = alerts_body(&[alert("firing", "A")]);
    let app = Router::new().route("/api/v1/alerts", get(move || async move { body }));
    let limits = node_maintenance::server::Limits::default();
    tokio::spawn(node_maintenance::server::serve_https(listener, tls, app, limits, std::future::pending()));
    let url: reqwest::Url = format!("https://localhost:{port}").parse().unwrap();

    let trusted = AlertsClient::new(&url, Some(&dev.ca), Duration::from_secs(5)).unwrap();
    assert_eq!(trusted.firing().await.unwrap(), vec![labels("A")]);
    let untrusted = AlertsClient::new(&url, None, Duration::from_secs(5)).unwrap();
    let e = untrusted.firing().await.unwrap_err();
    assert!(matches!(e, AlertsError::Unreachable { .. }), "{e:?}");
    assert!(e.to_string().contains("UnknownIssuer"), "the TLS cause is named: {e}");
}

#[test]
fn a_ca_file_without_a_certificate_or_missing_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not PEM\n").unwrap();
    let url: reqwest::Url = "https://prometheus:9090".parse().unwrap();
    let e = AlertsClient::new(&url, Some(&empty), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, AlertsError::CaPem { .. }), "{e:?}");
    let e = AlertsClient::new(&url, Some(&dir.path().join("missing.pem")), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, AlertsError::CaFile { .. }), "{e:?}");
}

fn reads(metrics: &Metrics, result: &'static str) -> u64 {
    metrics.alert_reads.get_or_create(&AlertReadLabels { result }).get()
}

#[tokio::test]
async fn the_reader_reads_at_most_every_interval_and_fails_closed_until_a_good_read() {
    let gets = Arc::new(AtomicUsize::new(0));
    let fail = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handler = {
        let (gets, fail) = (gets.clone(), fail.clone());
        move || async move {
            gets.fetch_add(1, Ordering::SeqCst);
            if fail.load(Ordering::SeqCst) {
                (StatusCode::BAD_GATEWAY, String::new())
            } else {
                (StatusCode::OK, alerts_body(&[alert("firing", "A")]))
            }
        }
    };
    let addr = serve(Router::new().route("/api/v1/alerts", get(handler))).await;
    let (metrics, registry) = Metrics::new();
    let options = PrometheusOptions {
        url: Some(format!("http://{addr}").parse().unwrap()),
        ca_file: None,
        timeout: Duration::from_secs(5),
    };
    let mut reader = AlertsReader::new(&options, metrics.clone()).unwrap();
    let t0 = Instant::now();
    assert!(matches!(*reader.snapshot(), AlertsView::Failed(_)), "closed before the first read");
    assert_eq!(reader.next_read_at(t0), Some(t0), "due at once");

    let firing = AlertsView::Firing(vec![labels("A")]);
    assert_eq!(*reader.refresh(t0).await, firing);
    assert_eq!(reader.next_read_at(t0), Some(t0 + READ_INTERVAL));
    fail.store(true, Ordering::SeqCst);
    for later in [Duration::ZERO, Duration::from_secs(1), READ_INTERVAL - Duration::from_millis(1)] {
        assert_eq!(*reader.refresh(t0 + later).await, firing, "the last outcome, not read again");
    }
    assert_eq!(gets.load(Ordering::SeqCst), 1, "one GET within the interval");

    let t1 = t0 + READ_INTERVAL;
    let failed = reader.refresh(t1).await;
    assert!(matches!(&*failed, AlertsView::Failed(m) if m.contains("HTTP 502")), "{failed:?}");
    assert_eq!(*reader.refresh(t1 + Duration::from_secs(14)).await, *failed, "closed until the next read");
    assert_eq!(reader.next_read_at(t1), Some(t1 + READ_INTERVAL));
    fail.store(false, Ordering::SeqCst);
    assert_eq!(*reader.refresh(t1 + READ_INTERVAL).await, firing, "open again after a good read");
    assert_eq!(*reader.snapshot(), firing);
    assert_eq!(gets.load(Ordering::SeqCst), 3);
    assert_eq!((reads(&metrics, "success"), reads(&metrics, "http_error")), (2, 1));
    let text = node_maintenance::metrics::encode(&registry);
    assert!(text.contains("node_maintenance_alert_read_duration_seconds_count 3"), "every read timed: {text}");
}

#[tokio::test]
async fn without_a_url_the_reader_never_reads_and_stays_closed() {
    let (metrics, registry) = Metrics::new();
    let options = PrometheusOptions { url: None, ca_file: None, timeout: Duration::from_secs(5) };
    let mut reader = AlertsReader::new(&options, metrics.clone()).unwrap();
    let now = Instant::now();
    assert_eq!(*reader.refresh(now).await, AlertsView::NotConfigured);
    assert_eq!(reader.next_read_at(now), None, "nothing to wake for");
    // Every result is exported at 0 (so `rate()` sees the first failure), and stays there.
    let text = node_maintenance::metrics::encode(&registry);
    for result in AlertReadLabels::RESULTS {
        let line = format!("node_maintenance_alert_reads_total{{result=\"{result}\"}} 0");
        assert!(text.contains(&line), "{line} in {text}");
    }
}

#[derive(clap::Parser)]
struct Flags {
    #[command(flatten)]
    prometheus: PrometheusOptions,
}

#[test]
fn the_flags_default_to_no_url_and_5s_and_refuse_nonsense() {
    use clap::Parser;
    let parse = |args: &[&str]| Flags::try_parse_from(std::iter::once("serve").chain(args.iter().copied()));
    let default = parse(&[]).unwrap().prometheus;
    assert_eq!((default.url, default.ca_file, default.timeout), (None, None, Duration::from_secs(5)));
    let set = parse(&[
        "--prometheus-url",
        "https://prom:9090/x",
        "--prometheus-ca-file",
        "/ca/ca.crt",
        "--prometheus-timeout",
        "2s",
    ])
    .unwrap()
    .prometheus;
    assert_eq!(set.url.map(String::from).as_deref(), Some("https://prom:9090/x"));
    assert_eq!((set.ca_file, set.timeout), (Some(PathBuf::from("/ca/ca.crt")), Duration::from_secs(2)));
    for bad in
        [&["--prometheus-url", "prom:9090"][..], &["--prometheus-url", "ftp://prom"], &["--prometheus-timeout", "0s"]]
    {
        assert!(parse(bad).is_err(), "{bad:?} refused");
    }
}

#[tokio::test]
async fn each_failed_read_is_counted_under_its_result() {
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let bad_json = answering(StatusCode::OK, "{".into()).await;
    let (metrics, _) = Metrics::new();
    for (addr, result) in [(dead, "unreachable"), (bad_json, "invalid_response")] {
        let options = PrometheusOptions {
            url: Some(format!("http://{addr}").parse().unwrap()),
            ca_file: None,
            timeout: Duration::from_secs(5),
        };
        let mut reader = AlertsReader::new(&options, metrics.clone()).unwrap();
        assert!(matches!(*reader.refresh(Instant::now()).await, AlertsView::Failed(_)), "{result}");
        assert_eq!(reads(&metrics, result), 1, "{result}");
    }
}
