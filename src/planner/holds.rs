//! Which nodes each maintenance may hold (SPEC 4.5): rolling maintenance
//! (`spec.maxUnavailable`) and NodeDisruptionBudgets. A pure function over plain data, like
//! the drain planner: the controller builds the input from its caches and carries out the
//! grants of the maintenance it reconciles.
//!
//! Rules (the last four are the [`START_GATES`], the seam where a rule that may keep a node
//! from starting is added):
//! - A node a maintenance already holds stays held until it is released; only new holds are
//!   allotted.
//! - A rolling maintenance holds at most its `maxUnavailable` of its selected nodes, released
//!   ones not counted; the others wait. Nodes that are unavailable already (someone's
//!   cordon, not Ready, another maintenance's hold) are taken first, since holding them
//!   disrupts nothing more; then node name order.
//! - A node is *unavailable* while it is not Ready, unschedulable (anyone's cordon) or held by
//!   some maintenance. A new hold of an available node needs every budget selecting it to
//!   allow one more disruption; holding a node that is unavailable already disrupts nothing
//!   more and needs no budget.
//! - A paused maintenance (`spec.paused`) starts no node; a node selected by a budget with a
//!   closed gate (SPEC 4.6: pause request, blackout, outside its windows, alerts, health)
//!   does not start, even one someone else cordoned already. Holds already made stay.
//! - Maintenances are served oldest first (creation time, then name), over one shared count
//!   of each budget: a place that frees up goes to the oldest maintenance waiting for it, and
//!   a younger one cannot take it first, so none starves.

pub mod from_cluster;
mod roll;
pub use roll::{RollOrder, roll_order};

pub use super::wait::Wait;
use super::wait::{ClosedBudget, Gates};
use crate::api::{budget_max_unavailable, scaled_count};
use crate::gates::GateVerdict;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One maintenance in the Cordon or Drain stage, not being deleted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HoldRequest {
    /// `metadata.name`.
    pub name: String,
    /// Creation time (Unix seconds); with the name it orders maintenances oldest first.
    pub created: i64,
    /// Names of the nodes its selector matches.
    pub selected: Vec<String>,
    /// Selected nodes it released (rolling): never held again by it.
    pub released: BTreeSet<String>,
    /// `spec.maxUnavailable`; `None` holds every selected node (the KEP's group maintenance).
    /// A value that cannot be read (admission refuses it) counts as 1.
    pub max_unavailable: Option<IntOrString>,
    /// `spec.paused`: no node starts.
    pub paused: bool,
}

/// What the allotment reads of a Node, borrowed from the snapshot where it can be (a
/// decision reads thousands).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeView<'a> {
    /// The node's name.
    pub name: Cow<'a, str>,
    /// Condition `Ready` is True.
    pub ready: bool,
    /// `spec.unschedulable` (anyone's cordon).
    pub unschedulable: bool,
    /// The maintenances holding it (its holders annotation, as the cache shows it; the loop
    /// waits for the cache to show this controller's own holds before it decides).
    pub holders: Cow<'a, BTreeSet<String>>,
}

impl NodeView<'_> {
    /// Whether the node counts as unavailable for NodeDisruptionBudgets.
    pub fn unavailable(&self) -> bool {
        !self.ready || self.unschedulable || !self.holders.is_empty()
    }
}

/// One NodeDisruptionBudget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BudgetView {
    /// `metadata.name`.
    pub name: String,
    /// Names of the nodes its selector matches.
    pub nodes: Vec<String>,
    /// `spec.maxUnavailable`.
    pub max_unavailable: Option<IntOrString>,
    /// `spec.minAvailable`.
    pub min_available: Option<IntOrString>,
    /// What its gates say now (SPEC 4.6; [`crate::gates`]).
    pub gates: GateVerdict,
}

/// What a budget allows now (its status, in the style of a PodDisruptionBudget's).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetState {
    /// Selected nodes.
    pub expected: usize,
    /// Selected nodes that are unavailable.
    pub unavailable: usize,
    /// Fewest selected nodes that must stay available.
    pub desired_available: usize,
    /// Most selected nodes that may be unavailable at once.
    pub max_unavailable: usize,
    /// Why the spec could not be read (the budget then allows no disruption: fail safe).
    pub invalid: Option<String>,
    /// `maxUnavailable` or `minAvailable` is set: without either, no count limits it and it
    /// never reports `InsufficientNodes` (SPEC 4.6).
    pub counted: bool,
    /// What its gates say now: while one is closed, it allows no disruption.
    pub gates: GateVerdict,
}

impl BudgetState {
    /// Disruptions allowed now: how many more selected nodes may become unavailable; 0 while
    /// a gate is closed.
    pub fn allowed(&self) -> usize {
        if !self.gates.open() {
            return 0;
        }
        self.max_unavailable.saturating_sub(self.unavailable)
    }

    /// Selected nodes that are available.
    pub fn available(&self) -> usize {
        self.expected - self.unavailable
    }
}

/// The state of `budget` over `nodes` (only the nodes it selects are read). A spec with
/// neither maxUnavailable nor minAvailable sets no count limit (every selected node may be
/// unavailable; its gates may still close it, SPEC 4.6); one with both, or a bad value,
/// allows nothing.
pub fn budget_state(budget: &BudgetView, nodes: &FxHashMap<&str, &NodeView<'_>>) -> BudgetState {
    let selected: FxHashSet<&str> = budget.nodes.iter().map(String::as_str).collect();
    let expected = selected.len();
    let unavailable = selected.iter().filter(|n| nodes.get(*n).is_none_or(|v| v.unavailable())).count();
    let limit = budget_max_unavailable(budget.max_unavailable.as_ref(), budget.min_available.as_ref(), expected);
    let (max_unavailable, invalid) = match limit {
        Ok(m) => (m, None),
        Err(e) => (0, Some(e)),
    };
    BudgetState {
        expected,
        unavailable,
        desired_available: expected - max_unavailable,
        max_unavailable,
        invalid,
        counted: budget.max_unavailable.is_some() || budget.min_available.is_some(),
        gates: budget.gates.clone(),
    }
}

/// One maintenance's part of the allotment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// Selected, not released nodes it holds or may now hold (already held ones included).
    pub hold: BTreeSet<String>,
    /// Selected, not released nodes that wait, and why.
    pub waiting: BTreeMap<String, Wait>,
    /// Nodes newly granted by this allotment (a subset of `hold`).
    pub granted: BTreeSet<String>,
}

/// The whole allotment: per maintenance its holds, per budget its state and how many nodes
/// wait for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allotment {
    /// By maintenance name.
    pub maintenances: BTreeMap<String, Holds>,
    /// By budget name: the state before this allotment's grants.
    pub budgets: BTreeMap<String, BudgetState>,
    /// By budget name: nodes waiting for it.
    pub budget_waiting: BTreeMap<String, usize>,
    /// By node name, for every node under a budget with a closed gate or held by a paused
    /// maintenance: all of them ([`Gates`]), whether or not a maintenance asks for the node.
    /// The one answer to "why may this node not start" that every other view reads.
    pub node_gates: BTreeMap<String, Gates>,
}

impl Allotment {
    /// The next instant at which time alone changes what some budget's gates say (a window
    /// or blackout edge; SPEC 4.6): when the controller looks again without a watch event.
    pub fn next_instant(&self) -> Option<k8s_openapi::jiff::Timestamp> {
        self.budgets.values().filter_map(|b| b.gates.next_instant).min()
    }
}

/// A node a maintenance may start (hold) now, as the [`START_GATES`] see it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate<'a> {
    /// The maintenance asking.
    pub request: &'a HoldRequest,
    /// The node's name.
    pub node: &'a str,
    /// Nodes the maintenance holds now, grants of this allotment included.
    pub held: usize,
    /// The node is unavailable already (not Ready, cordoned, held, or granted by this
    /// allotment): holding it disrupts nothing more.
    pub unavailable: bool,
    /// Every NodeDisruptionBudget selecting the node, with its count so far.
    pub budgets: Vec<BudgetCount<'a>>,
    /// The pauses and closed gates over the node ([`Allotment::node_gates`]).
    pub gates: Option<&'a Gates>,
}

/// A budget's count as an allotment goes: the grants before this candidate included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetCount<'a> {
    /// The budget's name.
    pub name: &'a str,
    /// Its selected nodes unavailable now.
    pub unavailable: usize,
    /// Its selected nodes allowed to be unavailable.
    pub max_unavailable: usize,
}

/// One rule that may keep a node from starting: `Some(why)` while the node must wait.
pub type StartGate = fn(&Candidate<'_>) -> Option<Wait>;

/// The rules a node must pass to start, in order; the first that says wait gives the
/// node's reason. A new rule is one function here plus the API field it reads (carried in
/// [`Candidate`] from [`HoldRequest`] or [`BudgetView`]).
pub const START_GATES: [StartGate; 3] = [gates, maintenance_turn, budget_counts];

/// No node starts while a pause or a closed gate is over it: its maintenance's
/// `spec.paused`, or any budget selecting it with a closed gate, whether or not the node is
/// unavailable already (SPEC 4.6: gates apply to nodes someone else cordoned too).
fn gates(c: &Candidate<'_>) -> Option<Wait> {
    let gates = c.gates.cloned().unwrap_or_default();
    let gates = if c.request.paused { gates.with_paused(&c.request.name) } else { gates };
    (!gates.is_open()).then_some(Wait::Gated(gates))
}

/// A rolling maintenance holds at most its `maxUnavailable` of its selected nodes.
fn maintenance_turn(c: &Candidate<'_>) -> Option<Wait> {
    let limit = c.request.max_unavailable.as_ref().map(|v| scaled_count(v, c.request.selected.len()).unwrap_or(1))?;
    (c.held >= limit).then_some(Wait::Turn { held: c.held, limit })
}

/// A new hold of an available node needs every budget selecting it to allow one more
/// disruption; a node unavailable already needs none.
fn budget_counts(c: &Candidate<'_>) -> Option<Wait> {
    if c.unavailable {
        return None;
    }
    let full = c.budgets.iter().find(|b| b.unavailable >= b.max_unavailable)?;
    Some(Wait::Budget {
        name: full.name.to_owned(),
        unavailable: full.unavailable,
        max_unavailable: full.max_unavailable,
    })
}

/// Allots holds to every maintenance of `requests` (see the module rules): each candidate
/// node goes through the [`START_GATES`]. Pure and deterministic; never panics on input
/// (unknown node names count as unavailable).
pub fn allot(requests: &[HoldRequest], nodes: &[NodeView<'_>], budgets: &[BudgetView]) -> Allotment {
    let by_name: FxHashMap<&str, &NodeView<'_>> = nodes.iter().map(|n| (&*n.name, n)).collect();
    let states: Vec<BudgetState> = budgets.iter().map(|b| budget_state(b, &by_name)).collect();
    let mut covering: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (i, b) in budgets.iter().enumerate() {
        for n in &b.nodes {
            let cover = covering.entry(n.as_str()).or_default();
            // A budget that lists a node twice covers it once.
            if cover.last() != Some(&i) {
                cover.push(i);
            }
        }
    }
    let node_gates = node_gates(requests, nodes, budgets, &covering);
    let mut unavailable: Vec<usize> = states.iter().map(|s| s.unavailable).collect();
    // Nodes made unavailable by grants of this allotment.
    let mut taken: FxHashSet<String> = FxHashSet::default();
    let mut budget_waiting: BTreeMap<String, usize> = BTreeMap::new();
    let mut order: Vec<&HoldRequest> = requests.iter().collect();
    order.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    let mut out = BTreeMap::new();
    for req in order {
        let selected: BTreeSet<&str> =
            req.selected.iter().map(String::as_str).filter(|n| !req.released.contains(*n)).collect();
        let holds_it = |n: &str| by_name.get(n).is_some_and(|v| v.holders.contains(&req.name));
        let mut holds = Holds {
            hold: selected.iter().filter(|n| holds_it(n)).map(|n| n.to_string()).collect(),
            ..Default::default()
        };
        let down =
            |taken: &FxHashSet<String>, n: &str| taken.contains(n) || by_name.get(n).is_none_or(|v| v.unavailable());
        let mut candidates: Vec<&str> = selected.iter().copied().filter(|n| !holds_it(n)).collect();
        candidates.sort_by_key(|n| !down(&taken, n));
        for n in candidates {
            let cover = covering.get(n).map(Vec::as_slice).unwrap_or_default();
            let candidate = Candidate {
                request: req,
                node: n,
                held: holds.hold.len(),
                unavailable: down(&taken, n),
                budgets: cover
                    .iter()
                    .map(|&b| BudgetCount {
                        name: &budgets[b].name,
                        unavailable: unavailable[b],
                        max_unavailable: states[b].max_unavailable,
                    })
                    .collect(),
                gates: node_gates.get(n),
            };
            if let Some(wait) = START_GATES.iter().find_map(|gate| gate(&candidate)) {
                for name in wait.budgets() {
                    *budget_waiting.entry(name.to_owned()).or_default() += 1;
                }
                holds.waiting.insert(n.to_owned(), wait);
                continue;
            }
            if !candidate.unavailable {
                for &b in cover {
                    unavailable[b] += 1;
                }
            }
            taken.insert(n.to_owned());
            holds.hold.insert(n.to_owned());
            holds.granted.insert(n.to_owned());
        }
        out.insert(req.name.clone(), holds);
    }
    let budgets = budgets.iter().zip(states).map(|(b, s)| (b.name.clone(), s)).collect();
    Allotment { maintenances: out, budgets, budget_waiting, node_gates }
}

/// The pauses and closed gates over each node ([`Allotment::node_gates`]): every budget in
/// `covering` (budget indices by node name) with a closed gate, and every paused maintenance
/// of `requests` that holds the node. Each budget's closure is built once and shared.
fn node_gates(
    requests: &[HoldRequest],
    nodes: &[NodeView<'_>],
    budgets: &[BudgetView],
    covering: &FxHashMap<&str, Vec<usize>>,
) -> BTreeMap<String, Gates> {
    let closed: Vec<Option<Arc<ClosedBudget>>> = budgets
        .iter()
        .map(|b| {
            (!b.gates.open()).then(|| Arc::new(ClosedBudget { name: b.name.clone(), closed: b.gates.closed.clone() }))
        })
        .collect();
    let paused: BTreeSet<&str> = requests.iter().filter(|r| r.paused).map(|r| r.name.as_str()).collect();
    let mut out: BTreeMap<String, Gates> = BTreeMap::new();
    for (n, cover) in covering {
        let mut closed: Vec<Arc<ClosedBudget>> = cover.iter().filter_map(|&b| closed[b].clone()).collect();
        if !closed.is_empty() {
            closed.sort_by(|a, b| a.name.cmp(&b.name));
            out.insert(n.to_string(), Gates { paused: Vec::new(), budgets: closed });
        }
    }
    if !paused.is_empty() {
        for v in nodes {
            let by: Vec<String> = v.holders.iter().filter(|h| paused.contains(h.as_str())).cloned().collect();
            if !by.is_empty() {
                out.entry(v.name.to_string()).or_default().paused = by;
            }
        }
    }
    out
}

/// What released a held node of a rolling maintenance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseCause {
    /// The node's `nodemaintenance.k8s.io/done` annotation names the maintenance.
    DoneAnnotation,
    /// The node rebooted (a new boot ID, Ready again) after it reached the end of the stage.
    Reboot,
}

/// What [`release_cause`] reads of one held node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReleaseInput<'a> {
    /// The node reached the end of the maintenance's stage (drained in Drain, cordoned in
    /// Cordon): no signal counts before.
    pub at_end: bool,
    /// The value of the node's done annotation.
    pub done: Option<&'a str>,
    /// Whether reboots release (`releaseNodesOn: Reboot`).
    pub reboot_releases: bool,
    /// The boot ID recorded when the node reached the end of the stage.
    pub recorded_boot_id: Option<&'a str>,
    /// The node's boot ID now.
    pub boot_id: Option<&'a str>,
    /// Whether the node is Ready now.
    pub ready: bool,
}

/// Whether the held node is to be released by `maintenance` (rolling), and why; `None` while
/// it is not at the end of the stage or no signal came.
pub fn release_cause(maintenance: &str, node: &ReleaseInput<'_>) -> Option<ReleaseCause> {
    if !node.at_end {
        return None;
    }
    if node.done == Some(maintenance) {
        return Some(ReleaseCause::DoneAnnotation);
    }
    let rebooted = matches!((node.recorded_boot_id, node.boot_id), (Some(then), Some(now)) if then != now);
    (node.reboot_releases && rebooted && node.ready).then_some(ReleaseCause::Reboot)
}

#[cfg(test)]
mod tests;
