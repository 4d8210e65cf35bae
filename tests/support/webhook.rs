//! Starts `node-maintenance serve --standalone` in-process (the same `app::serve` the binary
//! runs) on 127.0.0.1 with ephemeral ports.

use clap::Parser;
use node_maintenance::app::{Bound, ServeOptions, serve};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    opts: ServeOptions,
}

/// A running server; stopped (SIGTERM-equivalent) by [`Server::stop`] or on drop.
pub struct Server {
    pub bound: Bound,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.bound.addr.port())
    }

    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.bound.metrics_addr.port())
    }

    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.dir.path().join("certs/ca.crt")).expect("dev CA written")
    }

    /// A client trusting the development CA, HTTP/1.1 or HTTP/2 as ALPN decides.
    pub fn client(&self) -> reqwest::Client {
        client_trusting(&self.ca_pem())
    }

    /// Sends the shutdown signal.
    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        self.task.abort();
    }
}

pub fn client_trusting(ca_pem: &[u8]) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem).expect("CA parses"))
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client builds")
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Starts a standalone server over `tests/fixtures/nodes.yaml` with dev certificates in a
/// temporary directory; `extra` are further `serve` flags.
pub async fn start(extra: &[&str]) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("tempdir");
    let cert_dir = dir.path().join("certs");
    let nodes = fixtures_dir().join("nodes.yaml");
    let mut args = vec![
        "serve".to_string(),
        "--standalone".into(),
        "--addr".into(),
        "127.0.0.1:0".into(),
        "--metrics-addr".into(),
        "127.0.0.1:0".into(),
        "--cert-dir".into(),
        cert_dir.display().to_string(),
        "--nodes-file".into(),
        nodes.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let (bound, stop, task) = launch(&args).await;
    Server { bound, dir, stop: Some(stop), task }
}

/// Runs `app::serve` in-process with these command-line words (starting with `serve`);
/// returns once it listens: its addresses, the shutdown trigger and the task.
pub async fn launch(args: &[String]) -> (Bound, oneshot::Sender<()>, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let opts = Wrapper::try_parse_from(args).expect("flags parse").opts;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (bound_tx, bound_rx) = oneshot::channel();
    let task = tokio::spawn(serve(
        opts,
        async move {
            let _ = stop_rx.await;
        },
        Some(bound_tx),
    ));
    let bound =
        tokio::time::timeout(Duration::from_secs(20), bound_rx).await.expect("server starts").expect("bound sent");
    (bound, stop_tx, task)
}
