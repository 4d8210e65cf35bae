//! Object metadata helpers and the registry's update strategy (server-owned metadata,
//! status subresource split, finalizers on deleting objects, generation).

use super::errors::ApiError;
use super::resources::ResourceKind;
use super::types::Mode;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// Now as RFC 3339 with seconds, like `metav1.Time`.
pub fn now_rfc3339() -> String {
    rfc3339(k8s_openapi::jiff::Timestamp::now())
}

/// `t` as RFC 3339 with seconds.
pub fn rfc3339(t: k8s_openapi::jiff::Timestamp) -> String {
    k8s_openapi::jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).expect("timestamp formats")
}

/// A random version-4 UUID.
pub fn new_uid() -> String {
    use std::hash::{BuildHasher, RandomState};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let state = RandomState::new();
    let (a, b) = (state.hash_one((n, 1u8)), state.hash_one((n, 2u8)));
    let mut h: Vec<char> = format!("{a:016x}{b:016x}").chars().collect();
    h[12] = '4';
    h[16] = ['8', '9', 'a', 'b'][(h[16].to_digit(16).unwrap_or(0) & 3) as usize];
    let h: String = h.into_iter().collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// A string field under `metadata`, or `""`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

/// `metadata` as a mutable map (created when missing).
pub fn meta_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    obj["metadata"].as_object_mut().expect("metadata is an object")
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The object without `resourceVersion` and `managedFields` (no-op write detection).
pub fn without_volatile(obj: &Value) -> Value {
    let mut v = obj.clone();
    let m = meta_mut(&mut v);
    m.remove("resourceVersion");
    m.remove("managedFields");
    v
}

/// Everything but `metadata` and `status` (what bumps `generation`).
pub fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

/// A DNS-1123 subdomain.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Applies the registry's update strategy: server-owned metadata is kept, the status
/// subresource split, new finalizers on a deleting object refused, `generation` bumped.
pub fn normalize(res: &ResourceKind, mode: Mode, old: &Value, mut new: Value) -> Result<Value, ApiError> {
    if mode == Mode::Status {
        let mut out = old.clone();
        match new.get("status") {
            Some(s) => out["status"] = s.clone(),
            None => {
                out.as_object_mut().expect("object").remove("status");
            }
        }
        return Ok(out);
    }
    if !new.is_object() {
        return Err(ApiError::bad_request("the body of the request is not an object"));
    }
    new["apiVersion"] = json!(res.api_version());
    new["kind"] = json!(res.kind);
    if res.status_subresource {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                new.as_object_mut().expect("object").remove("status");
            }
        }
    }
    let name = meta_str(old, "name").to_owned();
    let m = meta_mut(&mut new);
    for f in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace"]
    {
        match old.get("metadata").and_then(|o| o.get(f)) {
            Some(v) => m.insert(f.into(), v.clone()),
            None => m.remove(f),
        };
    }
    if !meta_str(old, "deletionTimestamp").is_empty() {
        let before = finalizers(old);
        let added: Vec<String> = finalizers(&new).into_iter().filter(|f| !before.contains(f)).collect();
        if !added.is_empty() {
            let msg = format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
            );
            return Err(ApiError::invalid(res, &name, "metadata.finalizers", "FieldValueForbidden", &msg));
        }
    }
    if res.custom && spec_part(old) != spec_part(&new) {
        let g = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    Ok(new)
}
