//! The working state of one planning pass: input indexed by node, cursors, proposals and the
//! effective targets of every node (SPEC 4.3 "Targets", "Combining", "Advancing").
//!
//! State is grouped by what it describes: a [`NodeState`] per selected node (holding a
//! [`PodState`] per non-terminal pod on it), a [`MaintState`] per maintenance. Other files
//! read them through getters and change them only through [`Pass::raise`] (`stall`); the
//! floor, first matches and offsets stay private to this file and [`progress`].
//!
//! Cost: O(pods x maintenances-per-node x plan length) for the cursors, O(nodes x
//! maintenances-per-node x groups) for the targets; nothing is quadratic in nodes or pods.

mod progress;

use super::index::{MaintIx, NodeIx, NodeLookup};
use super::input::{CompletionWait, MaintenanceInput, PlannerInput, PlannerOptions, PodPolicy};
use super::output::BlockedCause;
use super::pods::PodView;
use super::proposal::{CompiledPlan, advance};
use super::selectors::{SelId, SelectorTable};
use super::targets::{PodKey, Targets};
use super::wait::Gates;
use crate::api::PodType;
use crate::selector::PodSelector;
use jiff::{SignedDuration, Timestamp};
use std::collections::HashMap;
use typed_index_collections::{TiSlice, TiVec};

/// What the controller does with a pod on a selected node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// The controller is responsible for it: it is evicted when targeted and waited for.
    Evict,
    /// Reported when targeted, never evicted: static pods, DaemonSet pods tolerating the
    /// draining taint, opted-out pods, and unmanaged or emptyDir pods when the options block
    /// them. Those whose cause [holds the drain](BlockedCause::holds_drain) keep the node from
    /// being drained, but never hold a cursor (the rest of the plan goes on around them).
    Report(BlockedCause),
    /// DaemonSet pod under `--skip-daemonset-pods`: ignored.
    SkippedDaemonSet,
    /// Left to finish (SPEC 4.6 "Pods that finish"): a maintenance draining its node waits
    /// for it and that wait is not over. Never evicted and never holds a cursor, but keeps
    /// the node from being drained until it is terminal.
    Wait,
}

/// What a pod rule reads besides the pod: the pass's switches and the waits still running on
/// the pod's node.
pub(super) struct RuleInput<'r> {
    options: PlannerOptions,
    waits: &'r [NodeWait<'r>],
}

/// One rule that may keep a pod from being evicted: `Some(role)` decides its role.
type PodRule = fn(&PodView, &RuleInput<'_>) -> Option<Role>;

/// The rules over every pod on a selected node, in order: the first that answers gives the
/// pod's role; a pod none answers is evicted when targeted. The seam where a rule that may
/// keep a pod from being evicted is added: one function here plus the field of [`PodView`],
/// [`PlannerOptions`] or [`RuleInput`] it reads.
///
/// A pod waited for is left to finish only once the rules for pods that are never waited for
/// (static, skipped, opted out, coming straight back) did not answer, and before the rules
/// that keep a pod for what its eviction would lose: after the wait's timeout those still
/// keep it.
const POD_RULES: [PodRule; 7] = [
    static_pods,
    skipped_daemonset_pods,
    opted_out,
    daemonset_pods_tolerating_the_taint,
    waited_for,
    blocked_unmanaged,
    blocked_emptydir,
];

/// Static (mirror) pods cannot be removed through the API: reported.
fn static_pods(pod: &PodView, _: &RuleInput<'_>) -> Option<Role> {
    (pod.pod_type == PodType::Static).then_some(Role::Report(BlockedCause::StaticPod))
}

/// `--skip-daemonset-pods`: DaemonSet pods are ignored.
fn skipped_daemonset_pods(pod: &PodView, input: &RuleInput<'_>) -> Option<Role> {
    (pod.pod_type == PodType::DaemonSet && input.options.skip_daemonset_pods).then_some(Role::SkippedDaemonSet)
}

/// A pod that opted out of eviction (Karpenter's and Cluster Autoscaler's annotations).
fn opted_out(pod: &PodView, _: &RuleInput<'_>) -> Option<Role> {
    pod.opted_out.then_some(Role::Report(BlockedCause::OptedOut))
}

/// A DaemonSet pod that tolerates the draining taint would come straight back.
fn daemonset_pods_tolerating_the_taint(pod: &PodView, _: &RuleInput<'_>) -> Option<Role> {
    (pod.pod_type == PodType::DaemonSet && pod.tolerates_draining_taint)
        .then_some(Role::Report(BlockedCause::ToleratesDrainingTaint))
}

/// SPEC 4.6 "Pods that finish": a pod that some wait still running on its node selects is
/// left to finish (several maintenances: until the last deadline of those selecting it).
fn waited_for(pod: &PodView, input: &RuleInput<'_>) -> Option<Role> {
    input.waits.iter().any(|w| w.wait.selects(pod)).then_some(Role::Wait)
}

/// `--unmanaged-pods=block`: a pod no controller re-creates is kept.
fn blocked_unmanaged(pod: &PodView, input: &RuleInput<'_>) -> Option<Role> {
    (pod.pod_type == PodType::Default && pod.unmanaged && input.options.unmanaged_pods == PodPolicy::Block)
        .then_some(Role::Report(BlockedCause::Unmanaged))
}

/// `--emptydir-pods=block`: a pod whose emptyDir data would go is kept.
fn blocked_emptydir(pod: &PodView, input: &RuleInput<'_>) -> Option<Role> {
    (pod.emptydir && input.options.emptydir_pods == PodPolicy::Block).then_some(Role::Report(BlockedCause::EmptyDir))
}

impl Role {
    fn of(pod: &PodView, input: &RuleInput<'_>) -> Role {
        POD_RULES.iter().find_map(|rule| rule(pod, input)).unwrap_or(Role::Evict)
    }

    /// Whether a pod in this role keeps its node from being drained.
    pub(super) fn holds_drain(self) -> bool {
        match self {
            Role::Evict | Role::Wait => true,
            Role::Report(cause) => cause.holds_drain(),
            Role::SkippedDaemonSet => false,
        }
    }
}

/// Which pods a maintenance's `spec.waitForCompletion` selects, compiled once per pass.
enum WaitedPods {
    /// No podSelector: pods whose controller is a Job.
    Jobs,
    /// A podSelector; `None` when it is invalid: it then selects no pod.
    Selected(Option<PodSelector>),
}

/// A maintenance's `spec.waitForCompletion`, compiled.
struct CompiledWait {
    pods: WaitedPods,
    /// The timeout as a signed duration; `None`: no limit (or one past any instant).
    timeout: Option<SignedDuration>,
}

impl CompiledWait {
    /// Compiles `wait` of maintenance `name`; an invalid podSelector adds a warning.
    fn compile(name: &str, wait: &CompletionWait, warnings: &mut Vec<String>) -> Self {
        let pods = match &wait.pod_selector {
            None => WaitedPods::Jobs,
            Some(s) => {
                let compiled = PodSelector::compile(s);
                if compiled.is_none() {
                    warnings.push(format!(
                        "waitForCompletion.podSelector of maintenance {name} is invalid; it selects no pod"
                    ));
                }
                WaitedPods::Selected(compiled)
            }
        };
        CompiledWait { pods, timeout: wait.timeout.and_then(|t| SignedDuration::try_from(t).ok()) }
    }

    /// Whether the wait selects the pod: by its selector (or Job ownership without one), or
    /// by the pod's own annotation.
    fn selects(&self, pod: &PodView) -> bool {
        pod.wait_annotated
            || match &self.pods {
                WaitedPods::Jobs => pod.owned_by_job,
                WaitedPods::Selected(Some(s)) => s.matches(|k| pod.labels.get(k)),
                WaitedPods::Selected(None) => false,
            }
    }

    /// The wait's deadline on a node whose drain started at `start`: `None` while there is
    /// none (no timeout, or the drain has not started so the timeout does not run yet).
    fn deadline(&self, start: Option<Timestamp>) -> Option<Timestamp> {
        start?.checked_add(self.timeout?).ok()
    }
}

/// A wait still running on one node: its deadline there, if any, is ahead.
pub(super) struct NodeWait<'w> {
    wait: &'w CompiledWait,
    deadline: Option<Timestamp>,
}

/// Bit `id` set when selector `id` (< 64) matches the pod's labels: each selector is matched
/// once per pod instead of once per maintenance and target.
fn selector_bits(pod: &PodView, table: &SelectorTable) -> u64 {
    (0..table.len().min(64)).filter(|&id| table.matches(id as SelId, &pod.labels)).fold(0, |bits, id| bits | 1 << id)
}

/// A non-terminal pod on a selected node.
pub(super) struct PodState<'a> {
    pod: &'a PodView,
    role: Role,
    /// [`selector_bits`].
    selected: u64,
    /// Matched by its node's effective targets.
    targeted: bool,
}

impl<'a> PodState<'a> {
    /// The pod.
    pub(super) fn pod(&self) -> &'a PodView {
        self.pod
    }

    /// What the controller does with it.
    pub(super) fn role(&self) -> Role {
        self.role
    }

    /// Its node's effective targets match it.
    pub(super) fn targeted(&self) -> bool {
        self.targeted
    }

    /// The key the pod is matched by.
    fn key(&self) -> PodKey<'a> {
        let pod = self.pod;
        PodKey { pod_type: pod.pod_type, priority: pod.priority, labels: &pod.labels, selected: Some(self.selected) }
    }
}

/// A selected node.
pub(super) struct NodeState<'a> {
    name: &'a str,
    /// The maintenances selecting it (input order).
    maints: Vec<MaintIx>,
    /// Its non-terminal pods (input order).
    pods: Vec<PodState<'a>>,
    /// What it already reached.
    floor: Targets,
    /// Whether the draining taint is on it.
    tainted: bool,
    /// Why no new eviction may start on it now.
    gated: Option<&'a Gates>,
    /// When its drain started.
    drain_start: Option<Timestamp>,
    /// The earliest deadline ahead of a wait that selects one of its pods left to finish.
    wait_deadline: Option<Timestamp>,
    /// The effective targets.
    effective: Targets,
    /// The most advanced proposal (group-wise maximum of the proposals).
    join: Targets,
}

impl<'a> NodeState<'a> {
    /// The node's name.
    pub(super) fn name(&self) -> &'a str {
        self.name
    }

    /// The maintenances selecting it, in input order.
    pub(super) fn maints(&self) -> &[MaintIx] {
        &self.maints
    }

    /// Its non-terminal pods, in input order.
    pub(super) fn pods(&self) -> &[PodState<'a>] {
        &self.pods
    }

    /// Whether the draining taint is on it.
    pub(super) fn tainted(&self) -> bool {
        self.tainted
    }

    /// Why no new eviction may start on it now (SPEC 4.6).
    pub(super) fn gated(&self) -> Option<&'a Gates> {
        self.gated
    }

    /// Its drain may not start: gated before its drain started (no `drainStartTime`). Such
    /// a node is not Drained, even with nothing to evict (SPEC 4.6).
    pub(super) fn held_back(&self) -> bool {
        self.gated.is_some() && self.drain_start.is_none()
    }

    /// The earliest deadline ahead of a wait selecting one of its pods left to finish: when
    /// that pod may have to be evicted (SPEC 4.6).
    pub(super) fn wait_deadline(&self) -> Option<Timestamp> {
        self.wait_deadline
    }

    /// Its effective targets.
    pub(super) fn effective(&self) -> &Targets {
        &self.effective
    }

    /// The most advanced proposal on it (group-wise maximum of the proposals).
    pub(super) fn join(&self) -> &Targets {
        &self.join
    }

    /// Recomputes which of its pods its effective targets match.
    fn retarget(&mut self, table: &SelectorTable) {
        for p in &mut self.pods {
            p.targeted = self.effective.matches(&p.key(), table);
        }
    }
}

/// A maintenance.
pub(super) struct MaintState<'a> {
    input: &'a MaintenanceInput,
    /// Its nodes, sorted and unique.
    nodes: Vec<NodeIx>,
    /// The new cursor.
    cursor: usize,
    /// The proposal at the new cursor; `None` for an empty plan, which takes no part in
    /// combining.
    proposal: Option<Targets>,
    /// For each of its nodes in order, for each pod of that node in order, the first entry
    /// matching the pod (`u32::MAX` when none up to the cursor, or not responsible),
    /// flattened; `offsets` gives where each node starts.
    firsts: Vec<u32>,
    offsets: Vec<usize>,
}

impl<'a> MaintState<'a> {
    /// `metadata.name`.
    pub(super) fn name(&self) -> &'a str {
        &self.input.name
    }

    /// What orders maintenances by age (older first).
    pub(super) fn age(&self) -> (i64, &'a str) {
        (self.input.created, &self.input.name)
    }

    /// Its nodes, sorted and unique.
    pub(super) fn nodes(&self) -> &[NodeIx] {
        &self.nodes
    }

    /// The new cursor.
    pub(super) fn cursor(&self) -> usize {
        self.cursor
    }

    /// The proposal at the new cursor; `None` for an empty plan.
    pub(super) fn proposal(&self) -> Option<&Targets> {
        self.proposal.as_ref()
    }
}

/// One planning pass, indexed.
pub(super) struct Pass<'a> {
    options: PlannerOptions,
    table: SelectorTable,
    warnings: Vec<String>,
    /// Selected nodes, sorted by name.
    nodes: TiVec<NodeIx, NodeState<'a>>,
    /// Maintenances, in input order.
    maints: TiVec<MaintIx, MaintState<'a>>,
}

impl<'a> Pass<'a> {
    /// Indexes the input, advances every cursor and computes every node's targets.
    pub(super) fn new(input: &'a PlannerInput) -> Self {
        let selectors = input
            .maintenances
            .iter()
            .flat_map(|m| &m.drain_plan)
            .chain(input.nodes.iter().flat_map(|n| &n.reached))
            .filter_map(|e| e.pod_selector.as_ref());
        let (table, mut warnings) = SelectorTable::build(selectors);

        let mut names: Vec<&str> = input.maintenances.iter().flat_map(|m| m.nodes.iter().map(String::as_str)).collect();
        names.sort_unstable();
        names.dedup();
        let mut nodes: TiVec<NodeIx, NodeState<'a>> = names
            .into_iter()
            .map(|name| NodeState {
                name,
                maints: Vec::new(),
                pods: Vec::new(),
                floor: Targets::default(),
                tainted: false,
                gated: None,
                drain_start: None,
                wait_deadline: None,
                effective: Targets::default(),
                join: Targets::default(),
            })
            .collect();
        let index: NodeLookup<'a> = nodes.iter_enumerated().map(|(n, node)| (node.name, n)).collect();

        let maint_inputs: &TiSlice<MaintIx, MaintenanceInput> = TiSlice::from_ref(&input.maintenances);
        let maint_nodes: TiVec<MaintIx, Vec<NodeIx>> = maint_inputs
            .iter_enumerated()
            .map(|(m, mi)| {
                let mut ns: Vec<NodeIx> = mi.nodes.iter().filter_map(|n| index.get(n.as_str()).copied()).collect();
                ns.sort_unstable();
                ns.dedup();
                for &n in &ns {
                    nodes[n].maints.push(m);
                }
                ns
            })
            .collect();

        for ni in &input.nodes {
            if let Some(&n) = index.get(ni.name.as_str()) {
                let node = &mut nodes[n];
                node.floor = node.floor.max(&Targets::from_entries(&ni.reached, &table));
                node.tainted |= ni.draining_taint;
                node.gated = node.gated.or(ni.gated.as_ref());
                node.drain_start = node.drain_start.or(ni.drain_start);
            }
        }

        let waits: TiVec<MaintIx, Option<CompiledWait>> = maint_inputs
            .iter()
            .map(|mi| mi.wait_for_completion.as_ref().map(|w| CompiledWait::compile(&mi.name, w, &mut warnings)))
            .collect();
        let running: TiVec<NodeIx, Vec<NodeWait<'_>>> = nodes
            .iter()
            .map(|node| {
                let of_node = node.maints.iter().filter_map(|&m| waits[m].as_ref());
                let with_deadline = of_node.map(|wait| NodeWait { wait, deadline: wait.deadline(node.drain_start) });
                with_deadline.filter(|w| w.deadline.is_none_or(|d| input.now < d)).collect()
            })
            .collect();
        for pod in &input.pods {
            if let (false, Some(&n)) = (pod.terminal, index.get(&*pod.node_name)) {
                let rules = RuleInput { options: input.options, waits: &running[n] };
                let (role, selected) = (Role::of(pod, &rules), selector_bits(pod, &table));
                if role == Role::Wait {
                    let deadlines = running[n].iter().filter(|w| w.wait.selects(pod)).filter_map(|w| w.deadline);
                    let node = &mut nodes[n];
                    node.wait_deadline = deadlines.chain(node.wait_deadline).min();
                }
                nodes[n].pods.push(PodState { pod, role, selected, targeted: false });
            }
        }

        let maints = maint_inputs
            .iter()
            .zip(maint_nodes)
            .map(|(mi, ns)| advance_cursor(mi, ns, &nodes, &table, &mut warnings))
            .collect();
        let mut pass = Pass { options: input.options, table, warnings, nodes, maints };
        pass.combine();
        for node in &mut pass.nodes {
            node.retarget(&pass.table);
        }
        pass
    }

    /// The switches of the pass.
    pub(super) fn options(&self) -> PlannerOptions {
        self.options
    }

    /// The selectors of every plan and floor.
    pub(super) fn table(&self) -> &SelectorTable {
        &self.table
    }

    /// Problems with the input that did not stop planning.
    pub(super) fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The selected nodes, sorted by name.
    pub(super) fn nodes(&self) -> &TiSlice<NodeIx, NodeState<'a>> {
        &self.nodes
    }

    /// The maintenances, in input order.
    pub(super) fn maints(&self) -> &TiSlice<MaintIx, MaintState<'a>> {
        &self.maints
    }

    /// SPEC 4.3 "Combining": group-wise minimum of the proposals on each node, then group-wise
    /// maximum with the floor. Computed once per distinct set of maintenances.
    fn combine(&mut self) {
        let mut memo: HashMap<&[MaintIx], (Targets, Targets)> = HashMap::new();
        let mut combined = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let (min, join) = memo.entry(node.maints.as_slice()).or_insert_with(|| {
                let mut min: Option<Targets> = None;
                let mut join: Option<Targets> = None;
                for p in node.maints.iter().filter_map(|&m| self.maints[m].proposal.as_ref()) {
                    min = Some(min.map_or_else(|| p.clone(), |t| t.min(p)));
                    join = Some(join.map_or_else(|| p.clone(), |t| t.max(p)));
                }
                (min.unwrap_or_default(), join.unwrap_or_default())
            });
            let effective = if node.floor == Targets::default() { min.clone() } else { min.max(&node.floor) };
            combined.push((effective, join.clone()));
        }
        for (node, (effective, join)) in self.nodes.iter_mut().zip(combined) {
            node.effective = effective;
            node.join = join;
        }
    }

    /// Raises node `n`'s effective targets to at least `to` (breaking a standstill) and
    /// recomputes which of its pods they match.
    pub(super) fn raise(&mut self, n: NodeIx, to: &Targets) {
        let node = &mut self.nodes[n];
        node.effective = node.effective.max(to);
        node.retarget(&self.table);
    }
}

/// SPEC 4.3 "Advancing": the maintenance's cursor moves to the first entry, from the stored
/// cursor on, that a responsible pod on one of its nodes matches.
fn advance_cursor<'a>(
    mi: &'a MaintenanceInput,
    nodes_of: Vec<NodeIx>,
    nodes: &TiSlice<NodeIx, NodeState<'a>>,
    table: &SelectorTable,
    warnings: &mut Vec<String>,
) -> MaintState<'a> {
    let plan = CompiledPlan::compile(&mi.drain_plan, table);
    let stored = usize::try_from(mi.drain_plan_index).unwrap_or(0);
    let mut offsets = Vec::with_capacity(nodes_of.len());
    let mut at = 0;
    for &n in &nodes_of {
        offsets.push(at);
        at += nodes[n].pods.len();
    }
    let keys = nodes_of.iter().flat_map(|&n| &nodes[n].pods).map(|p| (p.role == Role::Evict).then(|| p.key()));
    let (cursor, firsts) = advance(&plan, stored, keys, table);
    if plan.len() == 0 {
        warnings.push(format!("maintenance {} has an empty drainPlan; it targets no pod", mi.name));
    }
    let proposal = (plan.len() > 0).then(|| plan.proposal(cursor));
    MaintState { input: mi, nodes: nodes_of, cursor, proposal, firsts, offsets }
}
