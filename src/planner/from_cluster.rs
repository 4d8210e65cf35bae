//! The drain planner's input built from the cluster's objects (SPEC 4.3): what [`super::plan`]
//! reads of each draining maintenance and each node. Pure conversions, shared by the
//! controller (over its caches, `controller::pass`) and `review`'s drain preview (over a
//! snapshot).

use super::wait::Gates;
use super::{CompletionWait, MaintenanceInput, NodeInput};
use crate::api::node::{
    HeldNodes, has_draining_taint, held_by, is_unschedulable, name as node_name, published_status, reached_targets,
};
use crate::api::{
    NodeDisruptionBudget, NodeMaintenance, NodeMaintenanceNodeStatus, WaitForCompletion, parse_drain_timeout,
};
use crate::selector::{NodeIndex, NodeMatcher};
use k8s_openapi::api::core::v1::{Node, NodeSelector};
use kube::ResourceExt;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A list of Nodes with what decisions over it read again and again, read once: their
/// holders ([`HeldNodes`]) and a selector index of their names and labels ([`NodeIndex`]).
/// Selecting over 5,000 Nodes through the index takes microseconds, where reading every
/// Node's label map takes a millisecond (docs/benchmarks.md, "The decision").
pub struct Nodes<'a> {
    /// The Nodes, in the order the index follows.
    pub list: &'a [Arc<Node>],
    /// Their holders.
    pub held: HeldNodes,
    index: NodeIndex,
    /// The label keys `index` holds, sorted (`None`: every key).
    keys: Option<Vec<String>>,
    /// The per-node status published on each node that has one (held nodes only, unless
    /// something else wrote the annotation).
    published: FxHashMap<&'a str, NodeMaintenanceNodeStatus>,
}

impl<'a> Nodes<'a> {
    /// Reads the holders, published statuses, names and labels of `list`.
    pub fn new(list: &'a [Arc<Node>]) -> Self {
        Self::with_index(list, None)
    }

    /// [`Nodes::new`], indexing only the label keys the selectors of `maintenances` and
    /// `budgets` read (a Node carries a dozen labels; selectors read two or three keys):
    /// the decision selects with those. A selection that reads another key scans the
    /// Nodes' labels instead.
    pub fn for_selectors(
        list: &'a [Arc<Node>],
        maintenances: &[Arc<NodeMaintenance>],
        budgets: &[Arc<NodeDisruptionBudget>],
    ) -> Self {
        let selectors =
            maintenances.iter().map(|m| &m.spec.node_selector).chain(budgets.iter().map(|b| &b.spec.node_selector));
        let keys: BTreeSet<String> = selectors
            .filter_map(NodeMatcher::compile)
            .flat_map(|m| m.label_keys().map(str::to_owned).collect::<Vec<_>>())
            .collect();
        Self::with_index(list, Some(keys.into_iter().collect()))
    }

    fn with_index(list: &'a [Arc<Node>], keys: Option<Vec<String>>) -> Self {
        let held = HeldNodes::of(list);
        let published = list.iter().filter_map(|n| Some((node_name(n), published_status(n)?))).collect();
        let index = NodeIndex::with_keys(list.iter().map(|n| &**n), keys.as_deref());
        Nodes { list, held, index, keys, published }
    }

    /// The per-node status published on the node named `node` (the KEP's
    /// `Node.status.maintenanceStatus`), if it has one that parses.
    pub fn published(&self, node: &str) -> Option<&NodeMaintenanceNodeStatus> {
        self.published.get(node)
    }

    /// The Nodes `selector` matches, in list order (an invalid selector matches none).
    pub fn matching(&self, selector: &NodeSelector) -> Vec<Arc<Node>> {
        let Some(m) = NodeMatcher::compile(selector) else { return Vec::new() };
        if let Some(keys) = &self.keys
            && !m.label_keys().all(|k| keys.binary_search_by(|x| x.as_str().cmp(k)).is_ok())
        {
            return self.list.iter().filter(|n| m.matches(n)).cloned().collect();
        }
        m.matches_indexed(&self.index).iter().zip(self.list).filter(|(hit, _)| **hit).map(|(_, n)| n.clone()).collect()
    }
}

/// Which selected nodes a Drain maintenance drains, for [`drain_maintenances`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// The nodes it holds and that are observed cordoned (SPEC 3.3): what the controller
    /// plans.
    Held,
    /// Every selected node, as if held: what `review`'s drain preview plans with, since a
    /// Drain maintenance holds its nodes as soon as the controller gets to it.
    Selected,
}

/// The maintenances that drain ([`NodeMaintenance::is_draining`]: Drain stage, not being
/// deleted), as planner input: each with its plan, its
/// stored cursor (`status.drainStatus.drainPlanIndex`) and the nodes it drains: those of the
/// `nodes` it selects (and, with [`Drained::Held`], holds cordoned), not released. With
/// [`Drained::Held`], a node that joins a drain (no published drain targets yet:
/// held by a rolling maintenance after an earlier one was released, or let through by a
/// budget) starts at the first entry: the cursor restarts at 0, so the new node's pods leave
/// in plan order too, while the nodes that reached further keep their floor.
pub fn drain_maintenances(
    maintenances: &[Arc<NodeMaintenance>],
    nodes: &[Arc<Node>],
    which: Drained,
) -> Vec<MaintenanceInput> {
    let drains = maintenances.iter().filter(|m| m.is_draining());
    drains
        .filter_map(|m| {
            let matcher = NodeMatcher::compile(&m.spec.node_selector)?;
            let name = m.name_any();
            let released = m.released_nodes();
            let drained: Vec<&Arc<Node>> = nodes
                .iter()
                .filter(|n| {
                    matcher.matches(n) && (which == Drained::Selected || (held_by(n, &name) && is_unschedulable(n)))
                })
                .filter(|n| !released.contains(n.metadata.name.as_deref().unwrap_or_default()))
                .collect();
            let joined = which == Drained::Held && drained.iter().any(|n| published_status(n).is_none());
            let stored = m.status.as_ref().and_then(|s| s.drain_status.as_ref()).map_or(0, |d| d.drain_plan_index);
            Some(MaintenanceInput {
                created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
                drain_plan: m.spec.drain_plan.clone(),
                drain_plan_index: if joined { 0 } else { stored },
                nodes: drained.iter().map(|n| n.name_any()).collect(),
                wait_for_completion: m.spec.wait_for_completion.as_ref().map(completion_wait),
                name,
            })
        })
        .collect()
}

/// A maintenance's `spec.waitForCompletion` as planner input (SPEC 4.6): its podSelector, and
/// its timeout read as a Go duration. A timeout that does not read (admission refuses one)
/// counts as no limit: the pods are left to finish rather than evicted early.
pub fn completion_wait(wait: &WaitForCompletion) -> CompletionWait {
    CompletionWait {
        pod_selector: wait.pod_selector.clone(),
        timeout: wait.timeout.as_deref().and_then(|t| parse_drain_timeout(t).ok()),
    }
}

/// The planner input of the `nodes` whose name `wanted` accepts: what each already reached
/// (the persisted floor), whether it carries the draining taint (SPEC 4.3), why no new
/// eviction may start on it (`gated`, from [`eviction_gates`]; SPEC 4.6) and when its drain
/// started (the published `drainStartTime`, SPEC 4.6).
pub fn node_inputs(
    nodes: &[Arc<Node>],
    wanted: impl Fn(&str) -> bool,
    gated: &BTreeMap<String, Gates>,
) -> Vec<NodeInput> {
    nodes
        .iter()
        .filter(|n| wanted(n.metadata.name.as_deref().unwrap_or_default()))
        .map(|n| {
            let name = n.name_any();
            NodeInput {
                reached: reached_targets(n),
                draining_taint: has_draining_taint(n),
                gated: gated.get(&name).cloned(),
                drain_start: published_status(n).and_then(|s| s.drain_start_time).map(|t| t.0),
                name,
            }
        })
        .collect()
}

/// Why no new eviction may start on each node (SPEC 4.6), by node name: its pauses and
/// closed gates (`node_gates`: [`super::holds::Allotment::node_gates`]) while its drain has
/// not started (no `drainStartTime` published on the node), only its pauses after: a node
/// whose drain started finishes it when a gate other than a pause closes.
pub fn eviction_gates(nodes: &Nodes<'_>, node_gates: &BTreeMap<String, Gates>) -> BTreeMap<String, Gates> {
    node_gates
        .iter()
        .filter_map(|(node, gates)| {
            let started = nodes.published(node).is_some_and(|s| s.drain_start_time.is_some());
            let gates = if started { gates.pauses() } else { gates.clone() };
            (!gates.is_open()).then(|| (node.clone(), gates))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::GateReason;
    use crate::gates::GateClosure;
    use crate::planner::decide::fixtures::{budget, maintenance};
    use serde_json::json;

    fn node(name: &str, zone: &str) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": name, "labels": {"pool": "general", "zone": zone}}}))
                .unwrap(),
        )
    }

    fn selector(key: &str, value: &str) -> NodeSelector {
        serde_json::from_value(json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": key, "operator": "In", "values": [value]}]}]}))
        .unwrap()
    }

    #[test]
    fn eviction_gates_close_unstarted_nodes_and_only_pauses_stop_a_started_one() {
        use crate::api::{MAINTENANCE_STATUS_ANNOTATION, NodeMaintenanceNodeStatus};
        use crate::planner::decide::fixtures::{node as held, t};
        use crate::planner::wait::ClosedBudget;
        let started = |name: &str| {
            let mut n = (*held(name, Some(&["m"]), vec![])).clone();
            let published =
                NodeMaintenanceNodeStatus { drain_start_time: Some(t("2026-11-26T10:00:00Z")), ..Default::default() };
            n.metadata
                .annotations
                .get_or_insert_default()
                .insert(MAINTENANCE_STATUS_ANNOTATION.into(), serde_json::to_string(&published).unwrap());
            Arc::new(n)
        };
        let list = [started("a"), held("b", Some(&["m"]), vec![]), started("c"), started("d")];
        let closed = |name: &str, reason| {
            Arc::new(ClosedBudget {
                name: name.into(),
                closed: vec![GateClosure { reason, message: format!("{name} {reason:?}") }],
            })
        };
        let (window, pause) =
            (closed("pool", GateReason::OutsideMaintenanceWindow), closed("team", GateReason::Paused));
        let both = Gates { paused: vec![], budgets: vec![window.clone(), pause.clone()] };
        let node_gates = BTreeMap::from([
            ("a".to_owned(), both.clone()),
            ("b".to_owned(), both.clone()),
            ("c".to_owned(), Gates { paused: vec![], budgets: vec![window] }),
            ("d".to_owned(), Gates::default().with_paused("p")),
        ]);
        let gates = eviction_gates(&Nodes::new(&list), &node_gates);
        assert_eq!(gates.keys().collect::<Vec<_>>(), ["a", "b", "d"], "c's drain started: only a pause stops it");
        assert_eq!(gates["a"].to_string(), "team Paused.", "the pause holds whatever else is closed");
        assert_eq!(gates["b"], both, "not started: every closed gate");
        assert_eq!(gates["d"].to_string(), "Paused (spec.paused of NodeMaintenance p).");
    }

    #[test]
    fn a_selection_by_a_key_left_out_of_the_index_reads_the_labels() {
        let list = [node("a", "z1"), node("b", "z2")];
        // The budget reads `pool`, the maintenance the names: `zone` is not indexed.
        let nodes = Nodes::for_selectors(&list, &[maintenance("m", "Cordon", &["a"])], &[budget("b")]);
        let names = |selected: Vec<Arc<Node>>| selected.iter().map(|n| n.name_any()).collect::<Vec<_>>();
        assert_eq!(names(nodes.matching(&selector("pool", "general"))), ["a", "b"]);
        assert_eq!(names(nodes.matching(&selector("zone", "z2"))), ["b"]);
        assert_eq!(names(nodes.matching(&maintenance("m", "Cordon", &["a"]).spec.node_selector)), ["a"]);
        assert_eq!(names(Nodes::new(&list).matching(&selector("zone", "z2"))), ["b"]);
    }
}
