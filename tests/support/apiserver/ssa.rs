//! Field ownership as server-side apply keeps it, reduced to what clients observe:
//! `metadata.managedFields` (FieldsV1), 409 `Apply failed with N conflicts` when an apply
//! without `force` would change a field another manager owns, ownership transfer on
//! updates and forced applies, and removal of fields a manager stops applying (unless
//! another manager owns them). kube-lease-manager's leader election relies on these
//! conflicts for mutual exclusion.
//!
//! Simplifications: lists are atomic (one field each) except the map-lists of built-in
//! resources that strategic merge also merges by key (`status.conditions` by `type`, ...);
//! fields are tracked under `spec`, `status`, other top-level keys, and
//! `metadata.labels`, `metadata.annotations`, `metadata.finalizers` and
//! `metadata.ownerReferences`; one entry per (manager, operation), no `subresource`.

use super::errors::ApiError;
use super::meta::{meta_mut, now_rfc3339};
use super::patch::merge_key;
use super::resources::ResourceKind;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

type Path = Vec<String>;

/// Who writes and how.
#[derive(Clone, Debug)]
pub struct Writer {
    /// The field manager (`fieldManager`, else the User-Agent's product name).
    pub manager: String,
    /// `Some((applied configuration, force))` for server-side apply.
    pub apply: Option<(Value, bool)>,
}

impl Writer {
    /// An update (create, PUT or non-apply PATCH) by `manager`.
    pub fn update(manager: &str) -> Self {
        Self { manager: manager.to_owned(), apply: None }
    }
}

struct Entry {
    manager: String,
    operation: String,
    paths: BTreeSet<Path>,
}

/// The key of a map-list element as a path component: `k:{"type":"Ready"}`.
fn key_component(key: &str, element: &Value) -> Option<String> {
    element.get(key).map(|kv| format!("k:{}", json!({key: kv})))
}

fn dotted(prefix: &[String]) -> String {
    prefix.join(".")
}

fn leaves(v: &Value, keyed: bool, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    match v {
        Value::Object(m) if !m.is_empty() || prefix.is_empty() => {
            for (k, child) in m {
                let skip = match prefix.as_slice() {
                    [] => matches!(k.as_str(), "apiVersion" | "kind"),
                    [meta] if meta == "metadata" => {
                        !matches!(k.as_str(), "labels" | "annotations" | "finalizers" | "ownerReferences")
                    }
                    _ => false,
                };
                if !skip {
                    prefix.push(k.clone());
                    leaves(child, keyed, prefix, out);
                    prefix.pop();
                }
            }
        }
        Value::Array(items) if keyed && merge_key(&dotted(prefix)).is_some() && !items.is_empty() => {
            let key = merge_key(&dotted(prefix)).expect("checked");
            for item in items {
                match key_component(key, item) {
                    Some(c) => {
                        prefix.push(c);
                        leaves(item, keyed, prefix, out);
                        prefix.pop();
                    }
                    None => {
                        out.insert(prefix.clone());
                    }
                }
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// Map-lists (`status.conditions` by `type`, ...) are tracked per element on built-in
/// resources, as their OpenAPI `x-kubernetes-list-type: map` makes the apiserver do.
fn leaf_set(res: &ResourceKind, v: &Value) -> BTreeSet<Path> {
    let mut out = BTreeSet::new();
    leaves(v, !res.custom, &mut Vec::new(), &mut out);
    out
}

fn element<'a>(list: &'a Value, component: &str) -> Option<(usize, &'a Value)> {
    let wanted: Value = serde_json::from_str(component.strip_prefix("k:")?).ok()?;
    let (key, kv) = wanted.as_object()?.iter().next()?;
    list.as_array()?.iter().enumerate().find(|(_, e)| e.get(key) == Some(kv))
}

fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| if k.starts_with("k:") { element(cur, k).map(|(_, e)| e) } else { cur.get(k) })
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = v;
    for k in parents {
        let next = if k.starts_with("k:") {
            match element(cur, k) {
                Some((i, _)) => cur.get_mut(i),
                None => None,
            }
        } else {
            cur.get_mut(k)
        };
        match next {
            Some(next) => cur = next,
            None => return,
        }
    }
    if last.starts_with("k:") {
        if let Some((i, _)) = element(cur, last)
            && let Some(list) = cur.as_array_mut()
        {
            list.remove(i);
        }
    } else if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

/// After removing `path`, removes the objects above it that it leaves empty and that the
/// applier does not apply (the apiserver tracks those parents as owned too, so a manager that
/// stops applying `status.drainStatus` loses the whole object, not just its leaves).
fn prune_empty_parents(v: &mut Value, applied: &Value, path: &[String]) {
    for len in (1..path.len()).rev() {
        let parent = &path[..len];
        let empty = value_at(v, parent).is_some_and(|p| p.as_object().is_some_and(Map::is_empty));
        if !empty || value_at(applied, parent).is_some() {
            return;
        }
        remove_at(v, parent);
    }
}

fn parse_fields(v: &Value, prefix: &mut Path, out: &mut BTreeSet<Path>) {
    let Some(m) = v.as_object() else { return };
    for (k, child) in m {
        let component = match k.strip_prefix("f:") {
            Some(name) => name.to_owned(),
            None if k.starts_with("k:") => k.clone(),
            None => continue,
        };
        prefix.push(component);
        if child.as_object().is_none_or(Map::is_empty) {
            out.insert(prefix.clone());
        } else {
            parse_fields(child, prefix, out);
        }
        prefix.pop();
    }
}

fn render_fields(paths: &BTreeSet<Path>) -> Value {
    let mut root = json!({});
    for path in paths {
        let mut cur = &mut root;
        for k in path {
            let key = if k.starts_with("k:") { k.clone() } else { format!("f:{k}") };
            cur = cur.as_object_mut().expect("object").entry(key).or_insert_with(|| json!({}));
        }
    }
    root
}

fn entries(obj: Option<&Value>) -> Vec<Entry> {
    let Some(list) = obj.and_then(|o| o.pointer("/metadata/managedFields")).and_then(Value::as_array) else {
        return Vec::new();
    };
    list.iter()
        .map(|e| {
            let mut paths = BTreeSet::new();
            parse_fields(e.get("fieldsV1").unwrap_or(&Value::Null), &mut Vec::new(), &mut paths);
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            Entry { manager: s("manager"), operation: s("operation"), paths }
        })
        .collect()
}

/// Checks apply conflicts and records field ownership of the write `old` -> `new` in
/// `new.metadata.managedFields` (removing fields the applier stopped applying).
pub fn track(res: &ResourceKind, old: Option<&Value>, new: &mut Value, writer: &Writer) -> Result<(), ApiError> {
    let mut owners = entries(old);
    let empty = Value::Null;
    let before = old.unwrap_or(&empty);
    let op = if writer.apply.is_some() { "Apply" } else { "Update" };
    let is_me = |e: &Entry| e.manager == writer.manager && e.operation == op;
    if owners.iter().all(|e| !is_me(e)) {
        owners.push(Entry { manager: writer.manager.clone(), operation: op.into(), paths: BTreeSet::new() });
    }
    if let Some((applied, force)) = &writer.apply {
        let applied_paths = leaf_set(res, applied);
        let mut conflicts = Vec::new();
        for p in &applied_paths {
            for e in owners.iter_mut().filter(|e| !is_me(e) && e.paths.contains(p)) {
                if value_at(before, p) != value_at(applied, p) {
                    if *force {
                        e.paths.remove(p);
                    } else {
                        conflicts.push((e.manager.clone(), p.clone()));
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(conflict(res, new, &conflicts));
        }
        let me = owners.iter_mut().find(|e| is_me(e)).expect("entry added");
        let dropped: Vec<Path> = me.paths.difference(&applied_paths).cloned().collect();
        me.paths = applied_paths;
        for p in dropped {
            if !owners.iter().any(|e| e.paths.contains(&p)) {
                remove_at(new, &p);
                prune_empty_parents(new, applied, &p);
            }
        }
    } else {
        let changed: Vec<Path> = leaf_set(res, before)
            .union(&leaf_set(res, new))
            .filter(|p| value_at(before, p) != value_at(new, p))
            .cloned()
            .collect();
        for e in &mut owners {
            for p in &changed {
                e.paths.remove(p);
            }
        }
        let me = owners.iter_mut().find(|e| is_me(e)).expect("entry added");
        me.paths.extend(changed.into_iter().filter(|p| value_at(new, p).is_some()));
    }
    let managed: Vec<Value> = owners
        .into_iter()
        .map(|mut e| {
            e.paths.retain(|p| value_at(new, p).is_some());
            e
        })
        .filter(|e| !e.paths.is_empty())
        .map(|e| {
            json!({
                "manager": e.manager, "operation": e.operation, "apiVersion": res.api_version(),
                "time": now_rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": render_fields(&e.paths),
            })
        })
        .collect();
    let m = meta_mut(new);
    if managed.is_empty() {
        m.remove("managedFields");
    } else {
        m.insert("managedFields".into(), Value::Array(managed));
    }
    Ok(())
}

fn conflict(res: &ResourceKind, obj: &Value, conflicts: &[(String, Path)]) -> ApiError {
    let field = |p: &Path| format!(".{}", p.join("."));
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let lines: Vec<String> = conflicts
        .iter()
        .map(|(m, p)| format!("conflict with \"{m}\" using {}: {}", res.api_version(), field(p)))
        .collect();
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, p)| {
            json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\" using {}", res.api_version()), "field": field(p)})
        })
        .collect();
    let message = if let [one] = lines.as_slice() {
        format!("Apply failed with 1 conflict: {one}")
    } else {
        format!("Apply failed with {} conflicts: {}", lines.len(), lines.join("\n"))
    };
    let mut details = json!({"name": name, "kind": res.plural, "causes": causes});
    if !res.group.is_empty() {
        details["group"] = json!(res.group);
    }
    ApiError::new(409, "Conflict", message).with_details(details)
}
