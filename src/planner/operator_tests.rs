//! The drain policies through the public [`plan`] function: drain slots
//! (`--max-draining-nodes`), opt-out annotations, and unmanaged and emptyDir pods.

use super::tests::{D, DS, e, evicted, input, m_plan, maint, message, pod};
use super::*;

fn capped(maintenances: Vec<MaintenanceInput>, pods: Vec<PodView>, cap: u32) -> PlannerInput {
    let mut i = input(maintenances, pods);
    i.options.max_draining_nodes = Some(cap);
    i
}

fn three_nodes() -> Vec<PodView> {
    vec![pod("a1", "one", D, 1), pod("b1", "two", D, 1), pod("c1", "three", D, 1)]
}

#[test]
fn the_cap_lets_that_many_nodes_drain_in_name_order() {
    let m = maint("m", 0, &[], &["one", "two", "three"]);
    let out = plan(&capped(vec![m], three_nodes(), 1));
    assert_eq!(evicted(&out, "one"), vec!["a1"]);
    assert!(evicted(&out, "three").is_empty() && evicted(&out, "two").is_empty());
    assert_eq!(message(&out, "two"), "Waiting for a drain slot (--max-draining-nodes: 1 of 1 nodes draining).");
    assert!(out.node("two").is_some_and(|n| n.waiting_for_slot && n.pods_pending_eviction_request == 1));
    assert_eq!(m_plan(&out, "m").drain_message, "Draining");
    assert_eq!(m_plan(&out, "m").pods_pending_eviction_request, 3, "waiting pods are still pending");
}

#[test]
fn a_node_with_evictions_in_progress_keeps_its_slot() {
    let m = maint("m", 0, &[], &["one", "two", "three"]);
    let mut pods = three_nodes();
    pods[2].eviction_in_progress = true;
    // Two slots: "three" keeps one, "one" takes the other.
    let out = plan(&capped(vec![m], pods, 2));
    assert_eq!(evicted(&out, "one"), vec!["a1"]);
    assert!(out.node("three").is_some_and(|n| !n.waiting_for_slot && n.active_eviction_requests == 1));
    assert!(out.node("two").is_some_and(|n| n.waiting_for_slot));
}

#[test]
fn a_node_with_nothing_targeted_needs_no_slot() {
    // "one" has only a high-priority pod the cursor has not reached; it must not keep "two"
    // from draining the entry the cursor waits for.
    let m = maint("m", 0, &[e(D, 10)], &["one", "two"]);
    let out = plan(&capped(vec![m], vec![pod("high", "one", D, 5000), pod("low", "two", D, 1)], 1));
    assert_eq!(evicted(&out, "two"), vec!["low"]);
    assert_eq!(message(&out, "one"), "Waiting for m.");
}

#[test]
fn the_cap_counts_nodes_over_every_maintenance() {
    let a = maint("a", 0, &[], &["one", "two"]);
    let b = maint("b", 1, &[], &["three"]);
    // Name order over both maintenances: "one" (a) and "three" (b) take the two slots.
    let out = plan(&capped(vec![a, b], three_nodes(), 2));
    assert_eq!(evicted(&out, "one"), vec!["a1"]);
    assert_eq!(evicted(&out, "three"), vec!["c1"]);
    assert_eq!(message(&out, "two"), "Waiting for a drain slot (--max-draining-nodes: 2 of 2 nodes draining).");
}

#[test]
fn a_waiting_node_is_not_tainted_for_its_daemonset_pods() {
    let mut m = maint("m", 0, &[], &["one", "two"]);
    m.drain_plan_index = 4;
    let out = plan(&capped(vec![m], vec![pod("d1", "one", DS, 1), pod("d2", "two", DS, 1)], 1));
    assert!(out.node("one").is_some_and(|n| n.needs_daemonset_taint));
    assert!(out.node("two").is_some_and(|n| !n.needs_daemonset_taint && n.waiting_for_slot));
}

#[test]
fn opted_out_pods_are_reported_hold_the_drain_and_never_hold_the_cursor() {
    let mut keep = pod("keep", "one", D, 1);
    keep.opted_out = true;
    let out = plan(&input(vec![maint("m", 0, &[e(D, 10)], &["one"])], vec![keep, pod("high", "one", D, 5000)]));
    assert_eq!(evicted(&out, "one"), vec!["high"], "the plan goes on around the opted-out pod");
    let node = out.node("one").unwrap();
    assert_eq!(
        node.blocked.iter().map(|b| (&*b.pod.name, b.cause)).collect::<Vec<_>>(),
        [("keep", BlockedCause::OptedOut)]
    );
    assert!(!node.drained);

    let mut keep = pod("keep", "one", D, 1);
    keep.opted_out = true;
    let out = plan(&input(vec![maint("m", 0, &[], &["one"])], vec![keep]));
    assert_eq!(message(&out, "one"), BLOCKED);
    assert_eq!(m_plan(&out, "m").drain_message, BLOCKED);
    assert!(!m_plan(&out, "m").drained);
    assert_eq!(blocked_summary(&out.node("one").unwrap().blocked, 5).as_deref(), Some("opted out: ns/keep"));
}

#[test]
fn unmanaged_and_emptydir_pods_are_evicted_and_reported_or_blocked_by_option() {
    let mut bare = pod("bare", "one", D, 1);
    bare.unmanaged = true;
    let mut scratch = pod("scratch", "one", D, 1);
    scratch.emptydir = true;
    let pods = vec![bare, scratch];
    let m = || maint("m", 0, &[], &["one"]);

    let out = plan(&input(vec![m()], pods.clone()));
    assert_eq!(evicted(&out, "one"), vec!["bare", "scratch"]);
    let risks: Vec<_> = out.node("one").unwrap().at_risk.iter().map(|r| (&*r.pod.name, r.risk)).collect();
    assert_eq!(risks, [("bare", EvictionRisk::Unmanaged), ("scratch", EvictionRisk::EmptyDir)]);

    let mut blocking = input(vec![m()], pods);
    blocking.options.unmanaged_pods = PodPolicy::Block;
    blocking.options.emptydir_pods = PodPolicy::Block;
    let out = plan(&blocking);
    let node = out.node("one").unwrap();
    assert!(node.evict.is_empty() && node.at_risk.is_empty() && !node.drained);
    let causes: Vec<_> = node.blocked.iter().map(|b| b.cause).collect();
    assert_eq!(causes, [BlockedCause::Unmanaged, BlockedCause::EmptyDir]);
}

#[test]
fn daemonset_pods_are_never_unmanaged() {
    let mut ds = pod("ds", "one", DS, 1);
    ds.unmanaged = true;
    let mut m = maint("m", 0, &[], &["one"]);
    m.drain_plan_index = 4;
    let mut blocking = input(vec![m], vec![ds]);
    blocking.options.unmanaged_pods = PodPolicy::Block;
    blocking.nodes = vec![NodeInput { name: "one".into(), draining_taint: true, ..NodeInput::default() }];
    let out = plan(&blocking);
    assert_eq!(evicted(&out, "one"), vec!["ds"]);
    assert!(out.node("one").unwrap().at_risk.is_empty());
}
