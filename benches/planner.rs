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

#[path = "common/plans.rs"]
mod plans;
use criterion::{Criterion, criterion_group, criterion_main};
use node_maintenance::api::{DrainPlanEntry, PodType};
use node_maintenance::planner::{MaintenanceInput, NodeInput, PlannerInput, PlannerOptions, PodView, plan};
use plans::user_plan;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

const NODES: usize = 5_000;
const PODS_PER_NODE: usize = 20;
const MAINTENANCES: usize = 10;

fn node_name(i: usize) -> String {
    format!("worker-{i:05}")
}

fn maintenances(mid_drain: bool) -> Vec<MaintenanceInput> {
    (0..MAINTENANCES)
        .map(|i| {
            let drain_plan = user_plan(i);
            let cursor = if mid_drain { (i % 3) as i32 } else { 0 };
            MaintenanceInput {
                name: format!("maintenance-{i}"),
                created: 1_700_000_000 + i as i64,
                drain_plan,
                drain_plan_index: cursor,
                nodes: (0..1_000).map(|k| node_name((500 * i + k) % NODES)).collect(),
                wait_for_completion: None,
            }
        })
        .collect()
}

fn nodes(mid_drain: bool) -> Vec<NodeInput> {
    if !mid_drain {
        return vec![];
    }
    (0..NODES)
        .map(|n| NodeInput {
            name: node_name(n),
            reached: if n.is_multiple_of(3) { vec![DrainPlanEntry::new(PodType::Default, 1000)] } else { vec![] },
            draining_taint: n.is_multiple_of(10),
            gated: None,
            drain_start: None,
        })
        .collect()
}

const APPS: [&str; 8] = ["web", "api", "postgres", "redis", "worker", "batch", "search", "queue"];
const PRIORITIES: [i32; 6] = [0, 0, 1000, 5000, 1_000_000_000, 2_000_000_000];

fn pods() -> Vec<PodView> {
    let mut out = Vec::with_capacity(NODES * PODS_PER_NODE);
    for n in 0..NODES {
        let node_name = node_name(n);
        for k in 0..PODS_PER_NODE {
            let id = n * PODS_PER_NODE + k;
            let (pod_type, app, priority) = match k {
                0 => (PodType::DaemonSet, "logging", 2_000_001_000),
                1 => (PodType::DaemonSet, "kube-proxy", 2_000_001_000),
                2 => (PodType::DaemonSet, "node-exporter", 1_000_000_000),
                3 if n.is_multiple_of(4) => (PodType::Static, "etcd", 2_000_001_000),
                _ => (PodType::Default, APPS[id % APPS.len()], PRIORITIES[(id / 3) % PRIORITIES.len()]),
            };
            let mut labels = BTreeMap::from([
                ("app".to_owned(), app.to_owned()),
                ("pod-template-hash".to_owned(), format!("{:08x}", id / 7)),
            ]);
            if matches!(app, "redis" | "search") {
                labels.insert("tier".into(), "cache".into());
            }
            out.push(PodView {
                namespace: format!("team-{}", id % 40).into(),
                name: format!("{app}-{id:07}").into(),
                uid: format!("00000000-0000-0000-0000-{id:012}").into(),
                node_name: node_name.as_str().into(),
                priority,
                pod_type,
                labels: labels.into_iter().collect(),
                eviction_in_progress: id.is_multiple_of(97),
                terminal: id.is_multiple_of(211),
                tolerates_draining_taint: k == 2 && n.is_multiple_of(5),
                ..PodView::default()
            });
        }
    }
    out
}

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
