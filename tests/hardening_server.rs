//! Hardening of the HTTPS webhook (issue 7.2 to 7.4): hostile bodies, slow and idle clients,
//! HTTP/2 stream floods, certificate rotation under load and graceful shutdown under load.
//! Each test checks that the hostile client gets a clear error or a bounded cost and that
//! the server keeps answering everyone else meanwhile. docs/reliability.md lists them.
//!
//! Body-level tests run against `app::serve --standalone` (the binary's own wiring).
//! Connection-level tests run the same `serve_https` and router with short limits (1 s
//! instead of 10-60 s) so that time-outs can be observed quickly; the code path is the one
//! `app::serve` runs.
//!
//! Long runs: `NM_HARDENING_SECS=60` makes the rotation and shutdown load runs last 60 s
//! (default 10 s and 4 s); `hack/fuzz.sh` sets it.

mod support;

use node_maintenance::admission::StandaloneAuthorizer;
use node_maintenance::cluster::standalone::StaticView;
use node_maintenance::metrics::Metrics;
use node_maintenance::server::routes::{self, AppState};
use node_maintenance::server::tls::{self, CertPaths, CertStore};
use node_maintenance::server::{Limits, Readiness, devcert, serve_https};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::tls::{ca, leaf, write_secret_volume};
use support::webhook::{Server, client_trusting, fixtures_dir, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

// ---------------------------------------------------------------------------------------
// Helpers.

fn review(request: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap()
}

fn nm_request(uid: &str, op: &str, object: Value) -> Value {
    json!({
        "uid": uid,
        "kind": {"group": "nodemaintenance.k8s.io", "version": "v1alpha1", "kind": "NodeMaintenance"},
        "resource": {"group": "nodemaintenance.k8s.io", "version": "v1alpha1", "resource": "nodemaintenances"},
        "name": "big", "operation": op, "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": object
    })
}

fn pool_selector() -> Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]})
}

async fn post(client: &reqwest::Client, url: String, body: Vec<u8>) -> (u16, Value) {
    let resp = client.post(url).header("content-type", "application/json").body(body).send().await.expect("answered");
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.expect("body");
    (status, serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into())))
}

/// A valid review is still answered correctly (and quickly enough to be useful).
async fn still_serving(client: &reqwest::Client, base: &str) {
    let obj = json!({"metadata": {"name": "x"}, "spec": {"nodeSelector": pool_selector()}});
    let started = Instant::now();
    let (status, body) =
        post(client, format!("{base}/mutate?timeout=10s"), review(nm_request("alive", "CREATE", obj))).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["response"]["uid"], "alive");
    assert_eq!(body["response"]["allowed"], true, "{body}");
    assert!(started.elapsed() < Duration::from_secs(5), "a normal review took {:?}", started.elapsed());
}

fn denial(body: &Value) -> (u64, String) {
    let r = &body["response"];
    assert_eq!(r["allowed"], false, "expected a denial: {body}");
    (r["status"]["code"].as_u64().unwrap(), r["status"]["message"].as_str().unwrap_or("").to_owned())
}

fn base(server: &Server) -> String {
    server.url("")
}

// ---------------------------------------------------------------------------------------
// 7.2 Malformed and hostile bodies (through app::serve).

#[tokio::test]
async fn deeply_nested_json_gets_a_clear_400_without_a_stack_overflow() {
    let server = start(&[]).await;
    let client = server.client();
    let b = base(&server);

    // 1,000,000 nested arrays at the top: no uid readable, so HTTP 400 (no recursion at all:
    // the envelope skips the request without building it, and a Value stops at depth 128).
    let deep = format!("{}{}", "[".repeat(1_000_000), "]".repeat(1_000_000)).into_bytes();
    let (status, body) = post(&client, format!("{b}/validate"), deep).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("not an AdmissionReview"), "{body}");

    // The same depth as request.object.spec: the uid is readable, so HTTP 200. /validate
    // denies it (400) saying what is wrong; /mutate has nothing to default in a spec that is
    // not an object and leaves it to validation.
    let nested = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
    let body = review(nm_request("deep", "CREATE", json!({"spec": "PLACEHOLDER"})));
    let body = String::from_utf8(body).unwrap().replace("\"PLACEHOLDER\"", &nested).into_bytes();
    let (status, answer) = post(&client, format!("{b}/validate"), body.clone()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], "deep");
    let (code, message) = denial(&answer);
    assert_eq!(code, 400, "{message}");
    assert!(message.contains("recursion limit"), "{message}");
    let (status, answer) = post(&client, format!("{b}/mutate"), body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], "deep");
    assert!(answer["response"].get("patch").is_none(), "{answer}");

    // Depth 100 (under serde_json's limit of 128) in a place the schema does not allow.
    let nested = format!("{}1{}", "{\"a\":".repeat(100), "}".repeat(100));
    let obj = format!(r#"{{"metadata":{{"name":"x"}},"spec":{{"reason":{nested}}}}}"#);
    let body = review(nm_request("depth-100", "CREATE", serde_json::from_str(&obj).unwrap()));
    let (status, answer) = post(&client, format!("{b}/validate"), body).await;
    assert_eq!(status, 200);
    let (code, message) = denial(&answer);
    assert_eq!(code, 400, "{answer}");
    assert!(message.contains("spec.reason"), "{message}");
    still_serving(&client, &b).await;
}

/// A drainPlan of `n` distinct, canonical Default entries (priorities 0..n), plus the
/// defaults, as an object.
fn big_plan_object(n: usize, duplicate: bool) -> Value {
    let mut plan: Vec<Value> =
        (0..n).map(|i| json!({"podPriority": if duplicate { 7 } else { i as i64 }, "podType": "Default"})).collect();
    plan.extend(
        node_maintenance::api::DrainPlanEntry::defaults().map(|e| serde_json::to_value(e).expect("entry serializes")),
    );
    json!({"metadata": {"name": "big"}, "spec": {"nodeSelector": pool_selector(), "stage": "Idle", "drainPlan": plan}})
}

#[tokio::test]
async fn a_100k_entry_drain_plan_is_answered_in_bounded_time() {
    let server = start(&[]).await;
    let client = server.client();
    let b = base(&server);

    let body = review(nm_request("plan-100k", "CREATE", big_plan_object(100_000, false)));
    assert!(body.len() < 7 * 1024 * 1024, "{} bytes: within the body limit", body.len());
    for path in ["/validate", "/mutate"] {
        let started = Instant::now();
        let (status, answer) = post(&client, format!("{b}{path}?timeout=10s"), body.clone()).await;
        let took = started.elapsed();
        assert_eq!(status, 200, "{path}: {answer}");
        assert_eq!(answer["response"]["allowed"], true, "{path}: {answer}");
        assert!(answer["response"].get("patch").is_none(), "{path}: complete plan, nothing to default");
        println!("{path}: 100,000-entry drainPlan answered in {took:?}");
        assert!(took < Duration::from_secs(8), "{path} took {took:?} (answers must beat the apiserver's 10 s)");
    }

    // 100,000 duplicates: every one is reported (linear time, bounded answer size).
    let body = review(nm_request("dup-100k", "CREATE", big_plan_object(100_000, true)));
    let started = Instant::now();
    let (status, answer) = post(&client, format!("{b}/validate?timeout=10s"), body).await;
    let took = started.elapsed();
    assert_eq!(status, 200);
    let (code, message) = denial(&answer);
    assert_eq!(code, 422);
    assert!(message.contains("spec.drainPlan[1]: Duplicate value"), "{}", &message[..300.min(message.len())]);
    assert!(message.ends_with(", and 99899 more errors]"), "{}", &message[message.len().saturating_sub(100)..]);
    let size = serde_json::to_vec(&answer).unwrap().len();
    println!("100,000 duplicate entries: denied in {took:?}, answer {size} bytes");
    assert!(size < 64 * 1024, "a 422 lists at most 100 errors: {size} bytes");
    assert!(took < Duration::from_secs(8), "took {took:?}");
    still_serving(&client, &b).await;
}

#[tokio::test]
async fn huge_node_selectors_are_answered_in_bounded_time() {
    let server = start(&[]).await;
    let client = server.client();
    let b = base(&server);
    // 300,000 values in one In list, and 40,000 terms.
    let values: Vec<String> = (0..300_000).map(|i| format!("v{i}")).collect();
    let wide =
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": values}]}]});
    let terms: Vec<Value> = (0..40_000)
        .map(|i| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [format!("n{i}")]}]}))
        .collect();
    let many = json!({"nodeSelectorTerms": terms});
    for (what, selector) in [("300k values", wide), ("40k terms", many)] {
        let obj = json!({"metadata": {"name": "big"}, "spec": {"nodeSelector": selector}});
        let body = review(nm_request(what, "CREATE", obj));
        assert!(body.len() < 7 * 1024 * 1024, "{what}: {} bytes", body.len());
        for path in ["/validate", "/mutate"] {
            let started = Instant::now();
            let (status, answer) = post(&client, format!("{b}{path}?timeout=10s"), body.clone()).await;
            let took = started.elapsed();
            assert_eq!(status, 200, "{what} {path}: {answer}");
            assert_eq!(answer["response"]["allowed"], true, "{what} {path}: {answer}");
            println!("{what} {path}: answered in {took:?}");
            assert!(took < Duration::from_secs(8), "{what} {path} took {took:?}");
        }
    }
    still_serving(&client, &b).await;
}

#[tokio::test]
async fn non_utf8_bytes_and_duplicate_keys_get_clear_answers() {
    let server = start(&[]).await;
    let client = server.client();
    let b = base(&server);
    let url = format!("{b}/validate");

    // Invalid UTF-8 inside a string of the object: the uid is readable, 200 + 400 denial.
    let body = String::from_utf8(review(nm_request("utf8", "CREATE", json!({"spec": {"reason": "XX"}})))).unwrap();
    let mut bytes = body.into_bytes();
    let at = bytes.windows(2).position(|w| w == b"XX").unwrap();
    bytes[at] = 0xff;
    bytes[at + 1] = 0xfe;
    let (status, answer) = post(&client, url.clone(), bytes).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["response"]["uid"], "utf8");
    let (code, message) = denial(&answer);
    assert_eq!(code, 400);
    assert!(message.contains("UTF-8") || message.contains("unicode"), "{message}");

    // Invalid UTF-8 in the uid itself: nothing readable, HTTP 400.
    let mut bytes = review(nm_request("ZZ", "CREATE", json!({})));
    let at = bytes.windows(2).position(|w| w == b"ZZ").unwrap();
    bytes[at] = 0xc3;
    bytes[at + 1] = 0x28;
    assert_eq!(post(&client, url.clone(), bytes).await.0, 400);

    // A lone UTF-16 surrogate escape: rejected as JSON, uid readable.
    let body = String::from_utf8(review(nm_request("surrogate", "CREATE", json!({"spec": {"reason": "SUR"}}))))
        .unwrap()
        .replace("SUR", "\\ud800");
    let (status, answer) = post(&client, url.clone(), body.into_bytes()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(denial(&answer).0, 400);

    // Two uids: ambiguous, so none is echoed: HTTP 400.
    let body = String::from_utf8(review(nm_request("first", "CREATE", json!({})))).unwrap().replacen(
        "\"uid\":\"first\"",
        "\"uid\":\"first\",\"uid\":\"second\"",
        1,
    );
    let (status, answer) = post(&client, url.clone(), body.into_bytes()).await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("duplicate field `uid`"), "{answer}");

    // A duplicate request field: 200, denied 400 naming it.
    let body = String::from_utf8(review(nm_request("dup-op", "CREATE", json!({})))).unwrap().replacen(
        "\"operation\":\"CREATE\"",
        "\"operation\":\"DELETE\",\"operation\":\"CREATE\"",
        1,
    );
    let (status, answer) = post(&client, url.clone(), body.into_bytes()).await;
    assert_eq!(status, 200, "{answer}");
    let (code, message) = denial(&answer);
    assert_eq!(code, 400);
    assert!(message.contains("duplicate field `operation`"), "{message}");

    // A duplicate key inside the object: the last one counts, as in the apiserver's own
    // decoding (Go's encoding/json), so the webhook judges what would be stored.
    let obj = r#"{"metadata":{"name":"x"},"spec":{"stage":"Idle","stage":"Rebooting","nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["worker-1"]}]}]}}}"#;
    let body =
        String::from_utf8(review(nm_request("dup-stage", "CREATE", json!("OBJ")))).unwrap().replace("\"OBJ\"", obj);
    let (status, answer) = post(&client, url.clone(), body.into_bytes()).await;
    assert_eq!(status, 200, "{answer}");
    let (code, message) = denial(&answer);
    assert_eq!(code, 422, "{message}");
    assert!(message.contains("spec.stage: Unsupported value: \"Rebooting\""), "{message}");
    still_serving(&client, &b).await;
}

// ---------------------------------------------------------------------------------------
// 7.2 Slow, idle and flooding clients (serve_https with short limits).

struct Custom {
    addr: SocketAddr,
    ca: Vec<u8>,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Custom {
    fn client(&self) -> reqwest::Client {
        client_trusting(&self.ca)
    }

    fn base(&self) -> String {
        format!("https://localhost:{}", self.addr.port())
    }
}

impl Drop for Custom {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

/// Short limits: 1 s handshake, header read and idle time-outs; request time-out 2 s.
fn short_limits(max_connections: usize) -> Limits {
    Limits {
        max_connections,
        handshake_timeout: Duration::from_secs(1),
        header_read_timeout: Duration::from_secs(1),
        max_concurrent_streams: 100,
        shutdown_grace: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(1),
    }
}

async fn custom_server(limits: Limits, max_in_flight: usize) -> Custom {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let certs = devcert::ensure_dev_certs(&dir.path().join("certs"), &[]).unwrap();
    let store = CertStore::load(CertPaths { cert: certs.cert.clone(), key: certs.key.clone() }).unwrap();
    let tls = Arc::new(tls::server_config(store, None).unwrap());
    let view = StaticView::load(&fixtures_dir().join("nodes.yaml")).unwrap();
    let (metrics, _) = Metrics::new();
    let state = AppState {
        view: Arc::new(view),
        authz: Arc::new(StandaloneAuthorizer::new(Vec::<String>::new(), Vec::<String>::new())),
        metrics,
        readiness: Arc::new(Readiness::default()),
        max_review_time: Duration::from_secs(1),
    };
    let app = routes::with_limits(routes::router(state), max_in_flight, Duration::from_secs(2));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_https(listener, tls, app, limits, async move {
        let _ = rx.await;
    }));
    Custom { addr, ca: std::fs::read(&certs.ca).unwrap(), _dir: dir, stop: Some(tx), task }
}

async fn tls_connect(addr: SocketAddr, ca: &[u8], alpn: &[&[u8]]) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca) {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.expect("TLS handshake")
}

/// Reads until the peer closes (or errors); returns how long that took, `None` past `limit`.
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(s: &mut S, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit.saturating_sub(started.elapsed()), s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn slowloris_on_the_handshake_is_cut_at_the_handshake_timeout() {
    let server = custom_server(short_limits(64), 64).await;
    let client = server.client();
    // A connection that sends nothing, and one that dribbles a ClientHello byte by byte.
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    let mut dribbler = TcpStream::connect(server.addr).await.unwrap();
    let dribble = tokio::spawn(async move {
        for b in [0x16u8, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00] {
            if dribbler.write_all(&[b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        closed_within(&mut dribbler, Duration::from_secs(10)).await
    });
    still_serving(&client, &server.base()).await;
    let silent_closed = closed_within(&mut silent, Duration::from_secs(10)).await;
    let dribbler_closed = dribble.await.unwrap();
    println!("silent connection closed after {silent_closed:?}, dribbling one after {dribbler_closed:?} (+2.1 s)");
    assert!(silent_closed.is_some_and(|t| t < Duration::from_secs(4)), "silent: {silent_closed:?}");
    assert!(dribbler_closed.is_some(), "the dribbling handshake is cut");
}

#[tokio::test]
async fn slowloris_on_the_headers_is_cut_at_the_header_read_timeout() {
    let server = custom_server(short_limits(64), 64).await;
    let mut tls = tls_connect(server.addr, &server.ca, &[b"http/1.1"]).await;
    tls.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n").await.unwrap();
    let started = Instant::now();
    let mut cut = false;
    for i in 0..40 {
        if tls.write_all(format!("X-Slow-{i}: x\r\n").as_bytes()).await.is_err() {
            cut = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        // Only the end of the connection counts as cut: bytes (such as a 408) may come
        // first, and a read that finds nothing yet is no answer.
        let mut buf = [0u8; 512];
        if let Ok(Ok(0) | Err(_)) = tokio::time::timeout(Duration::from_millis(1), tls.read(&mut buf)).await {
            cut = true;
            break;
        }
    }
    println!("slow headers: cut {cut} after {:?}", started.elapsed());
    // Within 3 s of a 1 s header timeout: the idle timeout and shutdown grace would cut the
    // connection too, but only after 1 + 5 s.
    assert!(cut, "slow headers never cut ({:?})", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(3), "slow headers cut late: {:?}", started.elapsed());
    still_serving(&server.client(), &server.base()).await;
}

#[tokio::test]
async fn slowloris_on_the_body_gets_408_and_excess_slow_bodies_are_shed() {
    let server = custom_server(short_limits(64), 4).await;
    let client = server.client();
    let url = format!("{}/validate", server.base());
    // Four requests whose bodies trickle in: they fill --max-concurrent-reviews (4 here).
    let mut slow = Vec::new();
    for _ in 0..4 {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(1);
        let body = reqwest::Body::wrap_stream(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        }));
        let req = client.post(&url).header("content-type", "application/json").body(body).send();
        let feeder = tokio::spawn(async move {
            for _ in 0..100 {
                if tx.send(Ok(b" ".to_vec())).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        slow.push((tokio::spawn(req), feeder, Instant::now()));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A fifth request meanwhile is refused at once (load shedding), not queued.
    let started = Instant::now();
    let (status, body) = post(&client, url.clone(), review(nm_request("x", "CREATE", json!({})))).await;
    assert_eq!(status, 503, "{body}");
    assert!(started.elapsed() < Duration::from_secs(1));
    for (req, feeder, started) in slow {
        let resp = req.await.unwrap().expect("answered");
        assert_eq!(resp.status(), 408, "a body that never completes is cut by the request timeout");
        assert!(started.elapsed() < Duration::from_secs(6), "after {:?}", started.elapsed());
        feeder.abort();
    }
    still_serving(&client, &server.base()).await;
}

#[tokio::test]
async fn idle_connections_beyond_max_connections_time_out_and_others_are_served() {
    // 8 connection slots, all taken by clients that finish TLS and then say nothing: 4 on
    // HTTP/1.1, 4 on HTTP/2 (preface and SETTINGS, then silence).
    let server = custom_server(short_limits(8), 64).await;
    let mut idle = Vec::new();
    for i in 0..8 {
        if i % 2 == 0 {
            idle.push(tls_connect(server.addr, &server.ca, &[b"http/1.1"]).await);
        } else {
            let mut s = tls_connect(server.addr, &server.ca, &[b"h2"]).await;
            s.write_all(H2_PREFACE).await.unwrap();
            s.write_all(&frame(4, 0, 0, &[])).await.unwrap();
            idle.push(s);
        }
    }
    let started = Instant::now();
    let client = server.client();
    still_serving_within(&client, &server.base(), Duration::from_secs(10)).await;
    println!("served after {:?} with every slot held by an idle connection", started.elapsed());
    for (i, s) in idle.iter_mut().enumerate() {
        let closed = closed_within(s, Duration::from_secs(10)).await;
        assert!(closed.is_some(), "idle connection {i} was never closed");
    }
}

async fn still_serving_within(client: &reqwest::Client, base: &str, limit: Duration) {
    let url = format!("{base}/healthz");
    let answered = tokio::time::timeout(limit, client.get(&url).send()).await;
    assert!(matches!(&answered, Ok(Ok(r)) if r.status() == 200), "not served within {limit:?}: {answered:?}");
    still_serving(client, base).await;
}

// Raw HTTP/2 frames, enough to misbehave on purpose.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len();
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: every header as a literal without indexing, new name (lengths < 127).
fn hpack(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, v) in headers {
        out.push(0);
        out.push(k.len() as u8);
        out.extend_from_slice(k.as_bytes());
        out.push(v.len() as u8);
        out.extend_from_slice(v.as_bytes());
    }
    out
}

fn post_headers(path: &str) -> Vec<u8> {
    hpack(&[
        (":method", "POST"),
        (":scheme", "https"),
        (":path", path),
        (":authority", "localhost"),
        ("content-type", "application/json"),
    ])
}

/// Reads frames for up to `limit`, acknowledging SETTINGS; returns (RST_STREAM codes, the
/// error code of a GOAWAY if one came, whether the connection closed).
async fn read_frames<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    s: &mut S,
    limit: Duration,
    enough: impl Fn(&[u32]) -> bool,
) -> (Vec<u32>, Option<u32>, bool) {
    let deadline = Instant::now() + limit;
    let (mut resets, mut goaway) = (Vec::new(), None);
    loop {
        let mut head = [0u8; 9];
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read_exact(&mut head)).await {
            Err(_) => return (resets, goaway, false),
            Ok(Err(_)) => return (resets, goaway, true),
            Ok(Ok(_)) => {}
        }
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        if s.read_exact(&mut payload).await.is_err() {
            return (resets, goaway, true);
        }
        match head[3] {
            4 if head[4] & 1 == 0 => {
                let _ = s.write_all(&frame(4, 1, 0, &[])).await;
            }
            3 => resets.push(u32::from_be_bytes(payload[..4].try_into().unwrap())),
            7 if len >= 8 => goaway = Some(u32::from_be_bytes(payload[4..8].try_into().unwrap())),
            _ => {}
        }
        if enough(&resets) {
            return (resets, goaway, false);
        }
    }
}

const REFUSED_STREAM: u32 = 0x7;
/// The GOAWAY code h2 sends when a peer resets too many streams it had not yet accepted.
const ENHANCE_YOUR_CALM: u32 = 0xb;

#[tokio::test]
async fn an_http2_stream_flood_is_bounded_by_max_concurrent_streams() {
    let server = custom_server(short_limits(64), 4096).await;
    let mut s = tls_connect(server.addr, &server.ca, &[b"h2"]).await;
    s.write_all(H2_PREFACE).await.unwrap();
    s.write_all(&frame(4, 0, 0, &[])).await.unwrap();
    // 500 requests at once whose bodies never come: the server admits 100 streams.
    let streams = 500u32;
    let mut burst = Vec::new();
    let block = post_headers("/validate");
    for i in 0..streams {
        burst.extend(frame(1, 0x4, 2 * i + 1, &block));
    }
    s.write_all(&burst).await.unwrap();
    let want = (streams - 100) as usize;
    let (resets, goaway, _) = read_frames(&mut s, Duration::from_secs(10), |r| r.len() >= want).await;
    let refused = resets.iter().filter(|c| **c == REFUSED_STREAM).count();
    println!("{streams} streams opened at once: {refused} refused (REFUSED_STREAM), GOAWAY {goaway:?}");
    assert!(refused >= want, "only {refused} of {want} excess streams were refused");
    assert!(refused <= streams as usize);
    // Everyone else is still served while the 100 admitted streams hang.
    still_serving(&server.client(), &server.base()).await;
}

#[tokio::test]
async fn http2_rapid_reset_is_bounded_and_others_are_served() {
    let server = custom_server(short_limits(64), 4096).await;
    let mut s = tls_connect(server.addr, &server.ca, &[b"h2"]).await;
    s.write_all(H2_PREFACE).await.unwrap();
    s.write_all(&frame(4, 0, 0, &[])).await.unwrap();
    let block = hpack(&[(":method", "GET"), (":scheme", "https"), (":path", "/healthz"), (":authority", "localhost")]);
    let started = Instant::now();
    let mut sent = 0u32;
    // Up to 20,000 HEADERS + RST_STREAM(CANCEL) pairs (CVE-2023-44487), in batches of 500.
    'outer: for batch in 0..40u32 {
        let mut buf = Vec::new();
        for i in 0..500u32 {
            let id = 2 * (batch * 500 + i) + 1;
            buf.extend(frame(1, 0x5, id, &block));
            buf.extend(frame(3, 0, id, &0x8u32.to_be_bytes()));
        }
        if s.write_all(&buf).await.is_err() {
            break 'outer;
        }
        sent += 500;
    }
    let (_, goaway, closed) = read_frames(&mut s, Duration::from_secs(5), |_| false).await;
    println!(
        "rapid reset: {sent} HEADERS+RST_STREAM pairs written in {:?}; GOAWAY {goaway:?}, closed {closed}",
        started.elapsed()
    );
    // h2 counts streams reset before the server accepted them (20 at most by default) and
    // past that limit answers GOAWAY(ENHANCE_YOUR_CALM) and closes the connection.
    assert_eq!(goaway, Some(ENHANCE_YOUR_CALM), "the flood did not get the connection cut (closed: {closed})");
    assert!(closed, "GOAWAY came but the connection stayed open");
    still_serving(&server.client(), &server.base()).await;
}

// ---------------------------------------------------------------------------------------
// 7.3 Certificate rotation under load, 7.4 graceful shutdown under load.

fn run_secs(default: u64) -> u64 {
    std::env::var("NM_HARDENING_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The common name the server presents to a new connection.
async fn served_cn(addr: SocketAddr, ca_pem: &str) -> String {
    let leaf = support::tls::served_leaf(addr, ca_pem).await;
    let text = String::from_utf8_lossy(leaf.as_ref()).to_string();
    text.split("gen-").nth(1).map(|rest| format!("gen-{}", &rest[..6])).unwrap_or_default()
}

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// Load: `tasks` loops posting the recorded `/mutate` review, half over pooled keep-alive
/// connections (HTTP/2), half over a new connection (new handshake) per request. Every
/// answer must be HTTP 200 with the request's uid.
fn load(
    base: String,
    ca: Vec<u8>,
    tasks: usize,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let body = std::fs::read(fixtures_dir().join("apiserver/01-create-minimal-mutate.json")).unwrap();
    let uid = serde_json::from_slice::<Value>(&body).unwrap()["request"]["uid"].as_str().unwrap().to_owned();
    (0..tasks)
        .map(|t| {
            let (base, ca, stop, tally, failures, body, uid) =
                (base.clone(), ca.clone(), stop.clone(), tally.clone(), failures.clone(), body.clone(), uid.clone());
            tokio::spawn(async move {
                let pooled = client_trusting(&ca);
                while !stop.load(Ordering::Relaxed) {
                    let client = if t % 2 == 0 {
                        pooled.clone()
                    } else {
                        reqwest::Client::builder()
                            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
                            .pool_max_idle_per_host(0)
                            .timeout(Duration::from_secs(20))
                            .build()
                            .unwrap()
                    };
                    let r = client
                        .post(format!("{base}/mutate?timeout=10s"))
                        .header("content-type", "application/json")
                        .body(body.clone())
                        .send()
                        .await;
                    let outcome = match r {
                        Ok(resp) if resp.status() == 200 => match resp.json::<Value>().await {
                            Ok(v) if v["response"]["uid"] == uid.as_str() && v["response"]["allowed"] == true => Ok(()),
                            other => Err(format!("bad answer: {other:?}")),
                        },
                        Ok(resp) => Err(format!("HTTP {}", resp.status())),
                        Err(e) => Err(format!("request failed: {e:?}")),
                    };
                    match outcome {
                        Ok(()) => tally.ok.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            failures.lock().unwrap().push(e);
                            tally.failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_every_second_under_load_loses_no_request() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let authority = ca("rotation CA");
    let vol = tempfile::tempdir().unwrap();
    let (c, k) = leaf(&authority, "gen-000001");
    write_secret_volume(vol.path(), 1, &c, &k);
    let cert = vol.path().join("tls.crt").display().to_string();
    let key = vol.path().join("tls.key").display().to_string();
    let poll = Duration::from_secs(1);
    let server = start(&["--tls-cert-file", &cert, "--tls-key-file", &key, "--cert-poll-interval", "1s"]).await;
    let base = server.url("");
    let (stop, tally, failures) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()), Arc::default());
    let workers = load(base.clone(), authority.pem.clone().into_bytes(), 8, stop.clone(), tally.clone(), failures);
    let secs = run_secs(10);
    let started = Instant::now();
    let mut generation = 1u32;
    let mut slowest = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(secs) {
        let period = Instant::now();
        generation += 1;
        let cn = format!("gen-{generation:06}");
        let (c, k) = leaf(&authority, &cn);
        write_secret_volume(vol.path(), generation, &c, &k);
        let swapped = Instant::now();
        loop {
            let seen = served_cn(server.bound.addr, &authority.pem).await;
            if seen == cn {
                break;
            }
            assert!(
                swapped.elapsed() < poll + Duration::from_secs(3),
                "{cn} not served {:?} after the swap (still {seen})",
                swapped.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest = slowest.max(swapped.elapsed());
        if let Some(rest) = Duration::from_secs(1).checked_sub(period.elapsed()) {
            tokio::time::sleep(rest).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let (ok, failed) = (tally.ok.load(Ordering::Relaxed), tally.failed.load(Ordering::Relaxed));
    println!(
        "rotation: {} certificates in {secs} s, {ok} requests answered, {failed} failed; \
         new certificate served after at most {slowest:?}",
        generation - 1
    );
    assert_eq!(failed, 0, "failed requests during rotation");
    assert!(ok > 100, "the load generator barely ran: {ok}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_under_load_fails_no_request_and_goes_unready_first() {
    let delay = Duration::from_secs(2);
    let load_secs = run_secs(4);
    let mut server = start(&["--shutdown-delay", "2s", "--shutdown-grace", "10s"]).await;
    let base = server.url("");
    let ca = server.ca_pem();
    let client = client_trusting(&ca);
    let (stop, tally, failures) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()), Arc::default());
    let workers = load(base.clone(), ca.clone(), 8, stop.clone(), tally.clone(), Arc::clone(&failures));
    tokio::time::sleep(Duration::from_secs(load_secs)).await;

    // Requests in flight across the whole shutdown: their bodies finish after the listener
    // has closed.
    let body = std::fs::read(fixtures_dir().join("apiserver/19-node-cordon-validate-node.json")).unwrap();
    let mut in_flight = Vec::new();
    for _ in 0..4 {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(2);
        let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|i| (i, rx)) });
        let req = client
            .post(format!("{base}/validate-node?timeout=10s"))
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(stream))
            .send();
        tx.send(Ok(body[..20].to_vec())).await.unwrap();
        in_flight.push((tokio::spawn(req), tx));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;

    let before_stop = tally.ok.load(Ordering::Relaxed);
    server.stop();
    let signalled = Instant::now();
    // The apiserver stops sending to an endpoint some time after it turns unready; the load
    // generator does so 500 ms after it sees /readyz fail (well within the 2 s delay).
    let mut unready_after = None;
    while signalled.elapsed() < delay {
        let r = client.get(format!("{base}/readyz")).send().await.expect("still serving during the delay");
        if r.status() == 503 {
            unready_after = Some(signalled.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let unready_after = unready_after.expect("readiness went false during the delay");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.unwrap();
    }
    let during_delay = tally.ok.load(Ordering::Relaxed) - before_stop;

    // Past the delay the listener is closed; the in-flight requests still complete.
    tokio::time::sleep(delay.saturating_sub(signalled.elapsed()) + Duration::from_millis(300)).await;
    assert!(TcpStream::connect(server.bound.addr).await.is_err(), "listener closed after the delay");
    for (req, tx) in in_flight {
        tx.send(Ok(body[20..].to_vec())).await.unwrap();
        drop(tx);
        let resp = req.await.unwrap().expect("in-flight request answered");
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.json::<Value>().await.unwrap()["response"]["allowed"], true);
    }
    let exited = tokio::time::timeout(Duration::from_secs(15), &mut server.task).await;
    let exit_after = signalled.elapsed();
    assert!(matches!(exited, Ok(Ok(Ok(())))), "server exits cleanly within the grace period");
    let (ok, failed) = (tally.ok.load(Ordering::Relaxed), tally.failed.load(Ordering::Relaxed));
    println!(
        "shutdown: {ok} requests answered ({during_delay} after the signal), {failed} failed, 4 in-flight completed; \
         unready after {unready_after:?}, exited after {exit_after:?}"
    );
    assert_eq!(failed, 0, "failed requests: {:?}", failures.lock().unwrap());
    assert!(unready_after < delay);
    assert!(during_delay > 0, "requests kept being served during the delay");
    assert!(exit_after < delay + Duration::from_secs(10) + Duration::from_secs(2));
}
