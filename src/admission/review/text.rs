//! The objects of a request (`object`, `oldObject`) as the JSON text the apiserver sent,
//! borrowed from the body (SPEC 5 "Wire format"). Each is checked once, as it is decoded, to
//! be JSON a `serde_json::Value` can hold (valid `\u` escapes, numbers in range, at most 128
//! levels of nesting), and its top-level members are indexed on the same pass, so that a
//! decision reading `spec` or `status` finds its text without reading the object again.
//!
//! The pass is a byte scan of text serde_json has already read as a JSON value (so its syntax,
//! strings and escapes are known to be valid): it settles the common case, and leaves what it
//! cannot settle cheaply (a `\u` escape, a number with an exponent or of more than 300
//! characters, nesting deeper than 100) to serde_json, whose verdict defines the outcome.

use memchr::memchr2;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

/// Nesting the scan settles itself; serde_json refuses a value's 128th level.
const SURE_DEPTH: usize = 100;
/// Characters of a number without an exponent that the scan settles itself: 300 digits are
/// at most 1e300, within an f64's range.
const SURE_NUMBER: usize = 300;

/// One object of a request: its JSON text (any JSON value, as sent) and, when it is a JSON
/// object, its top-level members.
#[derive(Clone)]
pub struct Object<'a> {
    text: &'a str,
    /// Top-level members in the order sent: the key unescaped, the value's text. Empty when
    /// the text is not a JSON object.
    members: Vec<(Cow<'a, str>, &'a str)>,
}

impl std::fmt::Debug for Object<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Object").field(&self.text).finish()
    }
}

impl<'a> Object<'a> {
    /// Indexes `raw`, a JSON value serde_json has read, without checking what a `Value` could
    /// not hold (the decoder checks that: [`Object`]'s `Deserialize`).
    pub fn new(raw: &'a RawValue) -> Self {
        let text = raw.get();
        match scan(text) {
            Scan::Sure(Some(members)) => Object { text, members },
            Scan::Sure(None) | Scan::Unsure => Object { text, members: read_members(text) },
        }
    }

    /// Indexes `raw` like [`Object::new`] once it is known to be JSON a `serde_json::Value`
    /// can hold.
    ///
    /// # Errors
    /// serde_json's reason when it cannot be a `Value` (the first problem in the text).
    fn checked(raw: &'a RawValue) -> Result<Self, serde_json::Error> {
        let text = raw.get();
        match scan(text) {
            Scan::Sure(Some(members)) => Ok(Object { text, members }),
            Scan::Sure(None) => Ok(Object { text, members: read_members(text) }),
            Scan::Unsure => {
                AnyValue::deserialize(&mut serde_json::Deserializer::from_str(text))?;
                Ok(Object { text, members: read_members(text) })
            }
        }
    }

    /// The JSON text as sent.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Whether the text is a JSON object (`Value::is_object`).
    pub fn is_object(&self) -> bool {
        self.text.starts_with('{')
    }

    /// The text of member `key` (`Value::get` on the decoded object: the key unescaped, the
    /// last value when a key repeats); `None` when absent or when the text is not an object.
    pub fn member(&self, key: &str) -> Option<&'a str> {
        self.members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Object<'a> {
    /// Borrows the value's text from the input (a body read with `serde_json::from_str` or
    /// `from_slice`), refusing JSON a `serde_json::Value` cannot hold.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        Object::checked(raw).map_err(serde::de::Error::custom)
    }
}

/// What one pass over a JSON value's text settled.
#[derive(Debug, PartialEq)]
enum Scan<'a> {
    /// A `serde_json::Value` can hold it. Its top-level members (key, value text) in the order
    /// sent (none when it is not an object); `None` when a key holds an escape.
    Sure(Option<Vec<(Cow<'a, str>, &'a str)>>),
    /// serde_json must judge: a `\u` escape, a number with an exponent or over
    /// [`SURE_NUMBER`] characters, nesting deeper than [`SURE_DEPTH`].
    Unsure,
}

/// Scans `text`, which serde_json has read as one JSON value: strings are skipped to their
/// closing quote, brackets counted, numbers measured, and the top-level members of an object
/// delimited by the commas and the closing brace at depth 1.
fn scan(text: &str) -> Scan<'_> {
    let b = text.as_bytes();
    let object = b.first() == Some(&b'{');
    let mut members = Vec::new();
    let mut plain_keys = true;
    let mut depth = 0usize;
    // At depth 1 of an object: whether the next string is a key, the key being read, and
    // where its value starts.
    let mut expect_key = false;
    let mut key: Option<&str> = None;
    let mut value_start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                let mut end = start;
                let mut escaped = false;
                loop {
                    match memchr2(b'"', b'\\', &b[end..]) {
                        Some(k) if b[end + k] == b'"' => {
                            end += k;
                            break;
                        }
                        Some(k) => {
                            if b.get(end + k + 1) == Some(&b'u') {
                                return Scan::Unsure;
                            }
                            escaped = true;
                            end += k + 2;
                        }
                        None => return Scan::Unsure,
                    }
                }
                if object && depth == 1 && expect_key {
                    key = Some(&text[start..end]);
                    plain_keys &= !escaped;
                    expect_key = false;
                }
                i = end + 1;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > SURE_DEPTH {
                    return Scan::Unsure;
                }
                expect_key = depth == 1 && object;
            }
            b':' if depth == 1 => value_start = i + 1,
            b',' | b'}' | b']' => {
                if object && depth == 1 && b[i] != b']' {
                    if let Some(k) = key.take() {
                        members.push((Cow::Borrowed(k), text[value_start..i].trim_ascii()));
                    }
                    expect_key = b[i] == b',';
                }
                if b[i] != b',' {
                    depth = depth.saturating_sub(1);
                }
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'-' | b'+' | b'e' | b'E') {
                    if matches!(b[i], b'e' | b'E') {
                        return Scan::Unsure;
                    }
                    i += 1;
                }
                if i - start > SURE_NUMBER {
                    return Scan::Unsure;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Scan::Sure(plain_keys.then_some(members))
}

/// The top-level members of `text` read by serde_json, keys unescaped; none when `text` is not
/// a JSON object.
fn read_members(text: &str) -> Vec<(Cow<'_, str>, &str)> {
    serde_json::from_str::<MemberList>(text).map(|m| m.0).unwrap_or_default()
}

/// The members of a JSON object, in the order sent.
struct MemberList<'a>(Vec<(Cow<'a, str>, &'a str)>);

impl<'de: 'a, 'a> Deserialize<'de> for MemberList<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MemberList<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<MemberList<'de>, A::Error> {
                let mut members = Vec::new();
                while let Some(Key(key)) = map.next_key()? {
                    members.push((key, map.next_value::<&'de RawValue>()?.get()));
                }
                Ok(MemberList(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// A key of a JSON object, unescaped; borrowed from the text unless it holds escapes.
#[derive(Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

/// Any JSON value, read the way `serde_json::Value` reads it (same checks, same errors) and
/// kept nowhere.
pub(super) struct AnyValue;

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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn raw(text: &str) -> &RawValue {
        serde_json::from_str(text).expect("valid JSON")
    }

    /// What serde_json says: whether the text is a `Value`, and its members by `Value::get`.
    fn by_value(text: &str, keys: &[&str]) -> Option<Vec<Option<Value>>> {
        let v: Value = serde_json::from_str(text).ok()?;
        Some(keys.iter().map(|k| v.get(*k).cloned()).collect())
    }

    /// What [`Object`] says, the same way.
    fn by_object(text: &str, keys: &[&str]) -> Option<Vec<Option<Value>>> {
        let o = Object::checked(raw(text)).ok()?;
        assert_eq!(o.is_object(), text.trim_start().starts_with('{'), "{text}");
        Some(keys.iter().map(|k| o.member(k).map(|m| serde_json::from_str(m).expect("member text"))).collect())
    }

    #[test]
    fn objects_read_as_their_values_read() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let texts = [
            r#"{"metadata":{"name":"x","managedFields":[{"a":1}]},"spec":{"stage":"Idle"}}"#.to_owned(),
            r#"{"spec":1,"spec":{"stage":"Drain"}}"#.into(),
            r#"{"sp\u0065c":{"a":"\"}"}}"#.into(),
            r#"{"s\"pec":1,"spec":[1,2,{"}":"]"}]}"#.into(),
            r#" { "spec" : { "a" : [ 1 , -2.5 , true , null ] } , "status" : "x" } "#.into(),
            r#"{"spec":null}"#.into(),
            r#"{}"#.into(),
            r#"[{"spec":1}]"#.into(),
            r#""spec""#.into(),
            r#"null"#.into(),
            r#"{"metadata":{"name":"\ud800"}}"#.into(),
            r#"{"metadata":{"name":"\ud83d\ude00"}}"#.into(),
            r#"{"metadata":{"generation":1e400}}"#.into(),
            r#"{"metadata":{"generation":1e300}}"#.into(),
            format!(r#"{{"n":{}}}"#, "9".repeat(400)),
            format!(r#"{{"n":{}}}"#, "9".repeat(250)),
            format!(r#"{{"spec":{}}}"#, deep(SURE_DEPTH + 10)),
            format!(r#"{{"spec":{}}}"#, deep(126)),
            format!(r#"{{"spec":{}}}"#, deep(127)),
            format!(r#"{{"spec":{}}}"#, deep(200)),
        ];
        for t in &texts {
            let keys = ["spec", "status", "metadata", "s\"pec", "n"];
            assert_eq!(by_object(t, &keys), by_value(t, &keys), "{t}");
        }
    }

    #[test]
    fn the_common_objects_are_settled_by_the_scan() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apiserver");
        let mut settled = 0;
        for entry in std::fs::read_dir(dir).expect("recorded fixtures") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let review: Value = serde_json::from_slice(&std::fs::read(&path).expect("fixture")).expect("JSON");
            let object = review["request"]["object"].to_string();
            if let Scan::Sure(Some(members)) = scan(&object) {
                settled += 1;
                assert_eq!(members, Object { text: &object, members: read_members(&object) }.members);
            }
        }
        assert!(settled > 20, "{settled} recorded objects settled by the scan");
    }

    /// JSON texts with the features the scan must settle or leave to serde_json: nesting,
    /// escapes (including lone surrogates), big numbers and exponents, repeated and escaped
    /// keys, whitespace.
    fn json_text() -> impl Strategy<Value = String> {
        let ws = prop::sample::select(vec!["", " ", "\n\t "]);
        let leaf = prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            "-?(0|[1-9][0-9]{0,19})(\\.[0-9]{1,5})?([eE][+-]?[0-9]{1,3})?",
            "-?[1-9][0-9]{280,320}(\\.[0-9]{1,3})?",
            prop::sample::select(vec![
                r#""plain""#,
                r#""a\"b\\c\/d\n""#,
                r#""\u0041""#,
                r#""\ud800""#,
                r#""\udc00x""#,
                r#""\ud83d\ude00""#,
                r#""spec""#,
                r#""é""#,
                r#""""#,
            ])
            .prop_map(str::to_owned),
        ];
        let key = prop::sample::select(vec![
            r#""spec""#,
            r#""status""#,
            r#""metadata""#,
            r#""sp\u0065c""#,
            r#""s\"pec""#,
            r#""x""#,
        ]);
        leaf.prop_recursive(8, 64, 6, move |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 0..5), ws.clone())
                    .prop_map(|(items, w)| format!("[{w}{}{w}]", items.join(&format!("{w},{w}")))),
                (prop::collection::vec((key.clone(), inner), 0..5), ws.clone()).prop_map(|(members, w)| {
                    let members: Vec<String> = members.iter().map(|(k, v)| format!("{k}{w}:{w}{v}")).collect();
                    format!("{{{w}{}{w}}}", members.join(","))
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn any_text_reads_as_its_value_reads(text in json_text(), depth in 0usize..140) {
            // Deep nesting around the generated text, up to past serde_json's limit.
            let text = format!("{}{text}{}", "[".repeat(depth), "]".repeat(depth));
            let keys = ["spec", "status", "metadata", "s\"pec", "x"];
            prop_assert_eq!(by_object(&text, &keys), by_value(&text, &keys));
            let wrapped = format!(r#"{{"spec":{text},"x":1}}"#);
            prop_assert_eq!(by_object(&wrapped, &keys), by_value(&wrapped, &keys));
        }
    }
}
