//! Pod deletion (optionally graceful: the pod keeps a `deletionTimestamp` for a configured
//! delay, as while the kubelet stops it) and the Eviction API (`pods/eviction`, policy/v1).

use super::errors::{ApiError, json_response, success_status};
use super::handlers::delete_options;
use super::meta::meta_str;
use super::resources::PODS;
use super::server::{Inner, Req, lock};
use super::store::{DeleteOpts, Deleted};
use super::{EvictionAttempt, Refusal};
use axum::body::Body;
use hyper::Response;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Eviction configuration and records.
#[derive(Debug, Default)]
pub struct PodsState {
    /// Pods whose eviction is refused, by (namespace, name).
    pub refusals: HashMap<(String, String), Refusal>,
    /// How long a deleted or evicted pod stays (with `deletionTimestamp`) before it is
    /// removed; zero removes it at once.
    pub deletion_delay: Duration,
    /// Every eviction request, in order.
    pub attempts: Vec<EvictionAttempt>,
    /// Pods whose DELETE is refused, by (namespace, name): what a pod changed between a read
    /// and a conditional delete (409), or a policy denying deletes (403), answers.
    pub delete_refusals: HashMap<(String, String), Refusal>,
}

/// The refusal of a `DELETE` of this pod, if one was set (evictions delete regardless, as
/// the eviction handler's own delete skips admission).
pub fn refused_delete(inner: &Arc<Inner>, ns: &str, name: &str) -> Result<(), ApiError> {
    let refusal = lock(&inner.pods).delete_refusals.get(&(ns.to_owned(), name.to_owned())).cloned();
    refusal.map_or(Ok(()), |r| Err(refusal_error(&r)))
}

/// Deletes a pod: at once, or gracefully when a deletion delay is configured and the
/// request did not ask for `gracePeriodSeconds: 0`.
pub fn delete_pod(
    inner: &Arc<Inner>,
    ns: &str,
    name: &str,
    mut opts: DeleteOpts,
    grace: Option<i64>,
) -> Result<Deleted, ApiError> {
    let delay = lock(&inner.pods).deletion_delay;
    let graceful = grace != Some(0) && !delay.is_zero();
    opts.graceful = graceful.then(|| i64::try_from(delay.as_secs().max(1)).unwrap_or(i64::MAX));
    let out = inner.store.delete(&PODS, ns, name, &opts)?;
    if let Deleted::Pending(obj) = &out
        && graceful
    {
        let (inner, ns, name, uid) = (inner.clone(), ns.to_owned(), name.to_owned(), meta_str(obj, "uid").to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            inner.store.finish_graceful(&PODS, &ns, &name, &uid);
        });
    }
    Ok(out)
}

fn refusal_error(refusal: &Refusal) -> ApiError {
    match refusal {
        Refusal::Pdb { pdb } => {
            ApiError::new(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.")
                .with_details(json!({"causes": [{
                    "reason": "DisruptionBudget",
                    "message": format!("The disruption budget {pdb} needs 1 healthy pods and has 1 currently"),
                }]}))
        }
        Refusal::Interceptor { message } => {
            ApiError::new(429, "TooManyRequests", message.clone()).with_details(json!({}))
        }
        Refusal::Error { code, message } => {
            let reason = match code {
                400 => "BadRequest",
                403 => "Forbidden",
                404 => "NotFound",
                409 => "Conflict",
                429 => "TooManyRequests",
                503 => "ServiceUnavailable",
                504 => "Timeout",
                _ => "InternalError",
            };
            ApiError::new(*code, reason, message.clone())
        }
    }
}

/// `POST /api/v1/namespaces/{ns}/pods/{name}/eviction`.
///
/// Only the policy/v1 field `deleteOptions` is read (the apiserver drops unknown fields
/// such as `delete_options`, answering with a `Warning` header).
pub async fn evict(inner: &Arc<Inner>, ns: &str, name: &str, req: &Req) -> Result<Response<Body>, ApiError> {
    let body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded: {e}")))?;
    let unknown: Vec<String> = body
        .as_object()
        .map(|m| {
            m.keys()
                .filter(|k| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "deleteOptions"))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let body_name = meta_str(&body, "name");
    let uid = body.pointer("/deleteOptions/preconditions/uid").and_then(Value::as_str).map(str::to_owned);
    let result = if !body_name.is_empty() && body_name != name {
        Err(ApiError::bad_request("name in URL does not match name in Eviction object"))
    } else {
        evict_pod(inner, ns, name, &body, uid.as_deref(), req)
    };
    let code = result.as_ref().map_or_else(|e| e.code, |_| 201);
    lock(&inner.pods).attempts.push(EvictionAttempt { namespace: ns.to_owned(), name: name.to_owned(), uid, code });
    let mut resp = result?;
    for field in unknown {
        if let Ok(v) = format!("299 - \"unknown field \\\"{field}\\\"\"").parse() {
            resp.headers_mut().append("warning", v);
        }
    }
    Ok(resp)
}

fn evict_pod(
    inner: &Arc<Inner>,
    ns: &str,
    name: &str,
    body: &Value,
    uid: Option<&str>,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let pod = inner.store.get(&PODS, ns, name).ok_or_else(|| ApiError::not_found(&PODS, name))?;
    if let Some(uid) = uid
        && uid != meta_str(&pod, "uid")
    {
        let why =
            format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {}", meta_str(&pod, "uid"));
        return Err(ApiError::conflict(&PODS, name, &why));
    }
    let terminal = matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"));
    let terminating = !meta_str(&pod, "deletionTimestamp").is_empty();
    if !terminal && !terminating {
        let refusal = lock(&inner.pods).refusals.get(&(ns.to_owned(), name.to_owned())).cloned();
        if let Some(refusal) = refusal {
            return Err(refusal_error(&refusal));
        }
    }
    let opts_req = Req {
        method: req.method.clone(),
        path: req.path.clone(),
        query: req.query.clone(),
        content_type: req.content_type.clone(),
        body: body.get("deleteOptions").map(|d| serde_json::to_vec(d).unwrap_or_default()).unwrap_or_default().into(),
        kill: req.kill.clone(),
        user_agent: req.user_agent.clone(),
    };
    let (opts, grace) = delete_options(&opts_req)?;
    delete_pod(inner, ns, name, opts, grace)?;
    Ok(json_response(201, &success_status(201, None)))
}
