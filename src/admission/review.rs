//! The AdmissionReview `admission.k8s.io/v1` wire format (SPEC 3 and 5): decoding requests
//! so that a readable uid is never lost, and encoding responses exactly as the apiserver
//! documents them (base64 `patch` with `patchType`, uid echoed, clean warnings).
//!
//! kube-core's `AdmissionResponse` is not used for encoding: it serializes `patch` as a number
//! array and its `invalid()` drops the uid (SPEC 5).

use super::Decision;
use base64::Engine;
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::admission::Operation;
use kube::core::{GroupVersionKind, GroupVersionResource};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;

/// The only AdmissionReview version this webhook speaks.
pub const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";

/// One decoded admission request: what the decisions read of `request`.
///
/// `O` is how `object` and `oldObject` are read: as the JSON text sent (the default, what
/// the decisions get), or, only to explain why a request was refused, read and checked the
/// way a `serde_json::Value` would be and kept nowhere. Both are the same derived decoder.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct Request<O = Box<RawValue>> {
    /// Identifier echoed in the response.
    pub uid: String,
    /// Type of the object (`nodemaintenance.k8s.io/v1alpha1 NodeMaintenance`, `/v1 Node`).
    pub kind: GroupVersionKind,
    /// Resource being requested.
    pub resource: GroupVersionResource,
    /// Subresource, e.g. `status`.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Object name (empty on CREATE with generateName).
    #[serde(default)]
    pub name: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
    /// Who is asking (username, uid, groups, extra).
    pub user_info: UserInfo,
    /// The new object (absent on DELETE), as the JSON text sent: decisions decode only the
    /// members they read (`spec`, `status`), never the metadata.
    #[serde(default)]
    pub object: Option<O>,
    /// The stored object (UPDATE and DELETE), as the JSON text sent.
    #[serde(default)]
    pub old_object: Option<O>,
    /// Whether the change will not be persisted.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// The AdmissionReview envelope, borrowed from the body: `request` stays text until
/// `apiVersion` and `kind` have been checked, so that a review of another version is refused
/// as such whatever its request holds.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope<'a> {
    #[serde(borrow)]
    api_version: Option<Cow<'a, str>>,
    #[serde(borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    request: Option<&'a RawValue>,
}

impl Request {
    /// Reads a request from the text of `request`: the derived decoder, then the objects
    /// checked as `serde_json::Value`s (kept as text, they were only checked for syntax; a
    /// value also needs valid `\u` escapes, numbers in range and at most 128 levels of
    /// nesting).
    ///
    /// # Errors
    /// `request.<path>: <what>` naming the first problem in the text, as reading the objects
    /// as values reports it.
    fn read(text: &str) -> Result<Request, String> {
        match serde_json::from_str::<Request>(text) {
            Ok(r) if r.objects_are_values() => Ok(r),
            // Tracking the path costs a third of the decoding: only to explain a failure.
            _ => Err(
                match serde_path_to_error::deserialize::<_, Request<AnyValue>>(&mut serde_json::Deserializer::from_str(
                    text,
                )) {
                    Err(e) => format!("request.{}: {}", e.path(), e.inner()),
                    Ok(_) => "request: not a valid AdmissionReview request".into(),
                },
            ),
        }
    }

    /// Whether `object` and `oldObject` are JSON a `serde_json::Value` can hold. Builds
    /// nothing.
    fn objects_are_values(&self) -> bool {
        [&self.object, &self.old_object].into_iter().flatten().all(|o| {
            let mut de = serde_json::Deserializer::from_str(o.get());
            AnyValue::deserialize(&mut de).is_ok()
        })
    }
}

/// Any JSON value, read the way `serde_json::Value` reads it (same checks, same errors) and
/// kept nowhere.
struct AnyValue;
impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyValue)
    }
}

impl<'de> serde::de::Visitor<'de> for AnyValue {
    type Value = AnyValue;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_i64<E>(self, _: i64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_u64<E>(self, _: u64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_f64<E>(self, _: f64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_str<E>(self, _: &str) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_unit<E>(self) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_none<E>(self) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<AnyValue, D::Error> {
        AnyValue::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<AnyValue, A::Error> {
        while seq.next_element::<AnyValue>()?.is_some() {}
        Ok(AnyValue)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<AnyValue, A::Error> {
        while map.next_entry::<AnyValue, AnyValue>()?.is_some() {}
        Ok(AnyValue)
    }
}

/// The least that can be read from a body that is not a valid AdmissionReview: `apiVersion`
/// and `request.uid`, leniently. A member of another JSON type reads as absent, other
/// members are skipped without being built (so neither a wrong type elsewhere nor deep
/// nesting loses a readable uid), and a member given twice is ambiguous: absent.
#[derive(Debug, Default, PartialEq)]
struct UidOnly {
    api_version: Option<String>,
    uid: Option<String>,
}

/// A JSON string, or `None` for any other JSON value (skipped).
struct LenientString(Option<String>);

impl<'de> Deserialize<'de> for LenientString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = LenientString;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, s: &str) -> Result<LenientString, E> {
                Ok(LenientString(Some(s.to_owned())))
            }
            fn visit_bool<E>(self, _: bool) -> Result<LenientString, E> {
                Ok(LenientString(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<LenientString, E> {
                Ok(LenientString(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<LenientString, E> {
                Ok(LenientString(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<LenientString, E> {
                Ok(LenientString(None))
            }
            fn visit_unit<E>(self) -> Result<LenientString, E> {
                Ok(LenientString(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<LenientString, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(LenientString(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<LenientString, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(LenientString(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// `request` of a [`UidOnly`]: its `uid`, leniently.
#[derive(Default)]
struct RequestUid(Option<String>);

/// A member read once (`Some(value)`), twice or more (ambiguous: `None`), or never.
fn once<T>(slot: &mut Option<Option<T>>, value: Option<T>) {
    *slot = match slot {
        None => Some(value),
        Some(_) => Some(None),
    };
}

/// Answers every JSON value that is not an object with `T::default()`, skipping arrays.
macro_rules! lenient_non_objects {
    ($t:ty) => {
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<$t, A::Error> {
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            Ok(<$t>::default())
        }
        fn visit_str<E>(self, _: &str) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_bool<E>(self, _: bool) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_i64<E>(self, _: i64) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_u64<E>(self, _: u64) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_f64<E>(self, _: f64) -> Result<$t, E> {
            Ok(<$t>::default())
        }
        fn visit_unit<E>(self) -> Result<$t, E> {
            Ok(<$t>::default())
        }
    };
}

impl<'de> Deserialize<'de> for RequestUid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RequestUid;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<RequestUid, A::Error> {
                let mut uid = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "uid" {
                        once(&mut uid, map.next_value::<LenientString>()?.0);
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(RequestUid(uid.flatten()))
            }
            lenient_non_objects!(RequestUid);
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for UidOnly {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = UidOnly;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UidOnly, A::Error> {
                let (mut api_version, mut uid) = (None, None);
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "apiVersion" => once(&mut api_version, map.next_value::<LenientString>()?.0),
                        "request" => once(&mut uid, map.next_value::<RequestUid>()?.0),
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(UidOnly { api_version: api_version.flatten(), uid: uid.flatten() })
            }
            lenient_non_objects!(UidOnly);
        }
        d.deserialize_any(V)
    }
}

/// Why a body could not be decoded, with whatever identifies the request.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    /// The request's uid when it could be read: the answer is then HTTP 200 with
    /// `allowed: false`; without it, HTTP 400.
    pub uid: Option<String>,
    /// apiVersion to answer in.
    pub api_version: String,
    /// What was wrong, for a person.
    pub message: String,
}

/// A decoded AdmissionReview.
#[derive(Debug)]
pub struct Review {
    /// apiVersion of the request, echoed in the response.
    pub api_version: String,
    /// The request.
    pub request: Request,
}

/// Decodes an AdmissionReview body (SPEC 3, SPEC 5 "Wire format") along one path: the
/// envelope, borrowed from the body with `request` kept as text; its `kind` and
/// `apiVersion`; then the request by the derived decoder of [`Request`], objects checked as
/// JSON values. A body refused anywhere on the way is then read leniently for its
/// `apiVersion` and `request.uid` alone (a member of another type reads as absent, one
/// given twice as ambiguous), so that a readable uid is never lost.
///
/// # Errors
/// [`DecodeError`] when the body is not JSON, not an `admission.k8s.io/v1` AdmissionReview,
/// or lacks `request`/`request.uid`; it carries the uid when one could be read.
pub fn decode(body: &[u8]) -> Result<Review, DecodeError> {
    let fail = |message: String| {
        let partial: UidOnly = serde_json::from_slice(body).unwrap_or_default();
        DecodeError {
            uid: partial.uid.filter(|u| !u.is_empty()),
            api_version: partial
                .api_version
                .filter(|v| v.starts_with("admission.k8s.io/"))
                .unwrap_or(API_VERSION.into()),
            message,
        }
    };
    let env: Envelope =
        serde_json::from_slice(body).map_err(|e| fail(format!("body is not an AdmissionReview: {e}")))?;
    let api_version = env.api_version.unwrap_or_default();
    if env.kind.as_deref() != Some(KIND) || api_version != API_VERSION {
        return Err(fail(format!(
            "expected kind {KIND} apiVersion {API_VERSION}, got kind {:?} apiVersion {api_version:?}",
            env.kind.unwrap_or_default()
        )));
    }
    let raw = env.request.ok_or_else(|| fail("AdmissionReview has no request".into()))?;
    let request = Request::read(raw.get()).map_err(fail)?;
    if request.uid.is_empty() {
        return Err(fail("request.uid is empty".into()));
    }
    Ok(Review { api_version: api_version.into_owned(), request })
}

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
    fn decode_keeps_uid_of_a_request_with_a_malformed_field() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","operation":"EXPLODE"}}"#;
        let err = decode(body).unwrap_err();
        assert_eq!(err.uid.as_deref(), Some("u1"));
        assert!(err.message.contains("request"), "{}", err.message);
    }

    #[test]
    fn decode_rejects_other_versions_and_non_json() {
        let body = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u2"}}"#;
        let err = decode(body).unwrap_err();
        assert_eq!(err.uid.as_deref(), Some("u2"));
        assert_eq!(err.api_version, "admission.k8s.io/v1beta1");
        let err = decode(b"not json").unwrap_err();
        assert_eq!(err.uid, None);
    }

    #[test]
    fn decode_keeps_a_uid_readable_despite_wrong_types_elsewhere() {
        for (body, uid, version) in [
            (&br#"{"apiVersion":5,"kind":"AdmissionReview","request":{"uid":"u3"}}"#[..], Some("u3"), API_VERSION),
            (
                br#"{"apiVersion":"admission.k8s.io/v1","kind":[1],"request":{"uid":"u4","kind":7}}"#,
                Some("u4"),
                API_VERSION,
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1beta1","request":{"uid":"u5","object":{"a":[[[{}]]]}}}"#,
                Some("u5"),
                "admission.k8s.io/v1beta1",
            ),
            (br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":7}}"#, None, API_VERSION),
            (br#"{"apiVersion":"admission.k8s.io/v1","request":"u6"}"#, None, API_VERSION),
            (br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"a","uid":"b"}}"#, None, API_VERSION),
            (br#"{"request":{"uid":"a"},"request":{"uid":"a"}}"#, None, API_VERSION),
            (br#"[{"request":{"uid":"a"}}]"#, None, API_VERSION),
        ] {
            let err = decode(body).unwrap_err();
            assert_eq!(err.uid.as_deref(), uid, "{}", String::from_utf8_lossy(body));
            assert_eq!(err.api_version, version, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn objects_must_be_what_a_json_value_can_hold() {
        // Kept as text, the object is still checked as a `Value` would be: a lone surrogate
        // escape or an out-of-range number anywhere in it refuses the request as before.
        for (object, why) in [
            (r#"{"metadata":{"name":"\ud800"}}"#, "hex escape"),
            (r#"{"metadata":{"generation":1e400}}"#, "number out of range"),
        ] {
            let body = format!(
                r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u3",
                "kind":{{"group":"g","version":"v","kind":"K"}},"resource":{{"group":"g","version":"v","resource":"r"}},
                "operation":"CREATE","userInfo":{{}},"object":{object}}}}}"#
            );
            let err = decode(body.as_bytes()).unwrap_err();
            assert_eq!(err.uid.as_deref(), Some("u3"));
            assert!(err.message.starts_with("request.object") && err.message.contains(why), "{}", err.message);
        }
    }

    #[test]
    fn invalid_utf8_in_a_skipped_member_is_refused_as_before() {
        // `requestKind` is not read, but the request must be UTF-8 text: the one-pass decoder
        // must not accept what the careful path refuses.
        let good = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u4","requestKind":{"group":"g"},"kind":{"group":"g","version":"v","kind":"K"},"resource":{"group":"g","version":"v","resource":"r"},"operation":"CREATE","userInfo":{}}}"#;
        assert!(decode(good).is_ok());
        let mut bad = good.to_vec();
        let at = bad.windows(7).position(|w| w == b"\"group\"").unwrap() + 1;
        bad[at] = 0xe7;
        assert!(decode(&bad).is_err());
    }

    #[test]
    fn warnings_lose_control_characters() {
        assert_eq!(clean_warning("a\nb\u{7}c"), "a b c");
    }
}
