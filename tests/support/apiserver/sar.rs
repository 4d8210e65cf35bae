//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`, answered with the fixtures'
//! RBAC, with recording, artificial latency, failure modes and a concurrency high-water mark
//! (the faults a real apiserver cannot produce on demand; answers from real RBAC are tested in
//! tests/envtest_admission.rs).

use super::SarFailure;
use super::errors::{ApiError, json_response};
use super::server::{Inner, Req, lock};
use axum::body::Body;
use hyper::{Method, Response};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// SAR configuration and observations.
#[derive(Debug, Default)]
pub struct SarState {
    /// Delay before each answer.
    pub latency: Mutex<Duration>,
    /// Failure mode.
    pub failure: Mutex<SarFailure>,
    /// Every request body, in arrival order.
    pub requests: Mutex<Vec<Value>>,
    /// Requests being answered now.
    pub in_flight: AtomicUsize,
    /// The most requests ever answered at once.
    pub max_in_flight: AtomicUsize,
}

struct Flight<'a>(&'a SarState);

impl<'a> Flight<'a> {
    fn enter(state: &'a SarState) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.max_in_flight.fetch_max(now, Ordering::SeqCst);
        Self(state)
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether the RBAC of `tests/fixtures/manifests/rbac.yaml` allows the SAR `spec` to delete
/// a node, the only question the webhook asks: group `system:masters` may do anything, group
/// `ops` may delete nodes `worker-1` and `worker-2` (a name-specific rule does not allow a
/// review without a name, as RBAC `resourceNames` do not), anyone else nothing.
fn fixture_rbac_allows(spec: &Value) -> bool {
    let in_group = |g: &str| spec["groups"].as_array().is_some_and(|gs| gs.iter().any(|x| x == g));
    let attrs = &spec["resourceAttributes"];
    in_group("system:masters")
        || (in_group("ops")
            && attrs["verb"] == "delete"
            && attrs["resource"] == "nodes"
            && ["worker-1", "worker-2"].iter().any(|n| attrs["name"] == *n))
}

fn failure_error(code: u16) -> ApiError {
    match code {
        403 => ApiError::new(
            403,
            "Forbidden",
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"system:serviceaccount:default:node-maintenance\" cannot create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at the cluster scope",
        ),
        429 => ApiError::new(429, "TooManyRequests", "Too many requests, please try again later."),
        503 => ApiError::unavailable(),
        504 => ApiError::new(504, "Timeout", "Timeout: request did not complete within the allotted timeout"),
        code => ApiError::new(code, "InternalError", "Internal error occurred: stand-in SubjectAccessReview failure"),
    }
}

/// Answers one SubjectAccessReview.
pub async fn handle(inner: &Inner, req: &Req) -> Result<Response<Body>, ApiError> {
    if req.method != Method::POST {
        return Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    let body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded: {e}")))?;
    lock(&inner.sar.requests).push(body.clone());
    let _flight = Flight::enter(&inner.sar);
    let latency = *lock(&inner.sar.latency);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let failure = *lock(&inner.sar.failure);
    match failure {
        SarFailure::None => {}
        SarFailure::Status(code) => return Err(failure_error(code)),
        SarFailure::Hang => {
            inner.shutdown.cancelled().await;
            return Err(ApiError::unavailable());
        }
        SarFailure::Close => return Ok(req.drop_connection().await),
    }
    let spec = body.get("spec").cloned().unwrap_or_default();
    let status = json!({"allowed": fixture_rbac_allows(&spec)});
    let out = json!({
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    Ok(json_response(201, &out))
}
