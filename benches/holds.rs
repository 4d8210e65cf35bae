//! The hold allotment of issue 20 at scale (docs/benchmarks.md, "Rolling maintenance"): it
//! runs in every reconcile of an active maintenance, over every node, maintenance and
//! NodeDisruptionBudget of the cluster.
//!
//! 5,000 nodes; 10 rolling maintenances, maintenance `i` over the 1,000 nodes from node
//! `500 * i` (so every node is selected by two), `maxUnavailable: 10%`, each holding its
//! first 50 nodes and with 200 released; 20 NodeDisruptionBudgets of 250 nodes each with
//! `maxUnavailable: 5%`; a node in 50 cordoned by someone else, one in 100 NotReady.
//!
//! - `allot/mid_roll`: the allotment as a reconcile computes it.
//!
//! Run: `cargo bench --bench holds`.

#[path = "common/hold_inputs.rs"]
mod hold_inputs;
use criterion::{Criterion, criterion_group, criterion_main};
use hold_inputs::inputs;
use node_maintenance::planner::holds::allot;
use std::hint::black_box;
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let (requests, nodes, budgets) = inputs();
    let mut group = c.benchmark_group("allot");
    group.sample_size(20);
    group
        .bench_function("mid_roll", |b| b.iter(|| allot(black_box(&requests), black_box(&nodes), black_box(&budgets))));
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
