//! Starts `node-maintenance serve` in CLUSTER mode in-process (the same `app::serve` the binary
//! runs, without `--standalone`) against the kube-apiserver stand-in of [`super::apiserver`]:
//! a kubeconfig pointing at the stand-in's plain-HTTP URL (no auth), development serving
//! certificates, `--controller=false`, ephemeral ports. Plus the recorded fixtures by name and
//! helpers to build AdmissionReviews from them.

use super::apiserver::ApiServer;
use super::webhook::{client_trusting, fixtures_dir};
use node_maintenance::app::Bound;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A stand-in loaded with `tests/fixtures/nodes.yaml` (3 control-plane nodes, worker-1..4 in
/// `pool=general`, gpu-1..2 in `pool=gpu`); it answers SubjectAccessReviews with the fixtures'
/// RBAC (admin via `system:masters` anything; alice (`ops`) delete worker-1 and worker-2; bob
/// (`dev`) no node).
pub async fn fixture_standin() -> ApiServer {
    let api = ApiServer::start().await;
    assert_eq!(api.load_nodes_yaml(fixtures_dir().join("nodes.yaml")), 9);
    api
}

/// A cluster-mode webhook; stopped (SIGTERM-equivalent) on drop.
pub struct Webhook {
    pub bound: Bound,
    pub dir: tempfile::TempDir,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}

/// A kubeconfig for `server_url` without credentials.
pub fn kubeconfig(server_url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: {server_url}\n\
         users:\n- name: anonymous\n  user: {{}}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    \
         user: anonymous\ncurrent-context: standin\n"
    )
}

/// Starts the webhook in cluster mode against `api` with `extra` further `serve` flags;
/// returns once it listens (not necessarily ready: see [`Webhook::wait_ready`]).
pub async fn start_unready(api: &ApiServer, extra: &[&str]) -> Webhook {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig_path = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig_path, kubeconfig(&api.url())).expect("kubeconfig written");
    start_with_kubeconfig(dir, &kubeconfig_path, extra).await
}

/// Starts the webhook in cluster mode with `kubeconfig_path` (any apiserver), development
/// certificates in `dir`, `--controller=false` unless `extra` says otherwise.
pub async fn start_with_kubeconfig(dir: tempfile::TempDir, kubeconfig_path: &Path, extra: &[&str]) -> Webhook {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = node_maintenance::server::devcert::ensure_dev_certs(&dir.path().join("certs"), &[])
        .expect("development certificates");
    let mut args = vec![
        "serve".to_string(),
        "--addr".into(),
        "127.0.0.1:0".into(),
        "--metrics-addr".into(),
        "127.0.0.1:0".into(),
        "--tls-cert-file".into(),
        certs.cert.display().to_string(),
        "--tls-key-file".into(),
        certs.key.display().to_string(),
        "--kubeconfig".into(),
        kubeconfig_path.display().to_string(),
        "--shutdown-delay".into(),
        "0s".into(),
    ];
    if !extra.iter().any(|a| a.starts_with("--controller")) {
        args.push("--controller=false".into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let (bound, stop_tx, task) = super::webhook::launch(&args).await;
    let client = client_trusting(&std::fs::read(&certs.ca).expect("CA readable"));
    Webhook { bound, dir, client, stop: Some(stop_tx), task }
}

/// Starts the webhook and waits until `/readyz` answers 200 (caches synced).
pub async fn start(api: &ApiServer, extra: &[&str]) -> Webhook {
    let hook = start_unready(api, extra).await;
    hook.wait_ready(Duration::from_secs(30)).await;
    hook
}

impl Webhook {
    /// Waits up to `within` for `serve` to return by itself; its result.
    pub async fn exit(&mut self, within: Duration) -> anyhow::Result<()> {
        tokio::time::timeout(within, &mut self.task).await.expect("serve returns in time").expect("serve task")
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.bound.addr.port())
    }

    /// Whether `serve` is still running (it has not returned or panicked).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }

    /// The `/metrics` text (plain HTTP on the metrics port).
    pub async fn metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.bound.metrics_addr.port());
        reqwest::get(url).await.expect("GET /metrics").text().await.expect("metrics text")
    }

    /// The HTTP status of `GET /readyz`.
    pub async fn readyz(&self) -> u16 {
        self.client.get(self.url("/readyz")).send().await.expect("GET /readyz").status().as_u16()
    }

    /// Polls `/readyz` until 200; panics after `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.readyz().await != 200 {
            assert!(Instant::now() < deadline, "webhook not ready after {timeout:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// POSTs `body` to `path` (with query) with `headers`; expects HTTP 200 and returns the
    /// AdmissionReview answered.
    pub async fn post_with(&self, path: &str, headers: &[(String, String)], body: Vec<u8>) -> Value {
        let mut req = self.client.post(self.url(path)).body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = req.send().await.unwrap_or_else(|e| panic!("POST {path}: {e}"));
        assert_eq!(resp.status(), 200, "POST {path}");
        resp.json().await.expect("AdmissionReview JSON")
    }

    /// Replays a recorded request unchanged (body, request path and headers).
    pub async fn replay(&self, f: &Recorded) -> Value {
        self.post_with(&f.path, &f.headers, f.body.clone()).await
    }

    /// POSTs an AdmissionReview built as JSON to `path` (e.g. `/validate?timeout=10s`),
    /// with the headers the apiserver sends.
    pub async fn post(&self, path: &str, review: &Value) -> Value {
        self.post_with(path, &apiserver_headers(), serde_json::to_vec(review).expect("serializes")).await
    }
}

/// The headers a kube-apiserver sends to a webhook (as in the recordings).
pub fn apiserver_headers() -> Vec<(String, String)> {
    [
        ("User-Agent", "kube-apiserver-admission"),
        ("Accept", "application/json, */*"),
        ("Content-Type", "application/json"),
        ("Accept-Encoding", "gzip"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// One recorded request of `tests/fixtures/apiserver`, as sent.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// File name, e.g. `12-create-by-alice-matchfields-validate.json`.
    pub name: String,
    pub body: Vec<u8>,
    /// Request path with query from the recorded request line.
    pub path: String,
    /// Recorded headers, Host and Content-Length excluded.
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// The whole AdmissionReview as JSON (to derive variants from).
    pub fn review(&self) -> Value {
        serde_json::from_slice(&self.body).expect("fixture is JSON")
    }

    /// `request.userInfo`.
    pub fn user_info(&self) -> Value {
        self.review()["request"]["userInfo"].clone()
    }
}

/// The recorded request `name` (with or without `.json`).
pub fn recorded(name: &str) -> Recorded {
    let name = if name.ends_with(".json") { name.to_string() } else { format!("{name}.json") };
    let dir = fixtures_dir().join("apiserver");
    let body = std::fs::read(dir.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let head = std::fs::read_to_string(dir.join(name.replace(".json", ".headers"))).expect("headers");
    let mut lines = head.lines();
    let path = lines.next().expect("request line").split_whitespace().nth(1).expect("path").to_string();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host") && !k.eq_ignore_ascii_case("content-length"))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Recorded { name, body, path, headers }
}

/// Every recorded request, in name (= recording) order.
pub fn all_recorded() -> Vec<Recorded> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir().join("apiserver"))
        .expect("fixtures dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names.iter().map(|n| recorded(n)).collect()
}

/// `review` (a whole AdmissionReview) with a fresh `request.uid` and `request.userInfo`
/// replaced by `user`.
pub fn as_user(review: &Value, user: Value) -> Value {
    let mut r = review.clone();
    r["request"]["userInfo"] = user;
    r["request"]["uid"] = json!(format!("test-{}", next_id()));
    r
}

/// `review` with `request.object.spec.nodeSelector` replaced and a fresh uid.
pub fn with_selector(review: &Value, selector: Value) -> Value {
    let mut r = review.clone();
    r["request"]["object"]["spec"]["nodeSelector"] = selector;
    r["request"]["uid"] = json!(format!("test-{}", next_id()));
    r
}

/// A nodeSelector with one expression.
pub fn selector(key: &str, operator: &str, values: &[&str]) -> Value {
    let mut expr = json!({"key": key, "operator": operator});
    if !values.is_empty() {
        expr["values"] = json!(values);
    }
    json!({"nodeSelectorTerms": [{"matchExpressions": [expr]}]})
}

fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A NodeMaintenance object for [`ApiServer::put_maintenance`] selecting nodes by name.
pub fn maintenance_by_names(name: &str, stage: &str, nodes: &[&str]) -> Value {
    json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1",
        "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {
            "stage": stage,
            "reason": "test",
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": nodes}
            ]}]},
        },
    })
}

/// The AdmissionResponse's `response`.
pub fn response(review: &Value) -> &Value {
    &review["response"]
}

/// The response's warnings.
pub fn warnings(review: &Value) -> Vec<String> {
    review["response"]["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect()
}

/// The denial's `(code, message)`; panics when allowed.
pub fn denial(review: &Value) -> (u64, String) {
    let r = &review["response"];
    assert_eq!(r["allowed"], json!(false), "expected a denial: {r}");
    (r["status"]["code"].as_u64().expect("status.code"), r["status"]["message"].as_str().unwrap_or("").to_owned())
}

/// `spec.resourceAttributes.name` of each SAR body (`""` for the all-nodes review).
pub fn sar_names(sars: &[Value]) -> Vec<String> {
    sars.iter().map(|s| s["spec"]["resourceAttributes"]["name"].as_str().unwrap_or("").to_owned()).collect()
}
