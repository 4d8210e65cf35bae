//! Reading members of an object kept as JSON text ([`RawValue`]): the request's `object` and
//! `oldObject` are decoded only as far as a decision needs (most of an object is metadata,
//! `managedFields` above all, which no decision reads).
//!
//! Semantics are those of `serde_json::Value::get` on the decoded object: the member of a JSON
//! object by (unescaped) key, the last one when a key repeats, nothing when the text is not a
//! JSON object.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;
use std::fmt;

/// Whether the text is a JSON object (`Value::is_object`).
pub(super) fn is_object(raw: &RawValue) -> bool {
    raw.get().starts_with('{')
}

/// The text of member `key` of a JSON object: the last one when repeated; `None` when absent
/// or when `raw` is not an object.
pub(super) fn member_raw<'a>(raw: &'a RawValue, key: &str) -> Option<&'a RawValue> {
    if !is_object(raw) {
        return None;
    }
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_map(Member { key }).ok().flatten()
}

/// Member `key` of a JSON object, decoded (`Value::get(key).cloned()`).
pub(super) fn member(raw: &RawValue, key: &str) -> Option<Value> {
    // The text is valid JSON (it was read as such), so decoding it again cannot fail short of
    // the recursion limit, which the first read enforced as well.
    member_raw(raw, key).and_then(|m| serde_json::from_str(m.get()).ok())
}

struct Member<'k> {
    key: &'k str,
}

impl<'de> Visitor<'de> for Member<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = None;
        while let Some(hit) = map.next_key_seed(KeyIs(self.key))? {
            if hit {
                found = Some(map.next_value::<&'de RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// Compares a key with the wanted one without allocating (escaped keys are unescaped first).
struct KeyIs<'k>(&'k str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn members_read_like_value_get() {
        let texts = [
            r#"{"metadata":{"name":"x","managedFields":[{"a":1}]},"spec":{"stage":"Idle"}}"#,
            r#"{"spec":1,"spec":{"stage":"Drain"}}"#,
            r#"{"sp\u0065c":{"a":"\"}"}}"#,
            r#"{"spec":null}"#,
            r#"{}"#,
            r#"[{"spec":1}]"#,
            r#""spec""#,
            r#"null"#,
        ];
        for t in texts {
            let v: Value = serde_json::from_str(t).unwrap();
            let r = raw(t);
            assert_eq!(member(&r, "spec"), v.get("spec").cloned(), "{t}");
            assert_eq!(is_object(&r), v.is_object(), "{t}");
        }
        assert_eq!(member_raw(&raw(texts[0]), "spec").unwrap().get(), r#"{"stage":"Idle"}"#);
    }
}
