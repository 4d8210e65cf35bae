//! The AdmissionReview `admission.k8s.io/v1` wire format (SPEC 3 and 5): decoding requests
//! so that a readable uid is never lost, and encoding responses exactly as the apiserver
//! documents them (base64 `patch` with `patchType`, uid echoed, clean warnings).
//!
//! kube-core's `AdmissionResponse` is not used for encoding: it serializes `patch` as a number
//! array and its `invalid()` drops the uid (SPEC 5).

use kube::core::admission::Operation;
use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

mod encode;
mod rescue;
mod text;

pub use encode::encode;
use rescue::UidOnly;
use text::AnyValue;
pub use text::Object;

/// The only AdmissionReview version this webhook speaks.
pub const API_VERSION: &str = "admission.k8s.io/v1";
const KIND: &str = "AdmissionReview";

/// One decoded admission request: what the decisions read of `request`, its strings borrowed
/// from the body unless they hold escapes.
///
/// `O` is how `object` and `oldObject` are read: as the JSON text sent, checked and indexed
/// ([`Object`], the default, what the decisions get), or, only to explain why a request was
/// refused, read and checked the way a `serde_json::Value` would be and kept nowhere. Both
/// are the same derived decoder.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct Request<'a, O = Object<'a>> {
    /// Identifier echoed in the response.
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    /// Type of the object (`nodemaintenance.k8s.io/v1alpha1 NodeMaintenance`, `/v1 Node`).
    #[serde(borrow)]
    pub kind: GroupVersionKind<'a>,
    /// Resource being requested.
    #[serde(borrow)]
    pub resource: GroupVersionResource<'a>,
    /// Subresource, e.g. `status`.
    #[serde(default, borrow, deserialize_with = "borrowed_opt")]
    pub sub_resource: Option<Cow<'a, str>>,
    /// Object name (empty on CREATE with generateName).
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: Operation,
    /// Who is asking (username, uid, groups, extra).
    #[serde(borrow)]
    pub user_info: UserInfo<'a>,
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

/// kube-core's `GroupVersionKind`, borrowed from the body: the same members, read the same
/// way (all three required, other members ignored).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind<'a> {
    /// API group (empty for the core group).
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    /// Version.
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    /// Kind.
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
}

/// kube-core's `GroupVersionResource`, borrowed from the body: the same members, read the same
/// way.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource<'a> {
    /// API group (empty for the core group).
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    /// Version.
    #[serde(borrow)]
    pub version: Cow<'a, str>,
    /// Resource (plural).
    #[serde(borrow)]
    pub resource: Cow<'a, str>,
    /// `api_version` (so named): kube-core's type reads it, if present, as a string; read
    /// the same so that the same requests are accepted.
    #[serde(default, borrow)]
    pub api_version: Cow<'a, str>,
}

/// k8s-openapi's `authentication/v1 UserInfo` (the requesting user), its strings borrowed
/// from the body unless they hold escapes: the same members, read the same way (each
/// optional, `null` as absent, other members ignored, a member given twice keeps its last
/// value) and written the same way (members in the same order, absent ones left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UserInfo<'a> {
    /// Additional information from the authenticator.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<BTreeMap<Cow<'a, str>, Vec<Cow<'a, str>>>>,
    /// The user's groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups: Option<Vec<Cow<'a, str>>>,
    /// The user's unique id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<Cow<'a, str>>,
    /// The user's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for UserInfo<'a> {
    /// Reads a JSON object as k8s-openapi's `UserInfo` reads it, borrowing from the input.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// A string, borrowed unless it holds escapes.
        #[derive(Deserialize)]
        struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

        /// `extra`, read as serde reads a `BTreeMap` (a key given twice keeps its last value).
        struct Extra<'a>(BTreeMap<Cow<'a, str>, Vec<Cow<'a, str>>>);
        impl<'de> Deserialize<'de> for Extra<'de> {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct ExtraVisitor;
                impl<'de> Visitor<'de> for ExtraVisitor {
                    type Value = Extra<'de>;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("a map")
                    }
                    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Extra<'de>, A::Error> {
                        let mut extra = BTreeMap::new();
                        while let Some((Text(key), values)) = map.next_entry::<Text<'de>, Vec<Text<'de>>>()? {
                            extra.insert(key, values.into_iter().map(|t| t.0).collect());
                        }
                        Ok(Extra(extra))
                    }
                }
                d.deserialize_map(ExtraVisitor)
            }
        }

        struct UserInfoVisitor;
        impl<'de> Visitor<'de> for UserInfoVisitor {
            type Value = UserInfo<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("UserInfo")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UserInfo<'de>, A::Error> {
                let texts = |v: Vec<Text<'de>>| v.into_iter().map(|t| t.0).collect::<Vec<_>>();
                let mut user = UserInfo::default();
                while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
                    match &*key {
                        "extra" => user.extra = map.next_value::<Option<Extra<'de>>>()?.map(|e| e.0),
                        "groups" => user.groups = map.next_value::<Option<Vec<Text<'de>>>>()?.map(texts),
                        "uid" => user.uid = map.next_value::<Option<Text<'de>>>()?.map(|t| t.0),
                        "username" => user.username = map.next_value::<Option<Text<'de>>>()?.map(|t| t.0),
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(user)
            }
        }
        d.deserialize_struct("UserInfo", &["extra", "groups", "uid", "username"], UserInfoVisitor)
    }
}

impl UserInfo<'_> {
    /// The same user as k8s-openapi's type, owned (for a SubjectAccessReview).
    pub fn to_k8s(&self) -> k8s_openapi::api::authentication::v1::UserInfo {
        let texts = |v: &Vec<Cow<'_, str>>| v.iter().map(|t| t.to_string()).collect();
        k8s_openapi::api::authentication::v1::UserInfo {
            extra: self.extra.as_ref().map(|e| e.iter().map(|(k, v)| (k.to_string(), texts(v))).collect()),
            groups: self.groups.as_ref().map(texts),
            uid: self.uid.as_ref().map(|u| u.to_string()),
            username: self.username.as_ref().map(|u| u.to_string()),
        }
    }
}

impl<'a> From<&'a k8s_openapi::api::authentication::v1::UserInfo> for UserInfo<'a> {
    /// Borrows every member of k8s-openapi's `UserInfo`.
    fn from(user: &'a k8s_openapi::api::authentication::v1::UserInfo) -> Self {
        let texts = |v: &'a Vec<String>| v.iter().map(|t| Cow::Borrowed(t.as_str())).collect();
        UserInfo {
            extra: user.extra.as_ref().map(|e| e.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), texts(v))).collect()),
            groups: user.groups.as_ref().map(texts),
            uid: user.uid.as_deref().map(Cow::Borrowed),
            username: user.username.as_deref().map(Cow::Borrowed),
        }
    }
}

/// The AdmissionReview envelope, borrowed from the body. On the careful path `R` is the text
/// of `request` (`&RawValue`), kept until `apiVersion` and `kind` have been checked, so that a
/// review of another version is refused as such whatever its request holds; on the one-pass
/// path ([`whole`]) it is the [`Request`] itself.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "R: Deserialize<'de>"))]
struct Envelope<'a, R> {
    #[serde(default, borrow, deserialize_with = "borrowed_opt")]
    api_version: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed_opt")]
    kind: Option<Cow<'a, str>>,
    request: Option<R>,
}

/// An optional JSON string, borrowed from the input unless it holds escapes (serde's own
/// `Option<Cow<str>>` always copies).
fn borrowed_opt<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Text>::deserialize(d)?.map(|t| t.0))
}

impl<'a> Request<'a> {
    /// Reads a request from the JSON text of an AdmissionReview's `request` (what the
    /// apiserver sends, or one made up, e.g. by `kubectl maintenance review`), borrowing from
    /// `text`: the derived decoder, which checks the objects as `serde_json::Value`s on the
    /// way ([`Object`]).
    ///
    /// # Errors
    /// `request.<path>: <what>` naming the first problem in the text, as reading the objects
    /// as values reports it.
    pub fn parse(text: &'a str) -> Result<Request<'a>, String> {
        serde_json::from_str::<Request>(text).map_err(|_| {
            // Tracking the path costs a third of the decoding: only to explain a failure.
            match serde_path_to_error::deserialize::<_, Request<AnyValue>>(&mut serde_json::Deserializer::from_str(
                text,
            )) {
                Err(e) => format!("request.{}: {}", e.path(), e.inner()),
                Ok(_) => "request: not a valid AdmissionReview request".into(),
            }
        })
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

/// A decoded AdmissionReview, borrowed from the body.
#[derive(Debug)]
pub struct Review<'a> {
    /// apiVersion of the request, echoed in the response.
    pub api_version: Cow<'a, str>,
    /// The request.
    pub request: Request<'a>,
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
pub fn decode(body: &[u8]) -> Result<Review<'_>, DecodeError> {
    whole(body).map_or_else(|| careful(body), Ok)
}

/// The path of [`decode`] that defines its outcome: envelope, its checks, then the request.
fn careful(body: &[u8]) -> Result<Review<'_>, DecodeError> {
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
    let env: Envelope<&RawValue> =
        serde_json::from_slice(body).map_err(|e| fail(format!("body is not an AdmissionReview: {e}")))?;
    let api_version = env.api_version.unwrap_or_default();
    if env.kind.as_deref() != Some(KIND) || api_version != API_VERSION {
        return Err(fail(format!(
            "expected kind {KIND} apiVersion {API_VERSION}, got kind {:?} apiVersion {api_version:?}",
            env.kind.unwrap_or_default()
        )));
    }
    let raw = env.request.ok_or_else(|| fail("AdmissionReview has no request".into()))?;
    let request = Request::parse(raw.get()).map_err(fail)?;
    if request.uid.is_empty() {
        return Err(fail("request.uid is empty".into()));
    }
    Ok(Review { api_version, request })
}

/// The review of a well-formed body in one pass over it, `None` for any other body (which the
/// careful path of [`decode`] then refuses and explains). What it accepts, the careful path
/// accepts as the same review: the same derived decoder reads the same text of `request`, a
/// member given twice fails both (serde's derive refuses a repeated field), and the body must
/// be UTF-8 as the careful path's borrowed text must. The careful path alone scans the body
/// twice (envelope, then request): 14% more instructions per `/validate` request
/// (docs/benchmarks.md).
fn whole(body: &[u8]) -> Option<Review<'_>> {
    let env: Envelope<Request> = serde_json::from_str(std::str::from_utf8(body).ok()?).ok()?;
    let (api_version, request) = (env.api_version?, env.request?);
    let right_kind = env.kind.as_deref() == Some(KIND) && api_version == API_VERSION;
    (right_kind && !request.uid.is_empty()).then_some(Review { api_version, request })
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
    fn the_one_pass_reading_accepts_exactly_what_the_careful_path_accepts() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apiserver");
        let mut bodies: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .expect("recorded fixtures")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| std::fs::read(p).expect("fixture"))
            .collect();
        assert!(bodies.len() > 20, "{} fixtures", bodies.len());
        let good = bodies[0].clone();
        let text = String::from_utf8(good.clone()).expect("UTF-8");
        for (from, to) in [
            ("\"request\":{", "\"request\":null,\"request\":{"),
            ("\"uid\":\"", "\"uid\":\"\",\"x\":\""),
            ("\"uid\":", "\"uid\":\"a\",\"uid\":"),
            ("admission.k8s.io/v1", "admission.k8s.io/v1beta1"),
            ("\"kind\":\"AdmissionReview\"", "\"kind\":\"Other\""),
            ("\"operation\":\"", "\"operation\":\"X"),
        ] {
            assert!(text.contains(from), "{from}");
            bodies.push(text.replacen(from, to, 1).into_bytes());
        }
        let mut bad_utf8 = good;
        bad_utf8.insert(bad_utf8.len() - 2, 0xe7);
        bodies.push(bad_utf8);
        for body in &bodies {
            let fast = whole(body).map(|r| format!("{r:?}"));
            let careful = careful(body).ok().map(|r| format!("{r:?}"));
            assert_eq!(fast, careful, "{}", String::from_utf8_lossy(body));
        }
        assert!(bodies.iter().filter(|b| whole(b).is_some()).count() > 20, "the recorded requests take the one pass");
    }

    #[test]
    fn user_info_reads_and_writes_as_k8s_openapi_does() {
        type K8s = k8s_openapi::api::authentication::v1::UserInfo;
        for text in [
            r#"{"username":"admin","groups":["system:masters","system:authenticated"],"extra":{"a":["x"],"b":[]}}"#,
            r#"{"username":"a","username":"b","uid":"u","groups":null,"groups":["g"],"other":{"x":[1]}}"#,
            r#"{"user\u006eame":"\u00e9\"q","extra":{"k":["1"],"k":["2"],"j":["0"]},"uid":null}"#,
            r#"{}"#,
            r#"{"username":7}"#,
            r#"{"groups":"g"}"#,
            r#"{"extra":{"k":null}}"#,
            r#"{"extra":{"k":[null]}}"#,
            r#"{"extra":"x"}"#,
            r#"{"extra":{"k":"x"}}"#,
            r#"["admin"]"#,
            r#"null"#,
        ] {
            let ours = serde_json::from_str::<UserInfo>(text).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<K8s>(text).map_err(|e| e.to_string());
            assert_eq!(ours.as_ref().map(UserInfo::to_k8s), theirs.as_ref().cloned(), "{text}");
            if let (Ok(ours), Ok(theirs)) = (&ours, &theirs) {
                assert_eq!(serde_json::to_string(ours).unwrap(), serde_json::to_string(theirs).unwrap(), "{text}");
                assert_eq!(&UserInfo::from(theirs), ours, "{text}");
            }
        }
        let plain: UserInfo = serde_json::from_str(r#"{"username":"admin","groups":["g"]}"#).unwrap();
        assert!(matches!(plain.username, Some(Cow::Borrowed("admin"))), "borrowed from the body");
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
}
