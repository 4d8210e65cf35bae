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

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use node_maintenance::planner::holds::{BudgetView, HoldRequest, NodeView, allot};
use std::hint::black_box;
use std::time::Duration;

const NODES: usize = 5_000;
const MAINTENANCES: usize = 10;
const BUDGETS: usize = 20;

fn node_name(i: usize) -> String {
    format!("worker-{i:05}")
}

fn inputs() -> (Vec<HoldRequest>, Vec<NodeView>, Vec<BudgetView>) {
    let selected = |i: usize| (0..1_000).map(move |k| (500 * i + k) % NODES);
    let requests: Vec<HoldRequest> = (0..MAINTENANCES)
        .map(|i| HoldRequest {
            name: format!("m{i}"),
            created: i as i64,
            selected: selected(i).map(node_name).collect(),
            released: selected(i).skip(50).take(200).map(node_name).collect(),
            max_unavailable: Some(IntOrString::String("10%".into())),
            paused: false,
        })
        .collect();
    let nodes: Vec<NodeView> = (0..NODES)
        .map(|n| {
            let holders = (0..MAINTENANCES)
                .filter(|&i| (n + NODES - (500 * i) % NODES) % NODES < 50)
                .map(|i| format!("m{i}"))
                .collect();
            NodeView { name: node_name(n), ready: n % 100 != 7, unschedulable: n % 50 == 3, holders }
        })
        .collect();
    let budgets = (0..BUDGETS)
        .map(|b| BudgetView {
            name: format!("b{b}"),
            nodes: (250 * b..250 * (b + 1)).map(node_name).collect(),
            max_unavailable: Some(IntOrString::String("5%".into())),
            min_available: None,
            ..Default::default()
        })
        .collect();
    (requests, nodes, budgets)
}

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
