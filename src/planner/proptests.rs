//! Property tests of the planner over random plans, pods, overlapping maintenances and node
//! budgets (SPEC 4.3), some maintenances waiting for their Jobs' pods to finish (SPEC 4.6):
//! drain order, targets never going backwards, drain slots never exceeded, pods left to
//! finish never evicted, and termination.
//!
//! Each case replays a drain: every pass feeds the planner's cursors, node targets and taints
//! back as the stored state; evicted pods linger one pass (eviction in progress) and are then
//! gone; pods reported left to finish finish by the next pass. Pods only ever disappear.

use super::*;
use crate::api::{DrainPlanEntry, PodType, default_plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const NODES: usize = 5;
const LABELS: [(&str, &str); 3] = [("app", "a"), ("app", "b"), ("tier", "x")];
const PRIORITIES: [i32; 10] = [-5, 0, 100, 1000, 5000, 7000, 1_000_000_000, 1_500_000_000, 2_000_000_500, i32::MAX];

fn pod_type() -> impl Strategy<Value = PodType> {
    prop_oneof![4 => Just(PodType::Default), 2 => Just(PodType::DaemonSet), 1 => Just(PodType::Static)]
}

fn priority() -> impl Strategy<Value = i32> {
    prop_oneof![3 => prop::sample::select(PRIORITIES.to_vec()), 1 => -10i32..8000]
}

fn selector(k: &str, v: &str) -> LabelSelector {
    LabelSelector { match_labels: Some(BTreeMap::from([(k.to_string(), v.to_string())])), ..Default::default() }
}

fn entry(with_selectors: bool) -> impl Strategy<Value = DrainPlanEntry> {
    let sel = if with_selectors { prop::option::weighted(0.4, 0..LABELS.len()).boxed() } else { Just(None).boxed() };
    (pod_type(), priority(), sel).prop_map(|(t, p, s)| DrainPlanEntry {
        pod_selector: s.map(|i| selector(LABELS[i].0, LABELS[i].1)),
        ..DrainPlanEntry::new(t, p)
    })
}

/// A user plan after admission: deduplicated, defaulted, canonical.
fn user_plan(with_selectors: bool) -> impl Strategy<Value = Vec<DrainPlanEntry>> {
    prop::collection::vec(entry(with_selectors), 0..5).prop_map(|mut v| {
        let mut unique: Vec<DrainPlanEntry> = Vec::new();
        v.retain(|e| {
            let new = !unique.contains(e);
            unique.push(e.clone());
            new
        });
        default_plan(&v)
    })
}

fn maintenances(with_selectors: bool) -> impl Strategy<Value = Vec<MaintenanceInput>> {
    let one = (user_plan(with_selectors), prop::collection::btree_set(0..NODES, 1..=3), prop::bool::weighted(0.3));
    prop::collection::vec(one, 1..4).prop_map(|ms| {
        ms.into_iter()
            .enumerate()
            .map(|(i, (drain_plan, nodes, waits))| MaintenanceInput {
                name: format!("m{i}"),
                created: i as i64,
                drain_plan,
                drain_plan_index: 0,
                nodes: nodes.into_iter().map(|n| format!("n{n}")).collect(),
                wait_for_completion: waits.then(CompletionWait::default),
            })
            .collect()
    })
}

fn pods() -> impl Strategy<Value = Vec<PodView>> {
    let one = (
        0..=NODES,
        pod_type(),
        priority(),
        prop::collection::btree_set(0..LABELS.len(), 0..3),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.2),
    );
    prop::collection::vec(one, 0..30).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (node, pod_type, priority, labels, tolerates, terminal, job))| PodView {
                namespace: "ns".into(),
                name: format!("p{i}").into(),
                uid: format!("u{i}").into(),
                node_name: format!("n{node}").into(),
                priority,
                pod_type,
                // One value per key: the later pair wins, as in real labels.
                labels: labels.into_iter().map(|l| (LABELS[l].0.to_string(), LABELS[l].1.to_string())).collect(),
                eviction_in_progress: false,
                terminal,
                tolerates_draining_taint: tolerates,
                owned_by_job: job,
                ..PodView::default()
            })
            .collect()
    })
}

/// Independent oracle: the first plan entry matching a pod directly.
fn first_entry(plan: &[DrainPlanEntry], p: &PodView) -> Option<usize> {
    plan.iter().position(|e| {
        e.pod_type == p.pod_type
            && p.priority <= e.pod_priority
            && e.pod_selector
                .as_ref()
                .is_none_or(|s| s.match_labels.iter().flatten().all(|(k, v)| p.labels.get(k) == Some(v)))
    })
}

/// Independent oracle: the controller evicts and waits for this pod.
fn responsible(p: &PodView, skip_ds: bool) -> bool {
    !p.terminal
        && match p.pod_type {
            PodType::Static => false,
            PodType::DaemonSet => !skip_ds && !p.tolerates_draining_taint,
            PodType::Default => true,
        }
}

/// Independent oracle: the pod is left to finish (a Job's pod the controller is responsible
/// for, on a node of a maintenance with `waitForCompletion` and no timeout).
fn waited(p: &PodView, skip_ds: bool, ms: &[MaintenanceInput]) -> bool {
    responsible(p, skip_ds)
        && p.owned_by_job
        && ms.iter().any(|m| m.wait_for_completion.is_some() && m.nodes.iter().any(|n| **n == *p.node_name))
}

/// The cap is never exceeded: the nodes that evict or have evictions in progress (and do
/// not wait for a slot) number at most `max_draining_nodes`. Evictions start only within
/// the cap and it does not change during a replay, so nodes keeping their slot never push
/// the count over.
fn check_slots(out: &DrainDecision, cap: Option<u32>) -> Result<(), TestCaseError> {
    let draining: BTreeSet<&str> = out
        .nodes
        .iter()
        .filter(|n| !n.waiting_for_slot && (n.pods_pending_eviction_request > 0 || n.active_eviction_requests > 0))
        .map(|n| n.name.as_str())
        .collect();
    for n in &out.nodes {
        prop_assert!(!n.waiting_for_slot || n.evict.is_empty(), "node {} evicts while waiting for a slot", n.name);
    }
    if let Some(cap) = cap {
        prop_assert!(draining.len() <= cap as usize, "{} nodes drain, cap {cap}", draining.len());
    }
    Ok(())
}

/// Replays a drain to the end, checking the invariants on every pass.
fn replay(
    maintenances: Vec<MaintenanceInput>,
    mut pods: Vec<PodView>,
    options: PlannerOptions,
    no_selectors: bool,
) -> Result<(), TestCaseError> {
    let skip_ds = options.skip_daemonset_pods;
    let mut ms = maintenances;
    let mut nodes: BTreeMap<String, NodeInput> = BTreeMap::new();
    let limit = pods.len() * 3 + 40;
    // Nodes where a standstill between conflicting plans was broken: the only way a node can
    // get above the minimum of its proposals when all maintenances exist from the start.
    let mut conflict_nodes: BTreeSet<String> = BTreeSet::new();
    for _ in 0..limit {
        let input = PlannerInput {
            maintenances: ms.clone(),
            pods: pods.clone(),
            nodes: nodes.values().cloned().collect(),
            options,
            ..PlannerInput::default()
        };
        let out = plan(&input);
        check_slots(&out, options.max_draining_nodes)?;
        if no_selectors {
            prop_assert!(out.fast_forwards.is_empty(), "fast-forward without selectors: {:?}", out.fast_forwards);
        }
        for f in &out.fast_forwards {
            if f.cause == FastForwardCause::ConflictingPlans {
                conflict_nodes.insert(f.node.clone());
            }
        }
        for f in &out.fast_forwards {
            prop_assert!(conflict_nodes.contains(&f.node), "fast-forward without a conflict: {:?}", f);
        }
        let flagged: BTreeSet<(&str, &str)> =
            out.fast_forwards.iter().map(|f| (f.maintenance.as_str(), f.node.as_str())).collect();

        // Cursors never move back.
        for (m, mp) in ms.iter().zip(&out.maintenances) {
            prop_assert!(mp.drain_plan_index >= m.drain_plan_index, "cursor of {} moved back", m.name);
        }
        // Node targets never move backwards.
        for n in &out.nodes {
            for f in nodes.get(&n.name).map(|s| s.reached.as_slice()).unwrap_or_default() {
                let kept = n.drain_targets.iter().any(|t| {
                    t.pod_type == f.pod_type && t.pod_selector == f.pod_selector && t.pod_priority >= f.pod_priority
                });
                prop_assert!(kept, "node {} went back from {:?} to {:?}", n.name, f, n.drain_targets);
            }
        }
        // No pod is evicted before every lower entry of each maintenance selecting its node is done.
        for n in &out.nodes {
            for ev in &n.evict {
                let Some(p) = pods.iter().find(|p| p.uid == ev.uid) else {
                    return Err(TestCaseError::fail(format!("evicting unknown pod {ev:?}")));
                };
                prop_assert!(responsible(p, skip_ds) && !p.eviction_in_progress);
                prop_assert!(!waited(p, skip_ds, &ms), "{} is left to finish, not evicted", p.name);
                for (m, mp) in ms.iter().zip(&out.maintenances) {
                    if !m.nodes.contains(&n.name) || flagged.contains(&(m.name.as_str(), n.name.as_str())) {
                        continue;
                    }
                    let k = first_entry(&m.drain_plan, p);
                    prop_assert!(
                        k.is_some_and(|k| k as i32 <= mp.drain_plan_index),
                        "{} not yet in {}'s plan",
                        p.name,
                        m.name
                    );
                    let earlier = pods.iter().find(|q| {
                        responsible(q, skip_ds)
                            && !waited(q, skip_ds, &ms)
                            && m.nodes.iter().any(|n| **n == *q.node_name)
                            && first_entry(&m.drain_plan, q).is_some_and(|kq| Some(kq) < k)
                    });
                    prop_assert!(earlier.is_none(), "{} evicted before {:?} of {}", p.name, earlier, m.name);
                }
            }
        }

        if out.maintenances.iter().all(|m| m.drained) {
            let left = pods
                .iter()
                .filter(|p| responsible(p, skip_ds) && ms.iter().any(|m| m.nodes.iter().any(|n| **n == *p.node_name)));
            prop_assert_eq!(left.count(), 0, "drained while responsible pods remain");
            return Ok(());
        }

        // Evictions in progress finish; new evictions start; pods left to finish finish.
        pods.retain(|p| !p.eviction_in_progress);
        let evicted: BTreeSet<&str> = out.nodes.iter().flat_map(|n| n.evict.iter().map(|p| &*p.uid)).collect();
        let finishing: BTreeSet<&str> =
            out.nodes.iter().flat_map(|n| n.waiting_for_completion.iter().map(|p| &*p.uid)).collect();
        for p in &mut pods {
            p.eviction_in_progress |= evicted.contains(&*p.uid);
            p.terminal |= finishing.contains(&*p.uid);
        }
        for (m, mp) in ms.iter_mut().zip(&out.maintenances) {
            m.drain_plan_index = mp.drain_plan_index;
        }
        for n in &out.nodes {
            let stored = nodes.entry(n.name.clone()).or_default();
            stored.name = n.name.clone();
            stored.reached = n.drain_targets.clone();
            stored.draining_taint |= n.needs_daemonset_taint;
        }
    }
    Err(TestCaseError::fail("the drain did not finish"))
}

/// `--skip-daemonset-pods` either way; `--max-draining-nodes` mostly unset, else 1 or 2.
fn options() -> impl Strategy<Value = PlannerOptions> {
    let cap = prop_oneof![2 => Just(None), 1 => Just(Some(1u32)), 1 => Just(Some(2u32))];
    (any::<bool>(), cap).prop_map(|(skip_daemonset_pods, max_draining_nodes)| PlannerOptions {
        skip_daemonset_pods,
        max_draining_nodes,
        ..PlannerOptions::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn drain_follows_every_plan_never_goes_back_and_finishes_with_selector_free_plans(
        ms in maintenances(false), pods in pods(), options in options()
    ) {
        replay(ms, pods, options, true)?;
    }

    #[test]
    fn drain_follows_every_plan_never_goes_back_and_finishes_with_selector_plans(
        ms in maintenances(true), pods in pods(), options in options()
    ) {
        replay(ms, pods, options, false)?;
    }
}
