//! RFC 3339 blackouts (`spec.blackouts[]`, read as `metav1.Time`): any text, or a civil time
//! with any field values and offset, as `start` and `end`. A time that reads writes back as
//! its second (the fraction dropped); over the blackouts that read, at `now` and at every edge (and a
//! nanosecond before), the Blackout gate is closed exactly when one covers the instant,
//! says until the end of their union, and the next instant the verdict changes at is the
//! first start after it or the first end of one covering it. Input: a first byte with its
//! lowest bit clear, `input::KNOBS` bytes in all, then texts (start, end, start, end, ...,
//! and now when their count is odd); set, the rest is read with `arbitrary`.
#![no_main]

use arbitrary::Arbitrary;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use libfuzzer_sys::fuzz_target;
use node_maintenance::api::{Blackout, GateReason, NodeDisruptionBudgetSpec};
use node_maintenance::gates::{AlertsView, CompiledGates};
use node_maintenance_fuzz::input;

#[derive(Arbitrary, Debug)]
enum Text {
    Raw(String),
    Civil { year: i16, month: u8, day: u8, hour: u8, minute: u8, second: u8, nanos: Option<u32>, offset: Option<i16> },
}

impl Text {
    fn render(&self) -> String {
        match self {
            Text::Raw(s) => s.clone(),
            Text::Civil { year, month, day, hour, minute, second, nanos, offset } => {
                let frac = nanos.map(|n| format!(".{:09}", n % 1_000_000_000)).unwrap_or_default();
                let zone = match offset {
                    None => "Z".to_owned(),
                    Some(m) => format!(
                        "{}{:02}:{:02}",
                        if *m < 0 { '-' } else { '+' },
                        m.unsigned_abs() / 60,
                        m.unsigned_abs() % 60
                    ),
                };
                format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{frac}{zone}")
            }
        }
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    blackouts: Vec<(Text, Text, Option<String>)>,
    now: Text,
}

fn read(text: &str) -> Option<Timestamp> {
    let t: Time = serde_json::from_value(serde_json::Value::String(text.to_owned())).ok()?;
    // Written back (a status, a message) it reads as its second. Only years of four digits:
    // RFC 3339 has no others, and the apiserver's `date-time` format refuses them before
    // any webhook or controller reads the object (`metav1.Time` writes year -1 as `-001`).
    if !(0..=9999).contains(&t.0.to_zoned(jiff::tz::TimeZone::UTC).year()) {
        return Some(t.0);
    }
    let written = serde_json::to_value(&t).expect("a Time serializes");
    let again: Time =
        serde_json::from_value(written.clone()).unwrap_or_else(|e| panic!("{text:?} wrote {written}: {e}"));
    let lost = t.0.duration_since(again.0);
    assert!(lost >= SignedDuration::ZERO && lost < SignedDuration::from_secs(1), "{text:?} wrote {written}");
    Some(t.0)
}

fn raw(data: &[u8]) -> Input {
    let (_, texts) = input::split(data);
    let pairs = texts.chunks_exact(2).map(|p| (Text::Raw(p[0].to_owned()), Text::Raw(p[1].to_owned()), None)).collect();
    let now = if texts.len() % 2 == 1 { texts[texts.len() - 1] } else { "2026-12-24T00:00:00Z" };
    Input { blackouts: pairs, now: Text::Raw(now.to_owned()) }
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input::structured_or(data, raw) else { return };
    let mut spec = NodeDisruptionBudgetSpec::default();
    for (start, end, reason) in input.blackouts.iter().take(6) {
        let (start, end) = (start.render(), end.render());
        let (Some(s), Some(e)) = (read(&start), read(&end)) else { continue };
        let json = serde_json::json!({"start": start, "end": end, "reason": reason});
        let b: Blackout = serde_json::from_value(json).expect("a blackout whose times read reads");
        assert_eq!((b.start.0, b.end.0), (s, e));
        spec.blackouts.push(b);
    }
    let spans: Vec<(Timestamp, Timestamp)> =
        spec.blackouts.iter().map(|b| (b.start.0, b.end.0)).filter(|(s, e)| e > s).collect();
    let gates = CompiledGates::compile("b", &spec);
    let nano = SignedDuration::from_nanos(1);
    let mut instants: Vec<Timestamp> = read(&input.now.render()).into_iter().collect();
    for (s, e) in &spans {
        instants.extend([*s, *e]);
        instants.extend([s.checked_sub(nano).ok(), e.checked_sub(nano).ok()].into_iter().flatten());
    }
    for at in instants {
        let covering: Vec<&(Timestamp, Timestamp)> = spans.iter().filter(|(s, e)| *s <= at && at < *e).collect();
        let v = gates.evaluate(&[], &AlertsView::NotConfigured, at);
        let closure = v.closed.iter().find(|c| c.reason == GateReason::Blackout);
        assert_eq!(closure.is_some(), !covering.is_empty(), "at {at} over {spans:?}");
        let edge = spans.iter().filter(|(s, _)| *s > at).map(|(s, _)| *s).chain(covering.iter().map(|(_, e)| *e)).min();
        assert_eq!(v.next_instant, edge, "at {at} over {spans:?}");
        if let Some(c) = closure {
            let mut until = covering.iter().map(|(_, e)| *e).max().expect("covered");
            while let Some(later) = spans.iter().filter(|(s, e)| *s <= until && until < *e).map(|(_, e)| *e).max() {
                until = later;
            }
            assert!(c.message.contains(&format!("until {until}")), "at {at} over {spans:?}: {}", c.message);
        }
    }
});
