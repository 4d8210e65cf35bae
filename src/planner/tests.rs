//! One test per planner rule of SPEC 4.3, through the public [`plan`] function.

use super::*;
use crate::api::{DrainPlanEntry, GateReason, PodType, default_plan};
use crate::planner::wait::Gates;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

pub(super) const D: PodType = PodType::Default;
pub(super) const DS: PodType = PodType::DaemonSet;
const ST: PodType = PodType::Static;

pub(super) fn e(t: PodType, p: i32) -> DrainPlanEntry {
    DrainPlanEntry::new(t, p)
}

fn sel(k: &str, v: &str) -> LabelSelector {
    LabelSelector { match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])), ..Default::default() }
}

fn es(t: PodType, p: i32, k: &str, v: &str) -> DrainPlanEntry {
    DrainPlanEntry { pod_selector: Some(sel(k, v)), ..e(t, p) }
}

pub(super) fn pod(name: &str, node: &str, t: PodType, priority: i32) -> PodView {
    PodView {
        namespace: "ns".into(),
        name: name.into(),
        uid: format!("uid-{name}").into(),
        node_name: node.into(),
        priority,
        pod_type: t,
        ..PodView::default()
    }
}

fn labelled(mut p: PodView, k: &str, v: &str) -> PodView {
    p.labels = p.labels.iter().chain([(k, v)]).collect();
    p
}

pub(super) fn maint(name: &str, created: i64, plan: &[DrainPlanEntry], nodes: &[&str]) -> MaintenanceInput {
    MaintenanceInput {
        name: name.into(),
        created,
        drain_plan: default_plan(plan),
        drain_plan_index: 0,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        wait_for_completion: None,
    }
}

fn floor(node: &str, reached: &[DrainPlanEntry]) -> NodeInput {
    NodeInput { name: node.into(), reached: reached.to_vec(), ..NodeInput::default() }
}

pub(super) fn input(maintenances: Vec<MaintenanceInput>, pods: Vec<PodView>) -> PlannerInput {
    PlannerInput { maintenances, pods, ..PlannerInput::default() }
}

fn targets(plan: &DrainDecision, node: &str) -> Vec<DrainPlanEntry> {
    plan.node(node).map(|n| n.drain_targets.clone()).unwrap_or_default()
}

pub(super) fn evicted(plan: &DrainDecision, node: &str) -> Vec<String> {
    plan.node(node).map(|n| n.evict.iter().map(|p| p.name.to_string()).collect()).unwrap_or_default()
}

pub(super) fn message(plan: &DrainDecision, node: &str) -> String {
    plan.node(node).map(|n| n.drain_message.clone()).unwrap_or_default()
}

pub(super) fn m_plan<'a>(plan: &'a DrainDecision, name: &str) -> &'a MaintenancePlan {
    static EMPTY: std::sync::OnceLock<MaintenancePlan> = std::sync::OnceLock::new();
    plan.maintenance(name).unwrap_or_else(|| EMPTY.get_or_init(MaintenancePlan::default))
}

#[test]
fn first_entry_is_targeted_and_only_matching_pods_are_evicted() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000)], &["one"])],
        vec![pod("low", "one", D, 100), pod("high", "one", D, 9000), pod("ds", "one", DS, 0)],
    ));
    assert_eq!(targets(&out, "one"), vec![e(D, 5000)]);
    assert_eq!(evicted(&out, "one"), vec!["low"]);
    assert_eq!(m_plan(&out, "a").drain_plan_index, 0);
    assert_eq!(message(&out, "one"), "Draining");
}

#[test]
fn cursor_advances_several_entries_in_one_pass_when_nothing_matches() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000), e(D, 15000)], &["one"])],
        vec![pod("p", "one", D, 1_500_000_000)],
    ));
    // Entries D5000, D15000 and D1000000000 have no pod: the cursor stops at D2000000000.
    assert_eq!(m_plan(&out, "a").drain_plan_index, 3);
    assert_eq!(targets(&out, "one"), vec![e(D, 2_000_000_000)]);
    assert_eq!(evicted(&out, "one"), vec!["p"]);
}

#[test]
fn cursor_never_moves_back_from_the_stored_index() {
    let mut m = maint("a", 0, &[e(D, 5000)], &["one"]);
    m.drain_plan_index = 2;
    let out = plan(&input(vec![m], vec![pod("p", "one", D, 1)]));
    assert_eq!(m_plan(&out, "a").drain_plan_index, 2);
    assert_eq!(targets(&out, "one"), vec![e(D, 2_000_000_000)]);
}

#[test]
fn stored_index_past_the_plan_is_clamped_to_its_last_entry() {
    let mut m = maint("a", 0, &[], &["one"]);
    m.drain_plan_index = 99;
    let out = plan(&input(vec![m], vec![]));
    assert_eq!(m_plan(&out, "a").drain_plan_index, 11);
}

#[test]
fn selector_entry_applies_only_to_its_own_group() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 1000), es(D, 2000, "app", "pg"), e(D, 3000)], &["one"])],
        vec![pod("plain", "one", D, 1500), labelled(pod("pg", "one", D, 1500), "app", "pg")],
    ));
    // Cursor 0 has pods? No pod <= 1000: advances to entry 1 (app=pg <= 2000).
    assert_eq!(m_plan(&out, "a").drain_plan_index, 1);
    assert_eq!(targets(&out, "one"), vec![e(D, 1000), es(D, 2000, "app", "pg")]);
    assert_eq!(evicted(&out, "one"), vec!["pg"]);
}

#[test]
fn node_targets_are_the_group_wise_minimum_of_overlapping_proposals() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000)], &["one", "two"]), maint("b", 1, &[e(D, 10000)], &["one", "three"])],
        vec![
            pod("p1", "one", D, 4000),
            pod("p1b", "one", D, 8000),
            pod("p2", "two", D, 1),
            pod("p3", "three", D, 8000),
        ],
    ));
    assert_eq!(targets(&out, "one"), vec![e(D, 5000)]);
    assert_eq!(targets(&out, "two"), vec![e(D, 5000)]);
    assert_eq!(targets(&out, "three"), vec![e(D, 10000)]);
    assert_eq!(evicted(&out, "one"), vec!["p1"]);
}

#[test]
fn missing_group_counts_at_the_other_sides_no_selector_level() {
    let mut a = maint("a", 0, &[e(D, 1000), es(D, 3000, "app", "pg")], &["one"]);
    a.drain_plan_index = 1;
    let out = plan(&input(
        vec![a, maint("b", 1, &[e(D, 2000)], &["one"])],
        vec![labelled(pod("pg", "one", D, 1800), "app", "pg")],
    ));
    // a is at entry 1 ({D1000, D3000 app=pg}), b at entry 0 ({D2000}): pg counts 2000 on b's side.
    assert_eq!(targets(&out, "one"), vec![e(D, 1000), es(D, 2000, "app", "pg")]);
}

#[test]
fn pod_type_not_reached_by_one_proposal_is_not_targeted() {
    let mut a = maint("a", 0, &[e(DS, 3000)], &["one"]);
    a.drain_plan_index = 4; // {D MAX, DS 3000}
    let out = plan(&input(
        vec![a, maint("b", 1, &[e(D, 15000)], &["one"])],
        vec![pod("d", "one", D, 9000), pod("ds", "one", DS, 1)],
    ));
    assert_eq!(targets(&out, "one"), vec![e(D, 15000)]);
    assert!(!out.node("one").is_some_and(|n| n.needs_daemonset_taint));
}

#[test]
fn node_targets_never_go_below_what_the_node_reached() {
    let mut inp =
        input(vec![maint("c", 0, &[e(D, 2000)], &["one"])], vec![pod("p", "one", D, 9000), pod("q", "one", D, 1500)]);
    inp.nodes = vec![floor("one", &[e(D, 10000)])];
    let out = plan(&inp);
    assert_eq!(m_plan(&out, "c").drain_plan_index, 0);
    assert_eq!(targets(&out, "one"), vec![e(D, 10000)]);
    assert_eq!(evicted(&out, "one"), vec!["q", "p"]);
}

#[test]
fn proposal_below_the_node_floor_is_reported_as_fast_forward() {
    let mut inp = input(
        vec![maint("c", 0, &[e(D, 2000)], &["one", "four"])],
        vec![pod("p", "one", D, 9000), pod("q", "four", D, 1)],
    );
    inp.nodes = vec![floor("one", &[e(D, 10000)])];
    let out = plan(&inp);
    assert_eq!(
        out.fast_forwards,
        vec![FastForward { maintenance: "c".into(), node: "one".into(), cause: FastForwardCause::NodeAlreadyReached }]
    );
    assert_eq!(m_plan(&out, "c").fast_forwarded_on, vec!["one".to_string()]);
}

#[test]
fn cursor_waits_while_its_pods_on_a_shared_node_are_held_back() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000)], &["one", "two"]), maint("b", 1, &[e(D, 10000)], &["one", "three"])],
        vec![pod("p1", "one", D, 8000), pod("p2", "two", D, 1)],
    ));
    // b's only pod (8000 on one) is held by a: b cannot advance; node three waits for a.
    assert_eq!(m_plan(&out, "b").drain_plan_index, 0);
    assert_eq!(message(&out, "three"), "Waiting for a.");
    assert_eq!(m_plan(&out, "b").drain_message, "Waiting for a.");
    assert_eq!(m_plan(&out, "b").reason, DrainReason::WaitingFor { maintenances: vec!["a".into()] });
    assert_eq!(m_plan(&out, "b").reason.held_back_by(), ["a"]);
}

#[test]
fn reached_drain_targets_are_the_least_powerful_node_targets() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000)], &["one", "two"]), maint("b", 1, &[e(D, 10000)], &["one", "three"])],
        vec![pod("p1", "one", D, 1), pod("p3", "three", D, 1)],
    ));
    assert_eq!(m_plan(&out, "b").reached_drain_targets, vec![e(D, 5000)]);
}

#[test]
fn draining_message_names_the_maintenances_holding_the_node_below_the_most_advanced_proposal() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000)], &["one"]), maint("b", 1, &[e(D, 10000)], &["one"])],
        vec![pod("p1", "one", D, 1)],
    ));
    assert_eq!(message(&out, "one"), "Draining (limited by a)");
    assert_eq!(m_plan(&out, "b").drain_message, "Draining (limited by a)");
    assert_eq!(m_plan(&out, "a").drain_message, "Draining");
    // The same as data (`review` reads this, not the message).
    assert_eq!(m_plan(&out, "b").reason, DrainReason::Draining { limited_by: vec!["a".into()] });
    assert!(m_plan(&out, "a").reason.held_back_by().is_empty());
}

#[test]
fn waiting_message_names_a_maintenance_still_draining_elsewhere() {
    let out = plan(&input(vec![maint("a", 0, &[e(D, 5000)], &["one", "two"])], vec![pod("p2", "two", D, 1)]));
    assert_eq!(message(&out, "one"), "Waiting for a.");
    assert_eq!(message(&out, "two"), "Draining");
}

#[test]
fn static_pods_are_reported_never_evicted_and_do_not_block_the_drain() {
    let mut m = maint("a", 0, &[], &["one"]);
    m.drain_plan_index = 11;
    let out = plan(&input(vec![m], vec![pod("etcd", "one", ST, 2_000_001_000)]));
    let node = out.node("one").cloned().unwrap_or_default();
    assert!(node.evict.is_empty());
    assert_eq!(node.blocked.len(), 1);
    assert_eq!(node.blocked[0].cause, BlockedCause::StaticPod);
    assert!(node.drained);
    assert!(m_plan(&out, "a").drained);
    assert_eq!(node.drain_message, DRAINED);
}

#[test]
fn daemonset_pods_are_evicted_only_once_the_node_is_tainted() {
    let mut inp = input(vec![maint("a", 0, &[e(DS, 3000)], &["one"])], vec![pod("ds", "one", DS, 1)]);
    let out = plan(&inp);
    let node = out.node("one").cloned().unwrap_or_default();
    assert!(node.needs_daemonset_taint);
    assert!(node.evict.is_empty());
    assert_eq!(node.pods_pending_eviction_request, 1);
    inp.nodes = vec![NodeInput { draining_taint: true, ..floor("one", &node.drain_targets) }];
    assert_eq!(evicted(&plan(&inp), "one"), vec!["ds"]);
}

#[test]
fn skip_daemonset_pods_neither_evicts_nor_waits_for_them() {
    let mut inp = input(vec![maint("a", 0, &[], &["one"])], vec![pod("ds", "one", DS, 1)]);
    inp.options.skip_daemonset_pods = true;
    let out = plan(&inp);
    let node = out.node("one").cloned().unwrap_or_default();
    assert!(node.evict.is_empty() && !node.needs_daemonset_taint && node.drained);
    assert!(m_plan(&out, "a").drained);
}

#[test]
fn daemonset_pod_tolerating_the_draining_taint_is_reported_not_evicted() {
    let mut ds = pod("ds", "one", DS, 1);
    ds.tolerates_draining_taint = true;
    let mut inp = input(vec![maint("a", 0, &[], &["one"])], vec![ds]);
    inp.nodes = vec![NodeInput { draining_taint: true, ..floor("one", &[]) }];
    let node = plan(&inp).node("one").cloned().unwrap_or_default();
    assert!(node.evict.is_empty());
    assert_eq!(node.blocked.first().map(|b| b.cause), Some(BlockedCause::ToleratesDrainingTaint));
}

#[test]
fn succeeded_and_failed_pods_are_neither_counted_nor_evicted() {
    let mut done = pod("done", "one", D, 1);
    done.terminal = true;
    let out = plan(&input(vec![maint("a", 0, &[e(D, 5000)], &["one"])], vec![done]));
    let node = out.node("one").cloned().unwrap_or_default();
    assert!(node.evict.is_empty() && node.drained && node.pods_pending_eviction_request == 0);
}

#[test]
fn accepted_evictions_count_as_active_hold_the_cursor_and_are_not_evicted_again() {
    let mut going = pod("going", "one", D, 1);
    going.eviction_in_progress = true;
    let out = plan(&input(vec![maint("a", 0, &[e(D, 5000)], &["one"])], vec![going, pod("new", "one", D, 2)]));
    let node = out.node("one").cloned().unwrap_or_default();
    assert_eq!((node.active_eviction_requests, node.pods_pending_eviction_request), (1, 1));
    assert_eq!(evicted(&out, "one"), vec!["new"]);
    assert_eq!(m_plan(&out, "a").drain_plan_index, 0);
    assert_eq!((m_plan(&out, "a").active_eviction_requests, m_plan(&out, "a").pods_pending_eviction_request), (1, 1));
}

#[test]
fn drained_only_when_no_responsible_pod_remains_on_any_node() {
    let out = plan(&input(vec![maint("a", 0, &[], &["one", "two"])], vec![pod("p", "two", D, 1)]));
    assert!(out.node("one").is_some_and(|n| n.drained));
    assert!(!m_plan(&out, "a").drained);
    let out = plan(&input(vec![maint("a", 0, &[], &["one", "two"])], vec![]));
    assert!(m_plan(&out, "a").drained);
    assert_eq!(m_plan(&out, "a").drain_message, DRAINED);
}

#[test]
fn pods_on_nodes_no_maintenance_selects_are_ignored() {
    let out = plan(&input(vec![maint("a", 0, &[], &["one"])], vec![pod("p", "elsewhere", D, 1)]));
    assert!(out.node("elsewhere").is_none());
    assert!(m_plan(&out, "a").drained);
}

#[test]
fn evictions_are_ordered_lowest_priority_first() {
    let out = plan(&input(
        vec![maint("a", 0, &[e(D, 5000)], &["one"])],
        vec![pod("b", "one", D, 300), pod("a", "one", D, 200), pod("c", "one", D, 100)],
    ));
    assert_eq!(evicted(&out, "one"), vec!["c", "a", "b"]);
}

#[test]
fn conflicting_selector_plans_standstill_is_broken_for_the_oldest_maintenance() {
    // m: plain <=5 before app=pg <=20; l: plain <=3, then app=pg <=10, so l puts y before x.
    let m = maint("m", 0, &[e(D, 5), es(D, 20, "app", "pg")], &["n"]);
    let mut l = maint("l", 1, &[e(D, 3), es(D, 10, "app", "pg")], &["n"]);
    l.drain_plan_index = 1;
    let out = plan(&input(vec![m, l], vec![pod("x", "n", D, 4), labelled(pod("y", "n", D, 7), "app", "pg")]));
    // Without the tie-break the node would target neither pod; m is older and wins.
    assert_eq!(evicted(&out, "n"), vec!["x"]);
    assert_eq!(
        out.fast_forwards,
        vec![FastForward { maintenance: "l".into(), node: "n".into(), cause: FastForwardCause::ConflictingPlans }]
    );
}

#[test]
fn invalid_selector_warns_and_its_entries_match_no_pod() {
    let mut bad = sel("app", "pg");
    bad.match_expressions = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
        key: "tier".into(),
        operator: "Near".into(),
        values: None,
    }]);
    let entry = DrainPlanEntry { pod_selector: Some(bad), ..e(D, 5000) };
    let out = plan(&input(vec![maint("a", 0, &[entry], &["one"])], vec![labelled(pod("p", "one", D, 1), "app", "pg")]));
    assert_eq!(out.warnings.len(), 1);
    // The pod is taken by the next plain entry instead.
    assert_eq!(m_plan(&out, "a").drain_plan_index, 1);
}

#[test]
fn empty_plan_takes_no_part_in_combining_and_warns() {
    let mut empty = maint("e", 0, &[], &["one"]);
    empty.drain_plan.clear();
    let out = plan(&input(vec![empty, maint("a", 1, &[e(D, 5000)], &["one"])], vec![pod("p", "one", D, 1)]));
    assert_eq!(targets(&out, "one"), vec![e(D, 5000)]);
    assert_eq!(out.warnings.len(), 1);
}

#[test]
fn output_order_is_deterministic() {
    let a = maint("a", 0, &[es(D, 5000, "z", "1"), es(D, 5000, "a", "1")], &["two", "one", "one"]);
    let out = plan(&input(vec![a], vec![]));
    assert_eq!(out.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), vec!["one", "two"]);
    let t = targets(&out, "one");
    assert_eq!(t.first(), Some(&e(D, i32::MAX)));
    assert_eq!(t.get(1).and_then(|e| e.pod_selector.clone()), Some(sel("a", "1")));
}

/// A cluster of `nodes` nodes with 20 pods each and 10 maintenances that all select every
/// node, with user entries (one with a podSelector) and pods of every type and many
/// priorities.
fn cluster(nodes: usize) -> PlannerInput {
    let names: Vec<String> = (0..nodes).map(|n| format!("node-{n}")).collect();
    let node_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let maintenances: Vec<MaintenanceInput> = (0..10)
        .map(|i| {
            let user = [e(D, 1000 * (i + 1)), es(D, 5000 + i, "app", "pg"), e(DS, 3000)];
            maint(&format!("m{i}"), i64::from(i), &user, &node_refs)
        })
        .collect();
    let pods: Vec<PodView> = (0..nodes * 20)
        .map(|i| {
            let t = match i % 10 {
                0 => DS,
                1 => ST,
                _ => D,
            };
            let p = pod(&format!("p{i}"), &names[i % nodes], t, ((i * 7919) % 20_000) as i32);
            if i % 3 == 0 { labelled(p, "app", "pg") } else { p }
        })
        .collect();
    input(maintenances, pods)
}

/// Linearity without a time limit: the same cluster at 500 and at 5,000 nodes (10,000 and
/// 100,000 pods, 10 maintenances selecting every node), planned alternately in one run,
/// best of several each (on a shared machine noise only ever adds time), and the ratio of
/// the two bounded. Ten times the input takes about ten times as long when the pass is
/// linear (and ~12 when it is n log n); a step quadratic in pods, nodes or pods per
/// maintenance makes it ~100. The bound, 30, is generous for noise and cache effects and
/// still far from quadratic. Absolute times are for `cargo bench --bench planner`.
#[test]
fn large_cluster_is_planned_in_one_linear_pass() {
    let (small, large) = (cluster(500), cluster(5_000));
    let best = |inp: &PlannerInput, best: &mut std::time::Duration| {
        let started = std::time::Instant::now();
        let out = plan(inp);
        *best = (*best).min(started.elapsed());
        out
    };
    let (mut best_small, mut best_large) = (std::time::Duration::MAX, std::time::Duration::MAX);
    let mut out = DrainDecision::default();
    for _ in 0..3 {
        for _ in 0..2 {
            best(&small, &mut best_small);
        }
        out = best(&large, &mut best_large);
    }
    let ratio = best_large.as_secs_f64() / best_small.as_secs_f64();
    eprintln!("planned 10x the cluster in {ratio:.1}x the time ({best_small:?} and {best_large:?}, best of 6 and 3)");
    assert_eq!(out.nodes.len(), 5000);
    assert!(ratio < 30.0, "10x the cluster took {ratio:.1}x as long: not linear");
}

#[test]
fn a_gated_node_starts_no_eviction_takes_no_slot_and_says_why() {
    let gates = Gates::default().with_paused("a");
    let mut inp = input(
        vec![maint("a", 0, &[], &["one", "two"])],
        vec![pod("p1", "one", D, 1), pod("p2", "two", D, 1), pod("ds", "one", DS, 1)],
    );
    inp.options.max_draining_nodes = Some(1);
    inp.nodes = vec![NodeInput { gated: Some(gates.clone()), ..floor("one", &[]) }];
    let out = plan(&inp);
    let one = out.node("one").cloned().unwrap_or_default();
    assert!(one.evict.is_empty() && !one.needs_daemonset_taint && !one.drained && one.waiting_for_gate);
    assert_eq!(one.drain_message, "Paused (spec.paused of NodeMaintenance a).");
    assert_eq!(one.pods_pending_eviction_request, 1, "its pods are still pending");
    assert_eq!(evicted(&out, "two"), ["p2"], "the gated node takes no drain slot");
    inp.nodes.clear();
    inp.maintenances[0].nodes = vec!["one".into()];
    inp.nodes = vec![NodeInput { gated: Some(gates.clone()), ..floor("one", &[]) }];
    let out = plan(&inp);
    assert_eq!(m_plan(&out, "a").reason, DrainReason::Gated(gates));
}

#[test]
fn a_node_whose_drain_may_not_start_is_not_drained_even_with_nothing_to_evict() {
    let gates = Gates::closed("nights", GateReason::OutsideMaintenanceWindow, "Waiting for the window of nights");
    let mut inp = input(vec![maint("a", 0, &[], &["one"])], vec![]);
    inp.nodes = vec![NodeInput { gated: Some(gates.clone()), ..floor("one", &[]) }];
    let out = plan(&inp);
    let one = out.node("one").cloned().unwrap_or_default();
    assert!(!one.drained && one.waiting_for_gate, "behind a closed gate: not Drained");
    assert_eq!(one.drain_message, "Waiting for the window of nights.");
    assert_eq!(m_plan(&out, "a").reason, DrainReason::Gated(gates.clone()));
    // Started before the gate closed: only a pause would hold it, and this is no pause.
    inp.nodes[0].drain_start = Some("2026-11-26T10:00:00Z".parse().unwrap());
    let out = plan(&inp);
    assert!(out.node("one").is_some_and(|n| n.drained && !n.waiting_for_gate));
    // The gate opens: Drained at once.
    inp.nodes = vec![floor("one", &[])];
    assert!(plan(&inp).node("one").is_some_and(|n| n.drained));
}
