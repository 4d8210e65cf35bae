//! The RE2 reading of alert matcher regular expressions (`gates::re2`, through a selector
//! `{z="1",a=~"<pattern>"}`):
//! - in the syntax Go's RE2 and the `regex` crate read alike (no `\`, `[`, `{` or `(?`), an
//!   accepted pattern is one the crate accepts too and matches the same values, fully
//!   anchored with `.` matching a newline; one the crate accepts is refused only as Go
//!   refuses it (stacked repetitions);
//! - any text quoted with Go's `regexp.QuoteMeta` is accepted and matches itself only;
//! - any pattern at all: accepted ones match deterministically, none panics.
//! Input: `input::KNOBS` bytes (the first's lowest bit: the QuoteMeta property instead of
//! the pattern ones), then texts: the pattern (or the literal), values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use node_maintenance_fuzz::quote::{go_quote, quote_meta};
use node_maintenance_fuzz::{alerts, input};
use regex::Regex;
use std::collections::BTreeMap;

fn labels(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("z".to_owned(), "1".to_owned()), ("a".to_owned(), value.to_owned())])
}

fn selector(pattern: &str) -> String {
    format!("{{z=\"1\",a=~{}}}", go_quote(pattern, &[]))
}

fuzz_target!(|data: &[u8]| {
    let (knobs, texts) = input::split(data);
    let [pattern, values @ ..] = texts.as_slice() else { return };
    let values: Vec<&str> = values.iter().take(4).copied().collect();
    if knobs[0] & 1 == 1 {
        quoted(pattern, &values);
    } else {
        any(pattern, &values);
    }
});

fn any(pattern: &str, values: &[&str]) {
    let common = !pattern.contains(['\\', '[', '{']) && !pattern.contains("(?");
    let ours = alerts::compile(&selector(pattern));
    if common {
        match (&ours, Regex::new(pattern)) {
            (Ok(s), Ok(_)) => {
                let anchored = Regex::new(&format!("^(?s:{pattern})$")).expect("a balanced pattern wraps");
                for v in values {
                    assert_eq!(s.matches(&labels(v)), anchored.is_match(v), "{pattern:?} on {v:?}");
                }
            }
            (Ok(_), Err(e)) => panic!("{pattern:?} accepted, the regex crate refuses it: {e}"),
            (Err(e), Ok(_)) => assert!(e.iter().any(|e| e.contains("nested repetition")), "{pattern:?} refused: {e:?}"),
            (Err(_), Err(_)) => {}
        }
    } else if let Ok(s) = &ours {
        for v in values {
            assert_eq!(s.matches(&labels(v)), s.matches(&labels(v)));
        }
    }
}

fn quoted(literal: &str, values: &[&str]) {
    let quoted = alerts::compile(&selector(&quote_meta(literal)))
        .unwrap_or_else(|e| panic!("QuoteMeta({literal:?}) refused: {e:?}"));
    assert!(quoted.matches(&labels(literal)), "QuoteMeta({literal:?}) does not match itself");
    assert!(!quoted.matches(&labels(&format!("{literal}x"))), "QuoteMeta({literal:?}) matches more");
    for v in values {
        assert_eq!(quoted.matches(&labels(v)), *v == literal, "QuoteMeta({literal:?}) on {v:?}");
    }
}
