//! What kube-apiserver 1.37 does to a `lifecycle.k8s.io/v1alpha1` EvictionRequest or Eviction
//! written through the main resource (KEP-4563), so that a request the real API would refuse
//! fails in tests the same way. Each rule names the upstream file it comes from:
//!
//! - `pkg/registry/lifecycle/evictionrequest/strategy.go` (kubernetes/kubernetes):
//!   `PrepareForCreate` drops `status` and sets `generation` 1, `PrepareForUpdate` keeps
//!   `status` and bumps `generation` when `spec` changes.
//! - `pkg/apis/lifecycle/v1alpha1/zz_generated.validations.go`, generated from the
//!   `+k8s:` tags of kubernetes/api `lifecycle/v1alpha1/types.go`: `spec.target` is a union
//!   whose one member is `pod` and is immutable; `spec.target.pod.name` is required and a
//!   `k8s-long-name` (DNS-1123 subdomain); `spec.target.pod.uid` is required and a `k8s-uuid`
//!   (lowercase 8-4-4-4-12); `spec.requester` is required, immutable and a
//!   `k8s-prefixed-label-key`; `spec.intent` is required and one of `Eviction`, `Withdrawn`.
//!   A field an update leaves unchanged is not validated again.
//! - `pkg/apis/lifecycle/v1alpha1/validation.go`: `ValidateCustom_EvictionRequestSpec_Requester`
//!   refuses requesters under `*.k8s.io` and `*.kubernetes.io`, through
//!   `ValidateForbiddenReservedDomainSuffixes` of `pkg/apis/core/v1/validation.go`.
//! - kubernetes/apimachinery `pkg/api/validate/strfmt.go` and `pkg/api/validate/content/
//!   {kube,dns}.go`: the formats and their messages.
//!
//! The checks are written here independently of the product's own requester check
//! (`src/api/requester.rs`): the stand-in is the oracle the product is tested against.
//! Not emulated: `/status` validation (condition and `observedGeneration` rules), the
//! Eviction's status rules (`ValidateEvictionStatusUpdate`), and the `metadata.name` format
//! beyond the store's subdomain check.

use super::errors::ApiError;
use super::meta::{meta_mut, meta_str, valid_name};
use super::resources::{EVICTION_REQUESTS, EVICTIONS, ResourceKind};
use serde_json::{Value, json};

/// One field error: (field path, `StatusCause.reason`, detail).
type Cause = (String, &'static str, String);

fn invalid(field: &str, value: &str, msg: &str) -> Cause {
    (field.to_owned(), "FieldValueInvalid", format!("Invalid value: {value:?}: {msg}"))
}

fn required(field: &str) -> Cause {
    (field.to_owned(), "FieldValueRequired", "Required value".to_owned())
}

/// `content.IsLabelKey` + `content.IsPrefixedLabelKey` (apimachinery `content/kube.go`).
fn prefixed_label_key(field: &str, value: &str) -> Option<Cause> {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.len() <= 63
            && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && n.starts_with(|c: char| c.is_ascii_alphanumeric())
            && n.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let msg = match value.split('/').collect::<Vec<_>>().as_slice() {
        [_] if !name_ok(value) => {
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        }
        [_] => "must include a prefix (e.g. 'example.com/key')",
        ["", _] => "prefix part must be non-empty",
        [prefix, _] if !valid_name(prefix) => {
            "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        }
        [_, name] if !name_ok(name) => {
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        }
        [_, _] => return None,
        _ => {
            "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        }
    };
    Some(invalid(field, value, msg))
}

/// `ValidateForbiddenReservedDomainSuffixes(.., [".k8s.io", ".kubernetes.io"])`.
fn reserved_domain(field: &str, value: &str) -> Option<Cause> {
    let prefix = value.split('/').next().unwrap_or_default().trim().to_lowercase();
    let clean = prefix.trim_end_matches('.');
    let reserved = [".k8s.io", ".kubernetes.io"].iter().any(|s| clean.ends_with(s) || clean == s.trim_matches('.'));
    reserved.then(|| invalid(field, value, "domain names *.k8s.io, *.kubernetes.io are reserved"))
}

/// `validate.UUID` (apimachinery `strfmt.go`).
fn is_uuid(v: &str) -> bool {
    v.len() == 36
        && v.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> Option<&'a str> {
    obj.pointer(pointer).and_then(Value::as_str)
}

/// The `spec.target` checks shared by EvictionRequest and Eviction: immutable on update,
/// a union of `pod`, the pod's name and uid required and well-formed.
fn target(new: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let (now, before) = (new.pointer("/spec/target"), old.and_then(|o| o.pointer("/spec/target")));
    if let Some(before) = old.map(|_| before) {
        if now != before {
            causes.push(invalid("spec.target", "", "field is immutable"));
        }
        // Unchanged data is not validated again.
        return;
    }
    let Some(pod) = now.and_then(|t| t.get("pod")).filter(|p| !p.is_null()) else {
        causes.push(invalid("spec.target", "", "must specify one of: `pod`"));
        return;
    };
    match pod.get("name").and_then(Value::as_str).unwrap_or_default() {
        "" => causes.push(required("spec.target.pod.name")),
        name if !valid_name(name) => causes.push(invalid(
            "spec.target.pod.name",
            name,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )),
        _ => {}
    }
    match pod.get("uid").and_then(Value::as_str).unwrap_or_default() {
        "" => causes.push(required("spec.target.pod.uid")),
        uid if !is_uuid(uid) => {
            causes.push(invalid("spec.target.pod.uid", uid, "must be a lowercase UUID in 8-4-4-4-12 format"));
        }
        _ => {}
    }
}

/// The EvictionRequest spec checks of create (`old` None) and update.
fn eviction_request(new: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    target(new, old, &mut causes);
    let requester = str_at(new, "/spec/requester").unwrap_or_default();
    let old_requester = old.map(|o| str_at(o, "/spec/requester").unwrap_or_default());
    match old_requester {
        Some(before) if before != requester => causes.push(invalid("spec.requester", requester, "field is immutable")),
        Some(_) => {}
        None if requester.is_empty() => causes.push(required("spec.requester")),
        None => causes.extend(
            reserved_domain("spec.requester", requester)
                .into_iter()
                .chain(prefixed_label_key("spec.requester", requester)),
        ),
    }
    let intent = str_at(new, "/spec/intent").unwrap_or_default();
    let intent_changed = old.is_none_or(|o| str_at(o, "/spec/intent").unwrap_or_default() != intent);
    match intent {
        _ if !intent_changed => {}
        "" => causes.push(required("spec.intent")),
        "Eviction" | "Withdrawn" => {}
        other => causes.push((
            "spec.intent".into(),
            "FieldValueNotSupported",
            format!("Unsupported value: {other:?}: supported values: \"Eviction\", \"Withdrawn\""),
        )),
    }
    causes
}

/// Applies the registry strategy and validation of `res` to a main-resource write: `old`
/// is the stored object (None on create), `new` the object about to be stored (changed in
/// place: `status` and `generation`). Other resources pass unchanged.
///
/// # Errors
/// 422 Invalid listing every field error, as the apiserver reports a `field.ErrorList`.
pub fn admit(res: &ResourceKind, old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
    let causes = if *res == EVICTION_REQUESTS {
        eviction_request(new, old)
    } else if *res == EVICTIONS {
        let mut causes = Vec::new();
        target(new, old, &mut causes);
        causes
    } else {
        return Ok(());
    };
    if !causes.is_empty() {
        return Err(ApiError::invalid_all(res, meta_str(new, "name"), &causes));
    }
    let generation = match old {
        None => 1,
        Some(o) => {
            let before = o.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
            if o.get("spec") == new.get("spec") { before } else { before + 1 }
        }
    };
    if old.is_none() {
        new.as_object_mut().map(|m| m.remove("status"));
    }
    meta_mut(new).insert("generation".into(), json!(generation));
    Ok(())
}
