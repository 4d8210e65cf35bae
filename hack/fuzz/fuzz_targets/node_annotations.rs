//! What the controller reads back from a Node's annotations, which anyone who may patch a
//! Node can write: the holders (`nodemaintenance.k8s.io/maintenances`) and the published
//! status with the drain targets' floor (`nodemaintenance.k8s.io/maintenance-status`). Any
//! text, or JSON written from parts (any maintenance names, missing fields, drain targets of
//! any priority, type and pod selector):
//! - holders that do not read count as a hold by an unknown maintenance with the node
//!   unschedulable before (nothing uncordons it); holders that read write back the same;
//!   every reader (`Holders::of`, `is_held`, `held_by`, `HeldNodes`) agrees;
//! - a published status that reads writes back the same, and is the floor every reader
//!   sees (`reached_targets`, `Nodes::published`);
//! - a drain planned over the node from that floor, held by a Drain maintenance with any
//!   plan, never panics and evicts only pods of the node.
//! Input: a first byte with its lowest bit clear, `input::KNOBS` bytes in all (the second:
//! which annotations are present and the cordon), then the holders and status texts; set,
//! the rest is read with `arbitrary`.
#![no_main]

use arbitrary::Arbitrary;
use k8s_openapi::api::core::v1::Node;
use libfuzzer_sys::fuzz_target;
use node_maintenance::api::node::{HeldNodes, Holders, held_by, is_held, published_status, reached_targets};
use node_maintenance::api::{DrainPlanEntry, NodeMaintenance, NodeMaintenanceNodeStatus, PodType, default_plan};
use node_maintenance::planner::from_cluster::{Drained, Nodes, drain_maintenances, node_inputs};
use node_maintenance::planner::{PlannerInput, PodView, plan};
use node_maintenance_fuzz::input;
use node_maintenance_fuzz::world::EntryM;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Arbitrary, Debug)]
enum HoldersText {
    Raw(String),
    Parts { names: Vec<String>, holder: bool, unschedulable_before: Option<bool> },
}

#[derive(Arbitrary, Debug)]
enum StatusText {
    Raw(String),
    Parts { targets: Vec<EntryM>, start: Option<String>, phase: Option<String>, pending: Option<i64> },
}

#[derive(Arbitrary, Debug)]
struct Input {
    holders: Option<HoldersText>,
    status: Option<StatusText>,
    unschedulable: bool,
    plan: Vec<EntryM>,
    pods: Vec<(i32, u8, bool)>,
}

const HOLDERS: &str = "nodemaintenance.k8s.io/maintenances";
const STATUS: &str = "nodemaintenance.k8s.io/maintenance-status";

fn node(annotations: BTreeMap<String, String>, unschedulable: bool) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "n0", "labels": {"pool": "a"}, "annotations": annotations},
        "spec": {"unschedulable": unschedulable},
    }))
    .expect("a Node reads")
}

fn holders_text(h: &HoldersText) -> String {
    match h {
        HoldersText::Raw(s) => s.clone(),
        HoldersText::Parts { names, holder, unschedulable_before } => {
            let mut names: Vec<&str> = names.iter().take(4).map(String::as_str).collect();
            if *holder {
                names.push("m0");
            }
            let mut v = json!({"maintenances": names});
            if let Some(b) = unschedulable_before {
                v["unschedulableBefore"] = json!(b);
            }
            v.to_string()
        }
    }
}

fn status_text(s: &StatusText) -> String {
    match s {
        StatusText::Raw(s) => s.clone(),
        StatusText::Parts { targets, start, phase, pending } => {
            let mut v = json!({"nodeRef": {"name": "n0"}, "drainTargets": targets.iter().take(8).map(|e| e.json(true)).collect::<Vec<_>>()});
            if let Some(t) = start {
                v["drainStartTime"] = json!(t);
            }
            if let Some(p) = phase {
                v["phase"] = json!(p);
            }
            if let Some(p) = pending {
                v["podsPendingEvictionRequest"] = json!(p);
            }
            v.to_string()
        }
    }
}

/// Raw texts, the node cordoned or not, and pods of the priorities of the drain plan's
/// default entries and around them.
fn raw(data: &[u8]) -> Input {
    let (knobs, texts) = input::split(data);
    let text = |i: usize| texts.get(i).map_or_else(String::new, |t| (*t).to_owned());
    let pods = [(0, 0, true), (1_000_000_001, 0, true), (2_000_000_000, 1, true), (i32::MAX, 2, true), (5, 0, false)];
    Input {
        holders: (knobs[1] & 1 != 0).then(|| HoldersText::Raw(text(0))),
        status: (knobs[1] & 2 != 0).then(|| StatusText::Raw(text(1))),
        unschedulable: knobs[1] & 4 != 0,
        plan: Vec::new(),
        pods: pods.to_vec(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(input) = input::structured_or(data, raw) else { return };
    let mut annotations = BTreeMap::new();
    let holders_raw = input.holders.as_ref().map(holders_text);
    if let Some(h) = &holders_raw {
        annotations.insert(HOLDERS.to_owned(), h.clone());
    }
    if let Some(s) = &input.status {
        annotations.insert(STATUS.to_owned(), status_text(s));
    }
    let n = node(annotations.clone(), input.unschedulable);

    let holders = Holders::of(&n);
    assert_eq!(holders.is_some(), holders_raw.is_some());
    if let (Some(h), Some(raw)) = (&holders, &holders_raw) {
        match serde_json::from_str::<Holders>(raw) {
            Ok(read) => assert_eq!(&read, h),
            Err(_) => assert!(h.unschedulable_before && !h.maintenances.is_empty(), "{raw:?} read as {h:?}"),
        }
        let mut again = annotations.clone();
        again.insert(HOLDERS.to_owned(), h.to_annotation());
        assert_eq!(Holders::of(&node(again, input.unschedulable)).as_ref(), Some(h), "{h:?} does not write back");
    }
    let names = holders.as_ref().map(|h| h.maintenances.clone()).unwrap_or_default();
    assert_eq!(is_held(&n), !names.is_empty());
    let list = [Arc::new(n.clone())];
    let held = HeldNodes::of(&list);
    for m in names.iter().map(String::as_str).chain(["m0", ""]) {
        let want = names.contains(m);
        assert_eq!(held_by(&n, m), want, "{m:?}");
        assert_eq!(held.held_by("n0", m), want, "{m:?}");
        assert_eq!(held.nodes_of(m).len(), usize::from(want), "{m:?}");
    }
    assert_eq!(held.names("n0"), holders.as_ref().map(|h| h.names()).unwrap_or_default());

    let published = published_status(&n);
    if let Some(s) = &published {
        let written = serde_json::to_string(s).expect("a status writes");
        let again: NodeMaintenanceNodeStatus =
            serde_json::from_str(&written).unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(&again, s);
    }
    assert_eq!(reached_targets(&n), published.as_ref().map(|s| s.drain_targets.clone()).unwrap_or_default());
    let nodes = Nodes::new(&list);
    assert_eq!(nodes.published("n0"), published.as_ref());

    // A drain over the node from that floor.
    let entries: Vec<DrainPlanEntry> =
        input.plan.iter().take(6).map(|e| serde_json::from_value(e.json(false)).expect("an entry reads")).collect();
    let m: NodeMaintenance = serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": "m0", "creationTimestamp": "2026-11-26T00:00:00Z"},
        "spec": {"stage": "Drain", "drainPlan": default_plan(&entries),
                 "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}},
    }))
    .expect("a NodeMaintenance reads");
    let inputs = drain_maintenances(&[Arc::new(m)], &list, Drained::Held);
    let pods: Vec<PodView> = input
        .pods
        .iter()
        .take(8)
        .enumerate()
        .map(|(i, (priority, pod_type, on_node))| PodView {
            namespace: "ns".into(),
            name: format!("p{i}").into(),
            uid: format!("uid-{i}").into(),
            node_name: if *on_node { "n0" } else { "n1" }.into(),
            priority: *priority,
            pod_type: [PodType::Default, PodType::DaemonSet, PodType::Static][usize::from(*pod_type) % 3],
            ..PodView::default()
        })
        .collect();
    let input = PlannerInput {
        nodes: node_inputs(&list, |_| true, &BTreeMap::new()),
        pods: pods.clone(),
        maintenances: inputs,
        options: Default::default(),
        now: "2026-11-26T12:00:00Z".parse().expect("a time"),
    };
    let decision = plan(&input);
    for np in &decision.nodes {
        assert_eq!(np.name, "n0");
        for pod in &np.evict {
            assert!(pods.iter().any(|p| p.uid == pod.uid && &*p.node_name == "n0"), "{pod:?} is not on n0");
        }
    }
});
