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

#[path = "common/bare_tls.rs"]
mod bare_tls;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::routing::{get, post};

/// What every review gets: allowed, a fixed uid.
const ANSWER: &[u8] = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"2f9d1cd1-3755-40a2-ab85-229851fd6c8c","allowed":true}}"#;

async fn review(body: Bytes) -> ([(header::HeaderName, &'static str); 1], &'static [u8]) {
    // Read the body (as the webhook must), decode nothing.
    std::hint::black_box(body);
    ([(header::CONTENT_TYPE, "application/json")], ANSWER)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = Router::new()
        .route("/validate", post(review))
        .route("/mutate", post(review))
        .route("/healthz", get(|| async { "ok" }));
    bare_tls::serve_from_args("baseline_server", app)
}
