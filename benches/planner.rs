//! The drain planner at scale (docs/benchmarks.md; target: < 50 ms per pass): 5,000 nodes,
//! 100,000 pods, 10 overlapping Drain-stage maintenances.
//!
//! Maintenance `i` selects the 1,000 nodes starting at node `500 * i` (wrapping), so every
//! node is selected by two maintenances and neighbours hold each other back. Plans are the
//! 12 defaults plus, for some maintenances, user entries with podSelectors (`app=postgres`,
//! `tier=cache`), at different cursors; some nodes already reached targets (their floor),
//! some carry the draining taint. Pods: 20 per node, of which 3 DaemonSet pods (one
//! tolerating the taint on some nodes), a static pod on every fourth node, and Default pods
//! with priorities 0, 1000, 5000, 1e9 and 2e9, labelled by app and tier; a few are
//! terminal or already being evicted.
//!
//! - `plan/first_pass`: every cursor at 0 and no floors (a fresh drain).
//! - `plan/mid_drain`: cursors spread over the plans, floors and taints set.
//!
//! Run: `cargo bench --bench planner`.

#[path = "common/drain_inputs.rs"]
mod drain_inputs;
#[path = "common/plans.rs"]
mod plans;
use criterion::{Criterion, criterion_group, criterion_main};
use drain_inputs::{maintenances, nodes, pods};
use node_maintenance::planner::{PlannerInput, PlannerOptions, plan};
use std::hint::black_box;
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let pods = pods();
    let mut group = c.benchmark_group("plan");
    group.sample_size(20);
    for (name, mid) in [("first_pass", false), ("mid_drain", true)] {
        let input = PlannerInput {
            maintenances: maintenances(mid),
            pods: pods.clone(),
            nodes: nodes(mid),
            ..Default::default()
        };
        group.bench_function(name, |b| b.iter(|| plan(black_box(&input))));
    }
    // Issue 14: the same mid-drain pass with drain slots to allot (at most 500 nodes draining
    // in all: `--max-draining-nodes`), to compare with `mid_drain` in one run.
    let options = PlannerOptions { max_draining_nodes: Some(500), ..Default::default() };
    let input = PlannerInput {
        maintenances: maintenances(true),
        pods: pods.clone(),
        nodes: nodes(true),
        options,
        ..Default::default()
    };
    group.bench_function("mid_drain_budgeted", |b| b.iter(|| plan(black_box(&input))));
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
