//! Encoding an AdmissionReview response exactly as the apiserver documents it (SPEC 5 "Wire
//! format"): base64 `patch` with `patchType`, the uid echoed, warnings without control
//! characters.

use super::KIND;
use crate::admission::Decision;
use base64::Engine;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseEnvelope<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

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
/// Returns the JSON bytes of the whole AdmissionReview.
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
    let response = Response {
        uid,
        allowed: decision.allowed,
        status,
        patch_type: patch.as_ref().map(|_| "JSONPatch"),
        patch,
        warnings: decision.warnings.iter().map(|w| clean_warning(w)).collect(),
    };
    let envelope = ResponseEnvelope { api_version, kind: KIND, response };
    // Serializing these plain structs cannot fail (no maps with non-string keys, no I/O).
    // Sized so that an answer without a patch needs no reallocation.
    let mut out = Vec::with_capacity(256 + response_len_hint(&envelope.response));
    match serde_json::to_writer(&mut out, &envelope) {
        Ok(()) => out,
        Err(_) => Vec::new(),
    }
}

fn response_len_hint(r: &Response) -> usize {
    r.uid.len()
        + r.patch.as_ref().map_or(0, String::len)
        + r.status.as_ref().map_or(0, |s| s.message.len() * 2)
        + r.warnings.iter().map(|w| w.len() + 4).sum::<usize>()
}

/// Replaces control characters (which the apiserver would reject in a Warning header) with
/// spaces.
fn clean_warning(w: &str) -> String {
    w.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_lose_control_characters() {
        assert_eq!(clean_warning("a\nb\u{7}c"), "a b c");
    }
}
