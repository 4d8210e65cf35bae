//! The generic REST verbs (list, watch, get, create, update, patch, delete) on the stored
//! resources, and the `status` subresource.

use super::errors::{ApiError, json_response, success_status};
use super::meta::{meta_mut, meta_str};
use super::patch::{PatchKind, apply_patch, parse_apply_body};
use super::resources::{EVENTS, LEASES, PODS, ResourceKind, Target};
use super::select::Filter;
use super::server::{Inner, Req, lock};
use super::ssa::Writer;
use super::store::{DeleteOpts, Deleted, Mode};
use super::{pods, watch};
use axum::body::Body;
use hyper::{Method, Response};
use serde_json::{Value, json};
use std::sync::Arc;

/// Routes a request on a stored resource.
pub async fn dispatch(
    inner: &Arc<Inner>,
    res: &'static ResourceKind,
    namespace: Option<String>,
    target: Target,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let ns = namespace.clone().unwrap_or_default();
    match (target, &req.method) {
        (Target::Collection, &Method::GET) => {
            let filter = Filter::parse(namespace.as_deref(), req.param("labelSelector"), req.param("fieldSelector"))?;
            if matches!(req.param("watch"), Some("true" | "1")) {
                return watch::serve(inner, res, filter, req);
            }
            list(inner, res, &filter, req)
        }
        (Target::Collection, &Method::POST) => {
            let obj = parse_body(&req.body)?;
            let out = inner.store.create(res, &ns, obj, &Writer::update(&req.field_manager()))?;
            record_event(inner, res, &out);
            Ok(json_response(201, &out))
        }
        (Target::Item(name), &Method::GET) => get(inner, res, &ns, &name),
        (Target::Item(name), &Method::PUT) => put(inner, res, &ns, &name, Mode::Main, req),
        (Target::Item(name), &Method::PATCH) => patch(inner, res, &ns, &name, Mode::Main, req),
        (Target::Item(name), &Method::DELETE) => delete(inner, res, &ns, &name, req),
        (Target::Sub(name, sub), m) if sub == "status" && res.status_subresource => match *m {
            Method::GET => get(inner, res, &ns, &name),
            Method::PUT => put(inner, res, &ns, &name, Mode::Status, req),
            Method::PATCH => patch(inner, res, &ns, &name, Mode::Status, req),
            _ => Err(ApiError::method_not_allowed(res, m.as_str())),
        },
        (Target::Sub(name, sub), &Method::POST) if sub == "eviction" && *res == PODS => {
            pods::evict(inner, &ns, &name, req).await
        }
        (Target::Sub(..), _) => Err(ApiError::no_route()),
        (_, m) => Err(ApiError::method_not_allowed(res, m.as_str())),
    }
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body of the request could not be decoded: {e}")))?;
    if v.is_object() { Ok(v) } else { Err(ApiError::bad_request("the body of the request is not an object")) }
}

fn record_event(inner: &Inner, res: &ResourceKind, obj: &Value) {
    if *res == EVENTS {
        lock(&inner.events).push(obj.clone());
    }
}

/// LIST, paginated like the apiserver when `limit` is set: the `continue` token carries the
/// list's resourceVersion and the last key returned (pages are read from the current state,
/// not from a snapshot at that resourceVersion); a token older than the compacted history
/// is a 410 Expired.
fn list(inner: &Inner, res: &ResourceKind, filter: &Filter, req: &Req) -> Result<Response<Body>, ApiError> {
    let key = |o: &Value| (meta_str(o, "namespace").to_owned(), meta_str(o, "name").to_owned());
    let (token_rv, after) = match req.param("continue") {
        None => (None, None),
        Some(token) => {
            let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
            let (trv, last) = token.split_once(':').ok_or_else(bad)?;
            let trv: u64 = trv.parse().map_err(|_| bad())?;
            let (ns, name) = last.split_once('/').ok_or_else(bad)?;
            if trv < inner.store.compacted() {
                return Err(ApiError::new(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. \
                     You can start a new list without the continue parameter.",
                ));
            }
            (Some(trv), Some((ns.to_owned(), name.to_owned())))
        }
    };
    let limit = req.param("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0);
    let (mut page, rv, remaining) = inner.store.list_page(res, filter, after.as_ref(), limit);
    let list_rv = token_rv.unwrap_or(rv);
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if remaining > 0 {
        let (ns, name) = key(page.last().expect("limit > 0"));
        metadata["continue"] = json!(format!("{list_rv}:{ns}/{name}"));
        metadata["remainingItemCount"] = json!(remaining);
    }
    if !res.custom {
        // Built-in lists carry the type once, not per item.
        for item in &mut page {
            if let Some(m) = item.as_object_mut() {
                m.remove("apiVersion");
                m.remove("kind");
            }
        }
    }
    Ok(json_response(
        200,
        &json!({
            "kind": format!("{}List", res.kind),
            "apiVersion": res.api_version(),
            "metadata": metadata,
            "items": page,
        }),
    ))
}

fn get(inner: &Inner, res: &ResourceKind, ns: &str, name: &str) -> Result<Response<Body>, ApiError> {
    let obj = inner.store.get(res, ns, name).ok_or_else(|| ApiError::not_found(res, name))?;
    Ok(json_response(200, &obj))
}

fn put(
    inner: &Inner,
    res: &ResourceKind,
    ns: &str,
    name: &str,
    mode: Mode,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let obj = parse_body(&req.body)?;
    // AllowCreateOnUpdate of the real registries.
    let create_missing = *res == LEASES || *res == EVENTS;
    let existed = inner.store.get(res, ns, name).is_some();
    let writer = Writer::update(&req.field_manager());
    let out = inner.store.update(res, ns, name, mode, create_missing, &writer, |_| Ok(obj))?;
    record_event(inner, res, &out);
    Ok(json_response(if existed { 200 } else { 201 }, &out))
}

fn patch(
    inner: &Inner,
    res: &ResourceKind,
    ns: &str,
    name: &str,
    mode: Mode,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    let kind = PatchKind::from_content_type(&req.content_type)?;
    if kind == PatchKind::Apply && req.param("fieldManager").is_none() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
        ));
    }
    let existed = inner.store.get(res, ns, name).is_some();
    let create_missing = kind == PatchKind::Apply;
    let writer = if kind == PatchKind::Apply {
        let force = req.param("force") == Some("true");
        Writer { manager: req.field_manager(), apply: Some((parse_apply_body(&req.body)?, force)) }
    } else {
        Writer::update(&req.field_manager())
    };
    let out = inner.store.update(res, ns, name, mode, create_missing, &writer, |current| match current {
        Some(cur) => apply_patch(kind, res, cur, &req.body),
        None => {
            let mut obj = parse_apply_body(&req.body)?;
            if !obj.is_object() {
                return Err(ApiError::bad_request("the applied configuration is not an object"));
            }
            meta_mut(&mut obj).entry("name").or_insert_with(|| json!(name));
            Ok(obj)
        }
    })?;
    record_event(inner, res, &out);
    Ok(json_response(if existed { 200 } else { 201 }, &out))
}

/// Reads `DeleteOptions` from the body and query.
pub fn delete_options(req: &Req) -> Result<(DeleteOpts, Option<i64>), ApiError> {
    let body: Value = if req.body.is_empty() { Value::Null } else { parse_body(&req.body)? };
    let s = |p: &str| body.pointer(p).and_then(Value::as_str).map(str::to_owned);
    if body.get("dryRun").is_some() {
        return Err(ApiError::bad_request("the stand-in does not emulate dry runs"));
    }
    let grace = body
        .get("gracePeriodSeconds")
        .and_then(Value::as_i64)
        .or_else(|| req.param("gracePeriodSeconds").and_then(|g| g.parse().ok()));
    let opts = DeleteOpts {
        uid: s("/preconditions/uid"),
        resource_version: s("/preconditions/resourceVersion"),
        graceful: None,
    };
    Ok((opts, grace))
}

fn delete(inner: &Arc<Inner>, res: &ResourceKind, ns: &str, name: &str, req: &Req) -> Result<Response<Body>, ApiError> {
    let (opts, grace) = delete_options(req)?;
    let outcome = if *res == PODS {
        pods::refused_delete(inner, ns, name)?;
        pods::delete_pod(inner, ns, name, opts, grace)?
    } else {
        inner.store.delete(res, ns, name, &opts)?
    };
    Ok(match outcome {
        Deleted::Pending(obj) => json_response(200, &obj),
        // Pods return the deleted object (ReturnDeletedObject); the others a Status.
        Deleted::Gone(obj) if *res == PODS => json_response(200, &obj),
        Deleted::Gone(obj) => {
            let mut details = json!({"name": name, "kind": res.plural, "uid": meta_str(&obj, "uid")});
            if !res.group.is_empty() {
                details["group"] = json!(res.group);
            }
            json_response(200, &success_status(200, Some(details)))
        }
    })
}
