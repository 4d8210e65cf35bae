//! `metav1.Status` failure bodies shaped like kube-apiserver's, so kube decodes them as
//! `kube::Error::Api` with the right `code` and `reason`.

use super::resources::ResourceKind;
use axum::body::Body;
use hyper::{Response, StatusCode, header};
use serde_json::{Value, json};

/// An API failure: HTTP status `code`, machine-readable `reason`, human `message` and
/// optional `details` (`metav1.StatusDetails`).
#[derive(Clone, Debug)]
pub struct ApiError {
    /// HTTP status code, also written to `Status.code`.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, `Invalid`, ...).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, or `Value::Null` for none.
    pub details: Value,
}

fn resource_details(res: &ResourceKind, name: &str) -> Value {
    let mut d = json!({"name": name, "kind": res.plural});
    if !res.group.is_empty() {
        d["group"] = json!(res.group);
    }
    d
}

impl ApiError {
    /// A failure without details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: Value::Null }
    }

    /// Adds `details`.
    #[must_use]
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = details;
        self
    }

    /// 404 `nodes "x" not found`.
    pub fn not_found(res: &ResourceKind, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", res.qualified()))
            .with_details(resource_details(res, name))
    }

    /// 404 for a path the server does not serve.
    pub fn no_route() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource").with_details(json!({}))
    }

    /// 409 `... "x" already exists`.
    pub fn already_exists(res: &ResourceKind, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", res.qualified()))
            .with_details(resource_details(res, name))
    }

    /// 409 `Operation cannot be fulfilled on ...: {why}`.
    pub fn conflict(res: &ResourceKind, name: &str, why: &str) -> Self {
        Self::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{name}\": {why}", res.qualified()))
            .with_details(resource_details(res, name))
    }

    /// 409 for a stale `metadata.resourceVersion` (optimistic concurrency).
    pub fn stale(res: &ResourceKind, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 `Kind.group "x" is invalid: field: detail`.
    pub fn invalid(res: &ResourceKind, name: &str, field: &str, cause: &str, detail: &str) -> Self {
        let gk = if res.group.is_empty() { res.kind.to_owned() } else { format!("{}.{}", res.kind, res.group) };
        let mut details = json!({
            "name": name, "kind": res.kind,
            "causes": [{"reason": cause, "message": detail, "field": field}],
        });
        if !res.group.is_empty() {
            details["group"] = json!(res.group);
        }
        Self::new(422, "Invalid", format!("{gk} \"{name}\" is invalid: {field}: {detail}")).with_details(details)
    }

    /// 422 for several field errors `(field, cause reason, detail)`, worded as the apiserver
    /// words a `field.ErrorList`: `Kind.group "x" is invalid: [a: ..., b: ...]` (no brackets
    /// for one error).
    pub fn invalid_all(res: &ResourceKind, name: &str, causes: &[(String, &'static str, String)]) -> Self {
        let gk = if res.group.is_empty() { res.kind.to_owned() } else { format!("{}.{}", res.kind, res.group) };
        let lines: Vec<String> = causes.iter().map(|(f, _, d)| format!("{f}: {d}")).collect();
        let list = if let [one] = lines.as_slice() { one.clone() } else { format!("[{}]", lines.join(", ")) };
        let causes: Vec<Value> =
            causes.iter().map(|(f, r, d)| json!({"reason": r, "message": d, "field": f})).collect();
        let mut details = json!({"name": name, "kind": res.kind, "causes": causes});
        if !res.group.is_empty() {
            details["group"] = json!(res.group);
        }
        Self::new(422, "Invalid", format!("{gk} \"{name}\" is invalid: {list}")).with_details(details)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(res: &ResourceKind, verb: &str) -> Self {
        Self::new(405, "MethodNotAllowed", format!("{verb} is not supported on resources of kind \"{}\"", res.plural))
            .with_details(json!({}))
    }

    /// 415 for an unsupported patch or body media type.
    pub fn unsupported_media(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 503 as an unavailable apiserver (or aggregated API) answers.
    pub fn unavailable() -> Self {
        Self::new(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    }

    /// The `metav1.Status` body.
    pub fn status_json(&self) -> Value {
        let mut v = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if !self.details.is_null() {
            v["details"] = self.details.clone();
        }
        v
    }

    /// The HTTP response carrying [`ApiError::status_json`].
    pub fn response(&self) -> Response<Body> {
        json_response(self.code, &self.status_json())
    }
}

/// A JSON response with the given status code.
pub fn json_response(code: u16, body: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(body).expect("JSON serializes");
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(bytes))
        .expect("response builds")
}

/// A `metav1.Status` success body (what DELETE of an immediately removed object and a
/// successful eviction answer).
pub fn success_status(code: u16, details: Option<Value>) -> Value {
    let mut v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"});
    if code != 200 {
        v["code"] = json!(code);
    }
    if let Some(d) = details {
        v["details"] = d;
    }
    v
}
