//! The load harness's "kube-rs floor" (`hack/load.sh` scenario `floor`, docs/benchmarks.md):
//! the least an admission webhook written the kube-rs way does per review, on the transport of
//! `examples/baseline_server.rs`. It decodes the body with kube-core's typed
//! `AdmissionReview<DynamicObject>` (the decoder of kube's admission example and of webhooks
//! built on it), takes the request out (`TryInto<AdmissionRequest>`), answers
//! `AdmissionResponse::from(&request)` (`allowed: true`, the uid echoed) as an AdmissionReview
//! and encodes it with serde_json. No policy, no checks beyond the decode, no tracing, metrics
//! or limits: the webhook's `/validate` doing all of its work in less time than this does
//! nothing but decode is the goal of issue 41.
//!
//! The decode reads the body straight from the bytes with `serde_json::from_slice` (axum's
//! `Json` extractor would add a Content-Type check and serde_path_to_error's path tracking),
//! so the floor is the cheapest way to use the typed decoder.
//!
//! ```text
//! cargo run --release --example kube_floor_server -- ADDR CERT_PEM KEY_PEM
//! ```
//!
//! Serves `POST /validate`, `POST /mutate` (both answer `allowed: true`) and `GET /healthz`
//! until killed. A body the typed decoder refuses gets what kube's example answers:
//! `AdmissionResponse::invalid` (HTTP 200, `allowed: false`, no uid).

#[path = "common/bare_tls.rs"]
mod bare_tls;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::routing::{get, post};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};

async fn review(body: Bytes) -> ([(header::HeaderName, &'static str); 1], Vec<u8>) {
    let response = match serde_json::from_slice::<AdmissionReview<DynamicObject>>(&body)
        .map_err(|e| e.to_string())
        .and_then(|review| {
            let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
            request.map_err(|e| e.to_string())
        }) {
        Ok(request) => AdmissionResponse::from(&request),
        Err(why) => AdmissionResponse::invalid(why),
    };
    // Serializing kube-core's plain structs into a Vec cannot fail.
    let bytes = serde_json::to_vec(&response.into_review()).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], bytes)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = Router::new()
        .route("/validate", post(review))
        .route("/mutate", post(review))
        .route("/healthz", get(|| async { "ok" }));
    bare_tls::serve_from_args("kube_floor_server", app)
}
