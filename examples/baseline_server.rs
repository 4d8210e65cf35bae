//! The load harness's reference point (`hack/load.sh`, docs/benchmarks.md): a bare axum
//! server on tokio-rustls that reads each POST body and answers a fixed, allowed
//! AdmissionReview without decoding anything. It is as close to "the limit of the machine"
//! as an HTTPS webhook in this stack gets: same TLS library, provider, protocol versions and
//! ALPN, same HTTP/1.1 + HTTP/2 connection handling, same tokio runtime, none of the
//! webhook's work (JSON, decisions, tracing, metrics, limits).
//!
//! ```text
//! cargo run --release --example baseline_server -- ADDR CERT_PEM KEY_PEM
//! ```
//!
//! Serves `POST /validate`, `POST /mutate` and `GET /healthz` until killed.

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::routing::{get, post};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// What every review gets: allowed, a fixed uid.
const ANSWER: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"2f9d1cd1-3755-40a2-ab85-229851fd6c8c","allowed":true}}"#;

async fn review(body: Bytes) -> ([(header::HeaderName, &'static str); 1], &'static [u8]) {
    // Read the body (as the webhook must), decode nothing.
    std::hint::black_box(body);
    ([(header::CONTENT_TYPE, "application/json")], ANSWER)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, cert, key] = args.as_slice() else {
        eprintln!("usage: baseline_server ADDR CERT_PEM KEY_PEM");
        std::process::exit(2);
    };
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let app = Router::new()
        .route("/validate", post(review))
        .route("/mutate", post(review))
        .route("/healthz", get(|| async { "ok" }));
    let addr = addr.clone();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        eprintln!("baseline_server listening on {}", listener.local_addr()?);
        let builder = auto::Builder::new(TokioExecutor::new());
        loop {
            let (tcp, _) = listener.accept().await?;
            let _ = tcp.set_nodelay(true);
            let (acceptor, app, builder) = (acceptor.clone(), app.clone(), builder.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let _ = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app)).await;
            });
        }
    })
}
