//! Prometheus alert selectors of a health gate (`spec.healthGate.alerts`, `Selector::parse`):
//! any text, or a selector written from parts (label names, the four operators, values in
//! any of Go's escapes, spaces, a trailing comma) with regular expressions that quote their
//! value. Written from parts, it is accepted exactly when some matcher does not match the
//! empty value (Prometheus' rule), and matches exactly the alerts a plain evaluation of its
//! matchers matches (a missing label being `""`). Any text: accepted ones never match an
//! alert without labels, refused ones keep the gate closed. Input: a first byte with its
//! lowest bit clear, `input::KNOBS` bytes in all, then the selector and alerts as texts
//! (`name=value,name=value`); set, the rest is read with `arbitrary` as the parts.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use node_maintenance_fuzz::quote::{go_quote, quote_meta};
use node_maintenance_fuzz::{alerts, input};
use std::collections::BTreeMap;

const NAMES: [&str; 4] = ["alertname", "severity", "team", "_x9"];

#[derive(Arbitrary, Debug)]
struct Matcher {
    name: u8,
    op: u8,
    value: String,
    style: Vec<u8>,
}

#[derive(Arbitrary, Debug)]
struct Parts {
    matchers: Vec<Matcher>,
    spaces: u8,
    trailing_comma: bool,
    alerts: Vec<Vec<(u8, String)>>,
}

fuzz_target!(|data: &[u8]| {
    match data.first() {
        Some(b) if b & 1 == 1 => {
            if let Ok(parts) = Parts::arbitrary_take_rest(Unstructured::new(&data[1..])) {
                check_parts(parts);
            }
        }
        _ => {
            let (_, texts) = input::split(data);
            let Some((text, alerts)) = texts.split_first() else { return };
            if let Ok(s) = alerts::compile(text) {
                for a in alerts.iter().take(4) {
                    let labels =
                        a.split(',').filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned()));
                    s.matches(&labels.collect());
                }
            }
        }
    }
});

fn check_parts(Parts { matchers, spaces, trailing_comma, alerts }: Parts) {
    let pad = " ".repeat(usize::from(spaces % 3));
    let parts: Vec<(&str, u8, String)> = matchers
        .iter()
        .take(4)
        .map(|m| (NAMES[usize::from(m.name) % NAMES.len()], m.op % 4, m.value.clone()))
        .collect();
    let written: Vec<String> = parts
        .iter()
        .zip(&matchers)
        .map(|((name, op, value), m)| {
            let value = if *op >= 2 { quote_meta(value) } else { value.clone() };
            let op = ["=", "!=", "=~", "!~"][usize::from(*op)];
            format!("{name}{pad}{op}{pad}{}", go_quote(&value, &m.style))
        })
        .collect();
    let comma = if trailing_comma && !written.is_empty() { "," } else { "" };
    let text = format!("{pad}{{{pad}{}{comma}{pad}}}{pad}", written.join(&format!("{pad},{pad}")));
    // A matcher holds for a label's value (missing: "") as written, regular expressions
    // matching their quoted value whole.
    let holds = |(name, op, value): &(&str, u8, String), labels: &BTreeMap<String, String>| {
        let actual = labels.get(*name).map_or("", String::as_str);
        (actual == value) == (*op % 2 == 0)
    };
    let accepted = !parts.is_empty() && !parts.iter().all(|p| holds(p, &BTreeMap::new()));
    match alerts::compile(&text) {
        Ok(s) => {
            assert!(accepted, "{text:?} accepted");
            for a in alerts.into_iter().take(4) {
                let labels: BTreeMap<String, String> =
                    a.into_iter().map(|(n, v)| (NAMES[usize::from(n) % NAMES.len()].to_owned(), v)).collect();
                let want = parts.iter().all(|p| holds(p, &labels));
                assert_eq!(s.matches(&labels), want, "{text:?} on {labels:?}");
            }
        }
        Err(e) => assert!(!accepted, "{text:?} refused: {e:?}"),
    }
}
