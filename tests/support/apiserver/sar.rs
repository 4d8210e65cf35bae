//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`, answered from configured
//! allow rules (RBAC-like: anything not allowed is denied), with recording, artificial
//! latency, failure modes and a concurrency high-water mark.

use super::errors::{ApiError, json_response};
use super::server::{Inner, Req, lock};
use super::{SarFailure, Subject};
use axum::body::Body;
use hyper::{Method, Response};
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// One allow rule.
#[derive(Clone, Debug)]
pub struct SarRule {
    /// Who.
    pub subject: Subject,
    /// Verb, or `*`.
    pub verb: String,
    /// Resource (`nodes`, `nodemaintenances/status`), or `*`.
    pub resource: String,
    /// One object name (`resourceNames`), or `None` for every name (including a request
    /// without a name).
    pub name: Option<String>,
}

/// SAR configuration and observations.
#[derive(Debug, Default)]
pub struct SarState {
    /// Allow rules.
    pub rules: Mutex<Vec<SarRule>>,
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
    /// Who the client is (the stand-in does not authenticate): user name and groups, used
    /// by SelfSubjectReview and SelfSubjectAccessReview. Default: `kubernetes-admin` in
    /// `system:masters`.
    pub current_user: Mutex<Option<(String, Vec<String>)>>,
}

fn current_user(state: &SarState) -> (String, Vec<String>) {
    lock(&state.current_user)
        .clone()
        .unwrap_or_else(|| ("kubernetes-admin".into(), vec!["system:masters".into(), "system:authenticated".into()]))
}

/// `POST selfsubjectreviews`: who the client is.
pub fn self_subject_review(inner: &Inner) -> Response<Body> {
    let (user, groups) = current_user(&inner.sar);
    json_response(
        201,
        &json!({
            "kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "status": {"userInfo": {"username": user, "groups": groups}},
        }),
    )
}

/// `POST selfsubjectaccessreviews`: the client's own access, answered from the rules for
/// the current user.
pub async fn handle_self(inner: &Inner, req: &Req) -> Result<Response<Body>, ApiError> {
    let mut body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded: {e}")))?;
    let (user, groups) = current_user(&inner.sar);
    body["spec"]["user"] = json!(user);
    body["spec"]["groups"] = json!(groups);
    let (allowed, reason) = evaluate(&lock(&inner.sar.rules), &body["spec"]);
    body["kind"] = json!("SelfSubjectAccessReview");
    body["status"] = json!({"allowed": allowed, "reason": reason});
    Ok(json_response(201, &body))
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

impl Subject {
    fn matches(&self, user: &str, groups: &[&str]) -> bool {
        match self {
            Subject::User(u) => *u == user,
            Subject::Group(g) => groups.contains(g),
        }
    }
}

/// Whether the rules allow the SAR `spec`, and the reason to report.
pub fn evaluate(rules: &[SarRule], spec: &Value) -> (bool, String) {
    let user = spec.get("user").and_then(Value::as_str).unwrap_or_default();
    let groups: Vec<&str> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (verb, resource, name) = if let Some(attrs) = spec.get("resourceAttributes") {
        let sub = s(attrs, "subresource");
        let resource = if sub.is_empty() { s(attrs, "resource") } else { format!("{}/{sub}", s(attrs, "resource")) };
        (s(attrs, "verb"), resource, s(attrs, "name"))
    } else {
        let attrs = spec.get("nonResourceAttributes").cloned().unwrap_or_default();
        (s(&attrs, "verb"), String::new(), String::new())
    };
    for rule in rules {
        let verb_ok = rule.verb == "*" || rule.verb == verb;
        let resource_ok = rule.resource == "*" || (!resource.is_empty() && rule.resource == resource);
        let name_ok = rule.name.as_ref().is_none_or(|n| !name.is_empty() && *n == name);
        if rule.subject.matches(user, &groups) && verb_ok && resource_ok && name_ok {
            let (kind, who) = match &rule.subject {
                Subject::User(u) => ("User", u),
                Subject::Group(g) => ("Group", g),
            };
            let target = rule.name.as_ref().map(|n| format!(" {n}")).unwrap_or_default();
            let reason =
                format!("RBAC: allowed by stand-in rule to {kind} \"{who}\" ({} {}{target})", rule.verb, rule.resource);
            return (true, reason);
        }
    }
    (false, String::new())
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
    let has_user = spec.get("user").and_then(Value::as_str).is_some_and(|u| !u.is_empty())
        || spec.get("groups").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
    if !has_user {
        return Err(ApiError::new(
            422,
            "Invalid",
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid value: \"\": at least one of user or group must be specified",
        ));
    }
    if spec.get("resourceAttributes").is_some() == spec.get("nonResourceAttributes").is_some() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let (allowed, reason) = evaluate(&lock(&inner.sar.rules), &spec);
    let mut status = json!({"allowed": allowed});
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    let out = json!({
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    Ok(json_response(201, &out))
}
