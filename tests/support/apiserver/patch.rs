//! PATCH bodies: JSON merge patch (RFC 7386), strategic merge patch (built-in resources only,
//! with the merge keys the Node and Pod fields use) and
//! server-side apply (approximated: a strategic merge of the applied object for built-in
//! resources, a merge patch for custom resources; no field ownership).

use super::errors::ApiError;
use super::resources::ResourceKind;
use serde_json::{Map, Value};

/// The patch types the product and its libraries send (no JSON patch: a 415).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl PatchKind {
    /// The patch type of a `Content-Type` header, or a 415.
    pub fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        match ct.split(';').next().unwrap_or_default().trim() {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" => Ok(Self::Apply),
            other => Err(ApiError::unsupported_media(format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, \
                 application/apply-patch+yaml (got {other:?})"
            ))),
        }
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))
}

/// Parses an apply body: JSON, or YAML.
pub fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    serde_saphyr::from_str::<Value>(text).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Applies a PATCH body of `kind` to `current` (the stored object) for `res`.
pub fn apply_patch(kind: PatchKind, res: &ResourceKind, current: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    match kind {
        PatchKind::Merge => json_patch::merge(&mut doc, &parse_json(body)?),
        PatchKind::Strategic if res.custom => {
            return Err(ApiError::unsupported_media(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
            ));
        }
        PatchKind::Strategic => strategic_merge(&mut doc, &parse_json(body)?, ""),
        PatchKind::Apply => {
            let applied = parse_apply_body(body)?;
            if res.custom { json_patch::merge(&mut doc, &applied) } else { strategic_merge(&mut doc, &applied, "") }
        }
    }
    Ok(doc)
}

/// Merge key of a list at `path` (dotted, from the object root), per the Kubernetes types'
/// `patchMergeKey` tags; `None` means the list is replaced.
pub fn merge_key(path: &str) -> Option<&'static str> {
    match path {
        "status.conditions" | "status.addresses" => Some("type"),
        "metadata.ownerReferences" => Some("uid"),
        "spec.containers" | "spec.initContainers" | "spec.volumes" => Some("name"),
        _ => None,
    }
}

/// Lists of scalars merged as sets (`patchStrategy:merge` without a key).
fn is_primitive_set(path: &str) -> bool {
    path == "metadata.finalizers"
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip_directives(v))).collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Strategic merge patch of `patch` into `target`; `path` is the dotted path of `target`.
pub fn strategic_merge(target: &mut Value, patch: &Value, path: &str) {
    let Value::Object(pm) = patch else {
        *target = patch.clone();
        return;
    };
    if pm.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = strip_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let tm = target.as_object_mut().expect("object");
    for (k, pv) in pm {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (tm.get_mut(field), pv) {
                list.retain(|x| !gone.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let child = join(path, k);
        match pv {
            Value::Null => {
                tm.remove(k);
            }
            Value::Array(items) => {
                if let Some(key) = merge_key(&child) {
                    merge_keyed_list(tm.entry(k.clone()).or_insert(Value::Array(vec![])), items, key, &child);
                } else if is_primitive_set(&child) {
                    let list = tm.entry(k.clone()).or_insert(Value::Array(vec![]));
                    if !list.is_array() {
                        *list = Value::Array(vec![]);
                    }
                    let list = list.as_array_mut().expect("array");
                    for item in items {
                        if !list.contains(item) {
                            list.push(item.clone());
                        }
                    }
                } else {
                    tm.insert(k.clone(), strip_directives(pv));
                }
            }
            Value::Object(_) => strategic_merge(tm.entry(k.clone()).or_insert(Value::Null), pv, &child),
            scalar => {
                tm.insert(k.clone(), scalar.clone());
            }
        }
    }
}

fn merge_keyed_list(target: &mut Value, items: &[Value], key: &str, path: &str) {
    if items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace")) {
        *target = Value::Array(items.iter().filter(|i| i.get("$patch").is_none()).map(strip_directives).collect());
        return;
    }
    if !target.is_array() {
        *target = Value::Array(vec![]);
    }
    let list = target.as_array_mut().expect("array");
    for item in items {
        let id = item.get(key).cloned().unwrap_or(Value::Null);
        let pos = list.iter().position(|t| t.get(key) == Some(&id));
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            if let Some(p) = pos {
                list.remove(p);
            }
            continue;
        }
        match pos {
            Some(p) => strategic_merge(&mut list[p], item, path),
            None => list.push(strip_directives(item)),
        }
    }
}
