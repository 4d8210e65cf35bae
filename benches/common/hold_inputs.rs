//! The hold allotment's input at scale, shared by the allotment and decision benches (see
//! benches/holds.rs).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use node_maintenance::planner::holds::{BudgetView, HoldRequest, NodeView};
use std::borrow::Cow;

const NODES: usize = 5_000;
const MAINTENANCES: usize = 10;
const BUDGETS: usize = 20;

fn node_name(i: usize) -> String {
    format!("worker-{i:05}")
}

/// 10 rolling maintenances (each holding 50 nodes, 200 released), 5,000 nodes (one in 50
/// cordoned, one in 100 NotReady) and 20 budgets of 250 nodes with `maxUnavailable: 5%`.
pub fn inputs() -> (Vec<HoldRequest>, Vec<NodeView<'static>>, Vec<BudgetView>) {
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
    let nodes: Vec<NodeView<'static>> = (0..NODES)
        .map(|n| {
            let holders = (0..MAINTENANCES)
                .filter(|&i| (n + NODES - (500 * i) % NODES) % NODES < 50)
                .map(|i| format!("m{i}"))
                .collect();
            NodeView {
                name: node_name(n).into(),
                ready: n % 100 != 7,
                unschedulable: n % 50 == 3,
                holders: Cow::Owned(holders),
            }
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
