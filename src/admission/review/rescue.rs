//! Rescuing the uid of a body that is not a valid AdmissionReview (SPEC 5 "Wire format": a
//! request that cannot be decoded still gets HTTP 200 with `allowed: false` when its uid can
//! be read): a lenient reader of `apiVersion` and `request.uid` alone.

use serde::Deserialize;

/// The least that can be read from a body that is not a valid AdmissionReview: `apiVersion`
/// and `request.uid`, leniently. A member of another JSON type reads as absent, other
/// members are skipped without being built (so neither a wrong type elsewhere nor deep
/// nesting loses a readable uid), and a member given twice is ambiguous: absent.
#[derive(Debug, Default, PartialEq)]
pub(super) struct UidOnly {
    pub(super) api_version: Option<String>,
    pub(super) uid: Option<String>,
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
