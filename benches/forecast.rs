//! The forecast of SPEC 4.7 at pool sizes (docs/benchmarks.md, "The forecast"): one rolling
//! maintenance two nodes at a time under a budget with the worked example's windows (Friday
//! and Saturday 22:00-06:00 Europe/Berlin) and a year-end freeze, 1-2 hours a node (median
//! 1h30m, p90 2h: both timelines are simulated), from 2026-12-01.
//!
//! - `forecast/pool/N`: the whole forecast of a pool of N nodes, none started yet.
//!
//! Run: `cargo bench --bench forecast`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use node_maintenance::api::{Blackout, MaintenanceWindow, NodeDisruptionBudgetSpec};
use node_maintenance::gates::CompiledGates;
use node_maintenance::planner::forecast::{Basis, BudgetTimeline, ForecastInput, forecast};
use node_maintenance::planner::holds::{BudgetView, HoldRequest, NodeView};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

fn input(n: usize) -> ForecastInput<'static> {
    let names: Vec<String> = (0..n).map(|i| format!("worker-{i:05}")).collect();
    let spec = NodeDisruptionBudgetSpec {
        max_unavailable: Some(IntOrString::Int(5)),
        maintenance_windows: vec![MaintenanceWindow {
            schedule: "0 22 * * 5,6".into(),
            duration: "8h".into(),
            time_zone: Some("Europe/Berlin".into()),
        }],
        blackouts: vec![Blackout {
            start: Time("2026-12-18T00:00:00Z".parse().unwrap()),
            end: Time("2027-01-04T00:00:00Z".parse().unwrap()),
            reason: Some("year-end freeze".into()),
        }],
        ..Default::default()
    };
    let view = BudgetView {
        name: "general".into(),
        nodes: names.clone(),
        max_unavailable: spec.max_unavailable.clone(),
        ..Default::default()
    };
    let budget = BudgetTimeline { gates: CompiledGates::compile("general", &spec), health_gate: false, view };
    let nodes = names
        .iter()
        .map(|name| NodeView { name: name.clone().into(), ready: true, unschedulable: false, holders: Cow::default() })
        .collect();
    let minutes = |m: u64| Duration::from_secs(m * 60);
    ForecastInput {
        request: HoldRequest {
            name: "kernel".into(),
            selected: names,
            max_unavailable: Some(IntOrString::Int(2)),
            ..Default::default()
        },
        facts: BTreeMap::new(),
        nodes,
        budgets: vec![std::borrow::Cow::Owned(budget)],
        basis: Basis::new(&[minutes(60), minutes(90), minutes(120)], None),
        now: "2026-12-01T10:00:00Z".parse().unwrap(),
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("forecast");
    group.sample_size(10);
    for n in [30, 300, 1_000] {
        let input = input(n);
        group.bench_with_input(BenchmarkId::new("pool", n), &input, |b, i| b.iter(|| forecast(black_box(i))));
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
