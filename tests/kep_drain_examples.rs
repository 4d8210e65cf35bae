//! The two worked examples of KEP-4212 "Pod Selection and DrainTargets Example", replayed
//! through the drain planner (SPEC 4.3: "the two worked-example tests are required").
//!
//! Pods are made up so that the KEP's states arise; draining a node is simulated by removing
//! its pods. Every pass feeds the planner's cursors and node targets back as the stored
//! state of the next pass, as the controller does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use node_maintenance::api::{DrainPlanEntry, PodType, default_plan};
use node_maintenance::planner::{
    DrainDecision, FastForward, FastForwardCause, MaintenanceInput, NodeInput, PlannerInput, PodView, plan,
};
use std::collections::BTreeMap;

const D: PodType = PodType::Default;
const DS: PodType = PodType::DaemonSet;
const ST: PodType = PodType::Static;

fn e(t: PodType, p: i32) -> DrainPlanEntry {
    DrainPlanEntry::new(t, p)
}

fn postgres() -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("app".to_string(), "postgres".to_string())])),
        ..Default::default()
    }
}

fn pg(t: PodType, p: i32) -> DrainPlanEntry {
    DrainPlanEntry { pod_selector: Some(postgres()), ..e(t, p) }
}

fn pod(name: &str, node: &str, t: PodType, priority: i32) -> PodView {
    PodView {
        namespace: "default".into(),
        name: name.into(),
        uid: format!("uid-{name}").into(),
        node_name: node.into(),
        priority,
        pod_type: t,
        ..PodView::default()
    }
}

fn pg_pod(name: &str, node: &str, priority: i32) -> PodView {
    let mut p = pod(name, node, D, priority);
    p.labels = [("app", "postgres")].into_iter().collect();
    p
}

/// The cluster as the controller would see it between passes.
#[derive(Default)]
struct World {
    maintenances: Vec<MaintenanceInput>,
    pods: Vec<PodView>,
    nodes: BTreeMap<String, NodeInput>,
}

impl World {
    fn add(&mut self, name: &str, created: i64, user_plan: &[DrainPlanEntry], nodes: &[&str]) {
        self.maintenances.push(MaintenanceInput {
            name: name.into(),
            created,
            drain_plan: default_plan(user_plan),
            drain_plan_index: 0,
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            wait_for_completion: None,
        });
    }

    /// Runs one pass and persists its cursors, node targets and taints.
    fn pass(&mut self) -> DrainDecision {
        let input = PlannerInput {
            maintenances: self.maintenances.clone(),
            pods: self.pods.clone(),
            nodes: self.nodes.values().cloned().collect(),
            ..PlannerInput::default()
        };
        let out = plan(&input);
        for m in &mut self.maintenances {
            if let Some(p) = out.maintenance(&m.name) {
                m.drain_plan_index = p.drain_plan_index;
            }
        }
        for n in &out.nodes {
            let stored = self.nodes.entry(n.name.clone()).or_default();
            stored.name = n.name.clone();
            stored.reached = n.drain_targets.clone();
            stored.draining_taint |= n.needs_daemonset_taint;
        }
        out
    }

    /// Removes the pods for which `gone` holds (they were drained).
    fn drain(&mut self, gone: impl Fn(&PodView) -> bool) {
        self.pods.retain(|p| !gone(p));
    }

    /// Removes the pods the plan evicts.
    fn evict(&mut self, out: &DrainDecision) {
        let evicted: Vec<_> = out.nodes.iter().flat_map(|n| n.evict.iter().map(|p| p.uid.clone())).collect();
        self.pods.retain(|p| !evicted.contains(&p.uid));
    }
}

#[track_caller]
fn node(out: &DrainDecision, name: &str, targets: &[DrainPlanEntry], message: &str) {
    let n = out.node(name).unwrap_or_else(|| panic!("node {name} missing from the plan"));
    assert_eq!(n.drain_targets, targets, "drainTargets of node {name}");
    assert_eq!(n.drain_message, message, "drainMessage of node {name}");
}

#[track_caller]
fn maintenance(out: &DrainDecision, name: &str, reached: &[DrainPlanEntry], message: &str) {
    let m = out.maintenance(name).unwrap_or_else(|| panic!("maintenance {name} missing from the plan"));
    assert_eq!(m.reached_drain_targets, reached, "reachedDrainTargets of {name}");
    assert_eq!(m.drain_message, message, "drainMessage of {name}");
}

/// Pods for the first example: on each node some pods at each step of the plans.
fn example_pods() -> Vec<PodView> {
    let spec: &[(&str, &[i32])] = &[
        ("one", &[3000, 4000, 8000, 9000, 12000, 20000]),
        ("two", &[1000, 4000, 12000, 20000]),
        ("three", &[6000, 9000, 20000]),
        ("four", &[1000, 20000]),
    ];
    spec.iter().flat_map(|(n, prios)| prios.iter().map(move |p| pod(&format!("{n}-{p}"), n, D, *p))).collect()
}

#[test]
fn kep_pod_selection_and_drain_targets_example() {
    let mut w = World { pods: example_pods(), ..World::default() };
    w.add("maintenance-a", 1, &[e(D, 5000), e(D, 15000), e(DS, 3000)], &["one", "two"]);
    w.add("maintenance-b", 2, &[e(D, 10000), e(D, 15000), e(DS, 4000)], &["one", "three"]);

    // State 1: both maintenances start.
    let out = w.pass();
    maintenance(&out, "maintenance-a", &[e(D, 5000)], "Draining");
    maintenance(&out, "maintenance-b", &[e(D, 5000)], "Draining (limited by maintenance-a)");
    // Erratum (SPEC 4.3): the KEP shows plain "Draining" for node one here, but maintenance-a
    // holds node one below maintenance-b's proposal, so the rule says "limited by".
    node(&out, "one", &[e(D, 5000)], "Draining (limited by maintenance-a)");
    node(&out, "two", &[e(D, 5000)], "Draining");
    node(&out, "three", &[e(D, 10000)], "Draining");
    assert!(out.fast_forwards.is_empty());

    // State 2: node three drained; it waits for node one, held by maintenance-a.
    w.drain(|p| &*p.node_name == "three" && p.priority <= 10000);
    let out = w.pass();
    maintenance(&out, "maintenance-b", &[e(D, 5000)], "Draining (limited by maintenance-a)");
    node(&out, "three", &[e(D, 10000)], "Waiting for maintenance-a.");

    // State 3: node one drained too; maintenance-a still drains node two.
    w.drain(|p| &*p.node_name == "one" && p.priority <= 5000);
    let out = w.pass();
    maintenance(&out, "maintenance-a", &[e(D, 5000)], "Draining");
    maintenance(&out, "maintenance-b", &[e(D, 5000)], "Waiting for maintenance-a.");
    node(&out, "one", &[e(D, 5000)], "Waiting for maintenance-a.");
    node(&out, "two", &[e(D, 5000)], "Draining");
    node(&out, "three", &[e(D, 10000)], "Waiting for maintenance-a.");
    assert_eq!(out.maintenance("maintenance-a").map(|m| m.drain_plan_index), Some(0));

    // State 4: node two drained: maintenance-a moves to its next entry.
    w.drain(|p| &*p.node_name == "two" && p.priority <= 5000);
    let out = w.pass();
    assert_eq!(out.maintenance("maintenance-a").map(|m| m.drain_plan_index), Some(1));
    // Erratum (SPEC 4.3): the KEP shows plain "Draining" for maintenance-a here, but
    // maintenance-b holds node one below maintenance-a's proposal, so the rule says "limited by".
    maintenance(&out, "maintenance-a", &[e(D, 10000)], "Draining (limited by maintenance-b)");
    maintenance(&out, "maintenance-b", &[e(D, 10000)], "Draining");
    node(&out, "one", &[e(D, 10000)], "Draining (limited by maintenance-b)");
    node(&out, "two", &[e(D, 15000)], "Draining");
    node(&out, "three", &[e(D, 10000)], "Waiting for maintenance-b.");

    // State 5: maintenance-c arrives over nodes one and four; node one does not go back.
    w.add("maintenance-c", 3, &[e(D, 2000), e(D, 15000)], &["one", "four"]);
    let out = w.pass();
    maintenance(&out, "maintenance-c", &[e(D, 2000)], "Draining");
    node(&out, "one", &[e(D, 10000)], "Draining (limited by maintenance-b, maintenance-c)");
    node(&out, "four", &[e(D, 2000)], "Draining");
    assert_eq!(
        out.fast_forwards,
        vec![FastForward {
            maintenance: "maintenance-c".into(),
            node: "one".into(),
            cause: FastForwardCause::NodeAlreadyReached
        }]
    );
}

/// The drainTargets states the KEP's "PodTypes and Label Selectors Progression" shows.
fn progression_states() -> Vec<Vec<DrainPlanEntry>> {
    let max = i32::MAX;
    vec![
        vec![e(D, 1000), pg(D, 1000)],
        vec![e(D, 1000), pg(D, 2000)],
        vec![e(D, max), pg(D, max)],
        vec![e(D, max), pg(D, max), e(DS, 1000)],
        vec![e(D, max), pg(D, max), e(DS, max)],
        vec![e(D, max), pg(D, max), e(DS, max), e(ST, max)],
    ]
}

fn progression_plan() -> Vec<DrainPlanEntry> {
    vec![e(D, 1000), pg(D, 2000), e(D, i32::MAX), e(DS, 1000), e(DS, i32::MAX), e(ST, i32::MAX)]
}

/// Drains node five to the end, evicting whatever the planner says; returns the distinct
/// successive drainTargets of node five.
fn run_progression(drain_plan: Vec<DrainPlanEntry>) -> Vec<Vec<DrainPlanEntry>> {
    let mut w = World::default();
    w.maintenances.push(MaintenanceInput {
        name: "maintenance".into(),
        created: 0,
        drain_plan,
        drain_plan_index: 0,
        nodes: vec!["five".into()],
        wait_for_completion: None,
    });
    w.pods = vec![
        pod("web-500", "five", D, 500),
        pg_pod("pg-800", "five", 800),
        pg_pod("pg-1500", "five", 1500),
        pod("web-3000", "five", D, 3000),
        pg_pod("pg-3000", "five", 3000),
        pod("critical", "five", D, 2_100_000_000),
        pod("ds-500", "five", DS, 500),
        pod("ds-critical", "five", DS, 2_100_000_000),
        pod("etcd", "five", ST, 2_100_000_000),
    ];
    let mut seen: Vec<Vec<DrainPlanEntry>> = Vec::new();
    for _ in 0..50 {
        let out = w.pass();
        let targets = out.node("five").map(|n| n.drain_targets.clone()).unwrap_or_default();
        if seen.last() != Some(&targets) {
            seen.push(targets);
        }
        if out.maintenance("maintenance").is_some_and(|m| m.drained) {
            // The static pod stays (never evicted) and is reported.
            let five = out.node("five").map(|n| n.blocked.len());
            assert_eq!(five, Some(1), "the static pod is reported");
            return seen;
        }
        w.evict(&out);
    }
    panic!("the progression did not finish: {seen:?}");
}

#[test]
fn kep_pod_types_and_label_selectors_progression() {
    assert_eq!(run_progression(progression_plan()), progression_states());
}

#[test]
fn kep_progression_with_the_defaulted_plan_passes_through_every_state_shown() {
    // After defaulting, the plan has more entries (e.g. Default 1000000000), so there are
    // states in between; the KEP's states still come in order.
    let seen = run_progression(default_plan(&progression_plan()));
    let mut at = seen.iter();
    for state in progression_states() {
        assert!(at.any(|s| *s == state), "state {state:?} missing or out of order in {seen:?}");
    }
}
