//! Encoding an AdmissionReview response exactly as the apiserver documents it (SPEC 5 "Wire
//! format"): base64 `patch` with `patchType`, the uid echoed, warnings without control
//! characters.

use super::KIND;
use crate::admission::Decision;
use base64::Engine;
use serde::Serialize;

/// metav1.Status as the apiserver reads it from a webhook.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    status: &'static str,
    code: u16,
    reason: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Details<'a>>,
}

#[derive(Serialize)]
struct Details<'a> {
    causes: Vec<Cause<'a>>,
}

#[derive(Serialize)]
struct Cause<'a> {
    reason: &'static str,
    message: String,
    field: &'a str,
}

/// Encodes the response to request `uid` as an AdmissionReview in `api_version`
/// (SPEC 5 "Wire format"). A patch is emitted only when `allowed_patch` is true (the
/// mutating endpoint) and the decision carries a non-empty one. Warnings lose control
/// characters.
///
/// Returns the JSON bytes of the whole AdmissionReview: `apiVersion`, `kind`, then `response`
/// with `uid`, `allowed` and, when there are any, `status`, `patch` and `patchType`,
/// `warnings`, compact, as serde_json writes them. The frame is written directly (strings
/// escaped by serde_json); only the optional members go through serde.
pub fn encode(api_version: &str, uid: &str, decision: &Decision, allowed_patch: bool) -> Vec<u8> {
    let patch = decision
        .patch
        .as_ref()
        .filter(|p| allowed_patch && decision.allowed && !p.0.is_empty())
        .and_then(|p| serde_json::to_vec(p).ok())
        .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes));
    let status = decision.denial.as_ref().map(|d| Status {
        status: "Failure",
        code: d.code,
        reason: d.reason,
        message: &d.message,
        details: (!d.causes.is_empty()).then(|| Details {
            causes: d
                .causes
                .iter()
                .map(|e| Cause { reason: e.cause_reason(), message: e.message(), field: e.path.as_str() })
                .collect(),
        }),
    });
    // Sized so that an answer without a patch or causes needs no reallocation.
    let hint = 96
        + api_version.len()
        + uid.len()
        + patch.as_ref().map_or(0, |p| p.len() + 32)
        + status.as_ref().map_or(0, |s| s.message.len() * 2 + 96)
        + decision.warnings.iter().map(|w| w.len() + 4).sum::<usize>();
    let mut out = Vec::with_capacity(hint);
    out.extend_from_slice(br#"{"apiVersion":"#);
    json(&mut out, api_version);
    out.extend_from_slice(br#","kind":""#);
    out.extend_from_slice(KIND.as_bytes());
    out.extend_from_slice(br#"","response":{"uid":"#);
    json(&mut out, uid);
    out.extend_from_slice(if decision.allowed { br#","allowed":true"# } else { br#","allowed":false"# });
    if let Some(status) = &status {
        out.extend_from_slice(br#","status":"#);
        json(&mut out, status);
    }
    if let Some(patch) = &patch {
        out.extend_from_slice(br#","patch":"#);
        json(&mut out, patch);
        out.extend_from_slice(br#","patchType":"JSONPatch""#);
    }
    if !decision.warnings.is_empty() {
        let warnings: Vec<String> = decision.warnings.iter().map(|w| clean_warning(w)).collect();
        out.extend_from_slice(br#","warnings":"#);
        json(&mut out, &warnings);
    }
    out.extend_from_slice(b"}}");
    out
}

/// Appends `value` as serde_json writes it, compact. Writing these plain values (strings,
/// structs of strings and numbers, no maps) into a `Vec` cannot fail.
fn json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Replaces control characters (which the apiserver would reject in a Warning header) with
/// spaces.
fn clean_warning(w: &str) -> String {
    w.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Denial;
    use crate::field::{FieldError, FieldPath};

    #[test]
    fn warnings_lose_control_characters() {
        assert_eq!(clean_warning("a\nb\u{7}c"), "a b c");
    }

    /// The answer the apiserver must read, as a `Value`.
    fn expected(api_version: &str, uid: &str, d: &Decision, allowed_patch: bool) -> serde_json::Value {
        let mut response = serde_json::json!({"uid": uid, "allowed": d.allowed});
        if let Some(status) = d.denial.as_ref() {
            response["status"] = serde_json::json!({"status": "Failure", "code": status.code,
                "reason": status.reason, "message": status.message});
            if !status.causes.is_empty() {
                let causes: Vec<serde_json::Value> = status
                    .causes
                    .iter()
                    .map(|e| serde_json::json!({"reason": e.cause_reason(), "message": e.message(), "field": e.path.as_str()}))
                    .collect();
                response["status"]["details"] = serde_json::json!({ "causes": causes });
            }
        }
        if let Some(p) = d.patch.as_ref().filter(|p| allowed_patch && d.allowed && !p.0.is_empty()) {
            response["patch"] = base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(p).unwrap()).into();
            response["patchType"] = "JSONPatch".into();
        }
        if !d.warnings.is_empty() {
            response["warnings"] = d.warnings.iter().map(|w| clean_warning(w)).collect();
        }
        serde_json::json!({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})
    }

    #[test]
    fn the_frame_holds_what_the_apiserver_reads() {
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::json!([{"op": "add", "path": "/spec/stage", "value": "Idle"}])).unwrap();
        let invalid = Denial::invalid(
            "m\"x",
            vec![FieldError::required(&FieldPath::root("spec").child("nodeSelector"), "a \"quoted\" need")],
        );
        let decisions = [
            Decision::allow(),
            Decision::allow_with_warnings(vec!["one\u{7}".into(), "two \"quoted\"\n".into()]),
            Decision { patch: Some(patch), ..Decision::allow() },
            Decision::deny(Denial::forbidden("user \"bob\" may not\u{1}")),
            Decision::deny(invalid),
        ];
        for d in &decisions {
            for (version, uid) in [("admission.k8s.io/v1", "2f9d1cd1"), ("admission.k8s.io/v1beta1", "u\"\\\u{0}é")] {
                for allowed_patch in [false, true] {
                    let got: serde_json::Value =
                        serde_json::from_slice(&encode(version, uid, d, allowed_patch)).unwrap();
                    assert_eq!(got, expected(version, uid, d, allowed_patch));
                }
            }
        }
        // Compact, members in the documented order.
        assert_eq!(
            String::from_utf8(encode("admission.k8s.io/v1", "u1", &decisions[1], false)).unwrap(),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u1","allowed":true,"warnings":["one ","two \"quoted\" "]}}"#
        );
    }
}
