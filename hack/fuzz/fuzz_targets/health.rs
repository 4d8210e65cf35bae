//! The health gate's `maxUnhealthy` (`MaxUnhealthy::parse`) and the counts of a rolling
//! maintenance and a NodeDisruptionBudget (`scaled_count`, `budget_max_unavailable`), on any
//! int-or-string, read from JSON as the API serves them:
//! - `maxUnhealthy` takes an integer from 0 or `"<0..100>%"` (Go's `Atoi` digits after an
//!   optional `+`), resolves to at most the selected nodes for a percentage, and the gate
//!   closes exactly when more selected nodes than that are unhealthy (not Ready, not held);
//! - a count is at least 1 and a percentage at most the nodes (rounded up, 1 at least); a
//!   budget never lets more than its selected nodes be unavailable.
//! Input: `input::KNOBS` bytes (the node count in two, then each selected node's Ready and
//! held bits), then texts: the value as JSON, and another for a budget's other count.
#![no_main]

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use libfuzzer_sys::fuzz_target;
use node_maintenance::api::{GateReason, HealthGate, NodeDisruptionBudgetSpec, budget_max_unavailable, scaled_count};
use node_maintenance::gates::{AlertsView, CompiledGates, GateNode, MaxUnhealthy};
use node_maintenance_fuzz::input;

/// `"<digits>%"` with an optional `+`, as an integer.
fn percent(s: &str) -> Option<usize> {
    let digits = s.strip_suffix('%')?;
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.bytes().fold(0usize, |n, b| n.saturating_mul(10).saturating_add(usize::from(b - b'0'))))
}

fuzz_target!(|data: &[u8]| {
    let (knobs, texts) = input::split(data);
    let Some(value) = texts.first().and_then(|t| serde_json::from_str::<IntOrString>(t).ok()) else { return };
    let total = usize::from(u16::from_le_bytes([knobs[0], knobs[1]]));
    let parsed = MaxUnhealthy::parse(&value);
    let model = match &value {
        IntOrString::Int(n) => usize::try_from(*n).ok().map(MaxUnhealthy::Nodes),
        IntOrString::String(s) => percent(s).filter(|p| *p <= 100).map(MaxUnhealthy::Percent),
    };
    assert_eq!(parsed.clone().ok(), model, "{value:?}");
    if let Ok(MaxUnhealthy::Percent(p)) = parsed {
        assert!(MaxUnhealthy::Percent(p).resolve(total) <= total);
    }
    let bit = |i: usize| knobs[2 + i / 8] & (1 << (i % 8)) != 0;
    let count = usize::from(knobs[14] % 49);
    let nodes: Vec<GateNode> = (0..count).map(|i| GateNode { ready: bit(i), held: bit(48 + i % 48) }).collect();
    let spec = NodeDisruptionBudgetSpec {
        health_gate: Some(HealthGate { max_unhealthy: Some(value.clone()), alerts: None }),
        ..Default::default()
    };
    let verdict =
        CompiledGates::compile("b", &spec).evaluate(&nodes, &AlertsView::NotConfigured, jiff::Timestamp::UNIX_EPOCH);
    let closed = verdict.closed.iter().any(|c| c.reason == GateReason::TooManyUnhealthyNodes);
    let unhealthy = nodes.iter().filter(|n| !n.ready && !n.held).count();
    match parsed {
        Ok(m) => assert_eq!(closed, unhealthy > m.resolve(nodes.len()), "{value:?} over {nodes:?}"),
        Err(_) => assert!(closed, "an unreadable maxUnhealthy closes the gate"),
    }

    match scaled_count(&value, total) {
        Ok(n) => {
            assert!(n >= 1);
            if matches!(value, IntOrString::String(_)) {
                assert!(n <= total.max(1), "{value:?} of {total}: {n}");
            }
        }
        Err(_) => assert!(match &value {
            IntOrString::Int(n) => *n < 1,
            IntOrString::String(s) => percent(s).is_none_or(|p| !(1..=100).contains(&p)),
        }),
    }
    let other = texts.get(1).and_then(|t| serde_json::from_str::<IntOrString>(t).ok());
    for (max, min) in [(Some(&value), None), (None, Some(&value)), (Some(&value), other.as_ref()), (None, None)] {
        if let Ok(m) = budget_max_unavailable(max, min, total) {
            assert!(m <= total, "{max:?} {min:?} of {total}: {m}");
        }
    }
});
