//! One decision of the controller at scale, measured as its parts and together
//! (docs/benchmarks.md, "The decision"): 5,000 nodes, 100,000 pods, 10 maintenances and 20
//! NodeDisruptionBudgets with gates.
//!
//! - `decision/pass`: the drain planner over the 10 Drain maintenances mid-drain
//!   (benches/planner.rs's `plan/mid_drain` input).
//! - `decision/gates`: the 20 budgets' gates compiled and evaluated, as each decision does
//!   (windows `0 22 * * 5,6` for 8h in Europe/Berlin, two blackouts, `maxUnhealthy: 10%` over
//!   250 nodes each, two alert matchers and an ignore entry against 50 firing alerts).
//! - `decision/allotment`: the hold allotment (benches/holds.rs's input) with the budgets'
//!   verdicts.
//! - `decision/all`: the three in sequence, what one decision over the caches costs.
//!
//! Run: `cargo bench --bench decide`.

#[path = "common/drain_inputs.rs"]
mod drain_inputs;
#[path = "common/hold_inputs.rs"]
mod hold_inputs;
#[path = "common/plans.rs"]
mod plans;
use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use node_maintenance::api::{AlertGate, Blackout, HealthGate, MaintenanceWindow, NodeDisruptionBudgetSpec};
use node_maintenance::planner::gates::{AlertsView, CompiledGates, GateNode, GateVerdict};
use node_maintenance::planner::holds::{BudgetView, allot};
use node_maintenance::planner::{PlannerInput, plan};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

const BUDGET_NODES: usize = 250;

fn ts(s: &str) -> Time {
    Time(s.parse().expect("a timestamp"))
}

fn gated_spec() -> NodeDisruptionBudgetSpec {
    let window = |tz: &str| MaintenanceWindow {
        schedule: "0 22 * * 5,6".into(),
        duration: "8h".into(),
        time_zone: Some(tz.into()),
    };
    NodeDisruptionBudgetSpec {
        max_unavailable: Some(IntOrString::String("5%".into())),
        maintenance_windows: vec![window("Europe/Berlin"), window("America/New_York")],
        blackouts: vec![
            Blackout {
                start: ts("2026-12-18T00:00:00Z"),
                end: ts("2027-01-04T00:00:00Z"),
                reason: Some("freeze".into()),
            },
            Blackout { start: ts("2027-03-01T00:00:00Z"), end: ts("2027-03-02T00:00:00Z"), reason: None },
        ],
        health_gate: Some(HealthGate {
            max_unhealthy: Some(IntOrString::String("10%".into())),
            alerts: Some(AlertGate {
                matchers: vec![r#"{severity="critical"}"#.into(), r#"{team=~"db|storage",severity!="info"}"#.into()],
                ignore: vec![r#"{alertname="Watchdog"}"#.into()],
            }),
        }),
        ..Default::default()
    }
}

fn firing() -> AlertsView {
    let alert = |i: usize| {
        BTreeMap::from([
            ("alertname".to_owned(), format!("Alert{i}")),
            ("severity".to_owned(), ["warning", "info", "critical"][i % 3].to_owned()),
            ("team".to_owned(), ["web", "db", "batch", "storage"][i % 4].to_owned()),
        ])
    };
    AlertsView::Firing((0..50).map(alert).collect())
}

/// Each budget's gates compiled and evaluated at `now` over its 250 nodes (one in 100
/// NotReady, one in 20 held).
fn verdicts(specs: &[NodeDisruptionBudgetSpec], alerts: &AlertsView, now: Timestamp) -> Vec<GateVerdict> {
    let nodes: Vec<GateNode> =
        (0..BUDGET_NODES).map(|n| GateNode { ready: n % 100 != 7, held: n.is_multiple_of(20) }).collect();
    specs
        .iter()
        .enumerate()
        .map(|(i, spec)| CompiledGates::compile(&format!("b{i}"), spec).evaluate(&nodes, alerts, now))
        .collect()
}

fn with_gates(budgets: &[BudgetView], verdicts: Vec<GateVerdict>) -> Vec<BudgetView> {
    budgets.iter().zip(verdicts).map(|(b, gates)| BudgetView { gates, ..b.clone() }).collect()
}

fn bench(c: &mut Criterion) {
    let input = PlannerInput {
        maintenances: drain_inputs::maintenances(true),
        pods: drain_inputs::pods(),
        nodes: drain_inputs::nodes(true),
        ..Default::default()
    };
    let (requests, nodes, budgets) = hold_inputs::inputs();
    let specs = vec![gated_spec(); budgets.len()];
    let alerts = firing();
    // A Saturday night in Berlin: the windows are open, so the counts decide.
    let now: Timestamp = "2026-11-28T23:00:00Z".parse().expect("now");
    let mut group = c.benchmark_group("decision");
    group.sample_size(20);
    group.bench_function("pass", |b| b.iter(|| plan(black_box(&input))));
    group.bench_function("gates", |b| b.iter(|| verdicts(black_box(&specs), &alerts, now)));
    let gated = with_gates(&budgets, verdicts(&specs, &alerts, now));
    group.bench_function("allotment", |b| b.iter(|| allot(black_box(&requests), black_box(&nodes), &gated)));
    group.bench_function("all", |b| {
        b.iter(|| {
            let decision = plan(black_box(&input));
            let budgets = with_gates(&budgets, verdicts(&specs, &alerts, now));
            (decision, allot(black_box(&requests), black_box(&nodes), &budgets))
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
