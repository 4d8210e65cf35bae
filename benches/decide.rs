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
//! - `decision/all`: the three in sequence: the planning pass plus the hold allotment, what
//!   the decision cost before the controller decided everything as data.
//! - `decision/decide`: the controller's whole decision over the objects as the caches hold
//!   them ([`node_maintenance::planner::decide::decide`], as the loop calls it with every job
//!   due), the pass aside: `common/cluster.rs`'s 5,000
//!   Nodes (each held and cordoned by the two Drain maintenances that select it) and its 10
//!   maintenances (Cordon and Drain recorded), and 20 NodeDisruptionBudgets of the same gates
//!   over one rack (500 nodes) each: the allotment with every budget's gates, then each
//!   maintenance's scope and decision (targets, conditions, evictions, status) from the pass,
//!   then the cluster-wide decision (budget statuses, `MaintenancePlanned`).
//! - `decision/decide_with_pass`: the pass, then `decision/decide`: one decision, all of it.
//! - `decision/decide_settled`: `decision/decide` again over the objects as that first
//!   decision's writes left them (every node showing its conditions, targets and taint, every
//!   maintenance its status): what each later decision of a steady drain costs.
//!
//! Run: `cargo bench --bench decide`.

// Its pods are not read here: the pass's input is `drain_inputs`' pods on the same nodes.
#[allow(dead_code)]
#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/drain_inputs.rs"]
mod drain_inputs;
#[path = "common/hold_inputs.rs"]
mod hold_inputs;
#[path = "common/plans.rs"]
mod plans;
use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Node, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use node_maintenance::api::{
    AlertGate, Blackout, DRAINING_TAINT, HealthGate, MAINTENANCE_STATUS_ANNOTATION, MaintenanceWindow,
    NodeDisruptionBudget, NodeDisruptionBudgetSpec, NodeMaintenance,
};
use node_maintenance::gates::{AlertsRead, AlertsView, CompiledGates, GateNode, GateVerdict};
use node_maintenance::planner::decide::drain::DrainView;
use node_maintenance::planner::decide::maintenance::MaintenanceDecision;
use node_maintenance::planner::decide::{self as decision, Decision, Snapshot};
use node_maintenance::planner::from_cluster::Nodes;
use node_maintenance::planner::holds::{BudgetView, allot};
use node_maintenance::planner::{DrainDecision, PlannerInput, plan};
use serde_json::json;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
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

/// The caches' objects: `common/cluster.rs`'s nodes and maintenances (Cordon and Drain
/// recorded) and 20 budgets with [`gated_spec`], budget `b` over rack `b % 10`.
struct Objects {
    nodes: Vec<Arc<Node>>,
    maintenances: Vec<Arc<NodeMaintenance>>,
    budgets: Vec<Arc<NodeDisruptionBudget>>,
}

fn objects() -> Objects {
    let nodes = (0..drain_inputs::NODES)
        .map(|n| Arc::new(serde_json::from_value(cluster::node(n, drain_inputs::NODES)).expect("a Node")))
        .collect();
    let maintenances = (0..cluster::MAINTENANCES)
        .map(|i| {
            let mut m = cluster::maintenance(i);
            m["metadata"]["creationTimestamp"] = json!(format!("2026-11-20T00:00:{i:02}Z"));
            m["status"]["stageStatuses"] = json!([
                {"name": "Cordon", "startTimestamp": "2026-11-20T01:00:00Z"},
                {"name": "Drain", "startTimestamp": "2026-11-20T01:00:00Z"},
            ]);
            Arc::new(serde_json::from_value(m).expect("a NodeMaintenance"))
        })
        .collect();
    let budgets = (0..20)
        .map(|b| {
            let mut budget = NodeDisruptionBudget::new(&format!("budget-{b}"), gated_spec());
            budget.spec.node_selector = serde_json::from_value(json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "example.com/rack", "operator": "In", "values": [format!("rack-{}", b % 10)]}]}]}))
            .expect("a selector");
            Arc::new(budget)
        })
        .collect();
    Objects { nodes, maintenances, budgets }
}

/// One decision over `o` at `now` from the planning pass `pass`, as the controller's loop
/// makes it with every job due: the snapshot (the one read of the Nodes), the scopes (the
/// allotment, the eviction gates), every maintenance's decision and the cluster-wide one.
fn decide(o: &Objects, pass: &Arc<DrainDecision>, alerts: &AlertsRead, now: &Time) -> Decision {
    let snapshot = Snapshot {
        nodes: Nodes::for_selectors(&o.nodes, &o.maintenances, &o.budgets),
        maintenances: &o.maintenances,
        budgets: &o.budgets,
        alerts,
        busy_requeue: Duration::from_secs(2),
        idle_requeue: Duration::from_secs(300),
        now: now.clone(),
    };
    let scopes = decision::scopes(&snapshot, |_| true);
    let drains = scopes
        .draining()
        .map(|(nm, _)| {
            let view = DrainView {
                decision: pass.clone(),
                gated: scopes.gated.clone(),
                evacuation: Default::default(),
                refused: BTreeMap::new(),
            };
            (nm.name_any(), view)
        })
        .collect();
    decision::decide(&snapshot, scopes, drains, true)
}

/// `o` after `decisions` were written: each node with its published status, taint and
/// conditions, each maintenance with its status (what the next decision reads).
fn settled(o: &Objects, decisions: &[MaintenanceDecision]) -> Objects {
    let mut nodes: BTreeMap<String, Node> = o.nodes.iter().map(|n| (n.name_any(), (**n).clone())).collect();
    for w in decisions.iter().flat_map(|d| &d.node_writes) {
        let Some(n) = nodes.get_mut(&w.node.name_any()) else { continue };
        if let Some(p) = &w.published {
            let value = serde_json::to_string(p).expect("serializes");
            n.metadata.annotations.get_or_insert_default().insert(MAINTENANCE_STATUS_ANNOTATION.into(), value);
        }
        if w.taint {
            let taint = Taint { key: DRAINING_TAINT.into(), effect: "NoSchedule".into(), ..Default::default() };
            n.spec.get_or_insert_default().taints.get_or_insert_default().push(taint);
        }
        let wanted = w.conditions.as_ref().map(|c| c.build(&w.node)).unwrap_or_default();
        let list = n.status.get_or_insert_default().conditions.get_or_insert_default();
        for c in wanted {
            list.retain(|x| x.type_ != c.type_);
            list.push(c);
        }
    }
    let maintenances = o
        .maintenances
        .iter()
        .zip(decisions)
        .map(|(m, d)| Arc::new(NodeMaintenance { status: d.status.clone(), ..(**m).clone() }))
        .collect();
    let nodes = o.nodes.iter().map(|n| Arc::new(nodes.remove(&n.name_any()).expect("a node"))).collect();
    Objects { nodes, maintenances, budgets: o.budgets.clone() }
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
    let o = objects();
    let pass = Arc::new(plan(&input));
    let at = Time(now);
    let read = AlertsRead::from(alerts.clone());
    let first = decide(&o, &pass, &read, &at);
    let decisions: Vec<MaintenanceDecision> = first.maintenances.into_iter().map(|(_, d)| d).collect();
    let evictions: usize = decisions.iter().map(|d| d.evictions.iter().count()).sum();
    assert!(evictions > 0 && decisions.iter().all(|d| d.status.is_some()), "every maintenance drains");
    let steady = settled(&o, &decisions);
    let again = decide(&steady, &pass, &read, &at);
    assert!(
        again.maintenances.iter().all(|(_, d)| d.node_writes.is_empty() && d.holds.is_empty()),
        "a settled cluster"
    );
    group.bench_function("decide_settled", |b| b.iter(|| decide(black_box(&steady), &pass, &read, &at)));
    group.bench_function("decide", |b| b.iter(|| decide(black_box(&o), &pass, &read, &at)));
    group.bench_function("decide_with_pass", |b| {
        b.iter(|| decide(black_box(&o), &Arc::new(plan(black_box(&input))), &read, &at))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
