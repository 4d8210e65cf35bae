//! The drain planner's input at scale, shared by the planner and decision benches: 5,000
//! nodes, 100,000 pods, 10 overlapping Drain-stage maintenances (see benches/planner.rs).

use super::plans::user_plan;
use node_maintenance::api::{DrainPlanEntry, PodType};
use node_maintenance::planner::{MaintenanceInput, NodeInput, PodView};
use std::collections::BTreeMap;

/// Nodes in the cluster.
pub const NODES: usize = 5_000;
const PODS_PER_NODE: usize = 20;
const MAINTENANCES: usize = 10;

/// The name of node `i`.
pub fn node_name(i: usize) -> String {
    format!("worker-{i:05}")
}

/// The 10 maintenances, cursors spread over their plans when `mid_drain`.
pub fn maintenances(mid_drain: bool) -> Vec<MaintenanceInput> {
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

/// What each node reached (floors, taints) when `mid_drain`; nothing on a first pass.
pub fn nodes(mid_drain: bool) -> Vec<NodeInput> {
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

/// The 100,000 pods.
pub fn pods() -> Vec<PodView> {
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
