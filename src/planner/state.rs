//! The working state of one planning pass: input indexed by node, cursors, proposals and the
//! effective targets of every node (SPEC 4.3 "Targets", "Combining", "Advancing").
//!
//! Cost: O(pods x maintenances-per-node x plan length) for the cursors, O(nodes x
//! maintenances-per-node x groups) for the targets; nothing is quadratic in nodes or pods.

use super::input::{PlannerInput, PlannerOptions};
use super::pods::PodView;
use super::proposal::{CompiledPlan, advance};
use super::selectors::{SelId, SelectorTable};
use super::targets::{PodKey, Targets};
use crate::api::PodType;
use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// FNV-1a, for the node-name index that every pod is looked up in: several times faster than
/// the default SipHash on short names. Node names come from the API server, so hash flooding
/// is not a concern here.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// What the controller does with a pod on a selected node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// The controller is responsible for it: it is evicted when targeted and waited for.
    Evict,
    /// Static (mirror) pod: reported when targeted, never evicted.
    Static,
    /// DaemonSet pod under `--skip-daemonset-pods`: ignored.
    SkippedDaemonSet,
    /// DaemonSet pod tolerating the draining taint: reported when targeted, never evicted.
    ToleratesTaint,
}

impl Role {
    fn of(pod: &PodView, options: PlannerOptions) -> Role {
        match pod.pod_type {
            PodType::Static => Role::Static,
            PodType::DaemonSet if options.skip_daemonset_pods => Role::SkippedDaemonSet,
            PodType::DaemonSet if pod.tolerates_draining_taint => Role::ToleratesTaint,
            _ => Role::Evict,
        }
    }
}

/// Bit `id` set when selector `id` (< 64) matches the pod's labels: each selector is matched
/// once per pod instead of once per maintenance and target.
fn selector_bits(pod: &PodView, table: &SelectorTable) -> u64 {
    (0..table.len().min(64)).filter(|&id| table.matches(id as SelId, &pod.labels)).fold(0, |bits, id| bits | 1 << id)
}

/// One planning pass, indexed.
pub(super) struct Pass<'a> {
    pub(super) input: &'a PlannerInput,
    pub(super) table: SelectorTable,
    pub(super) warnings: Vec<String>,
    /// Selected node names, sorted; node indexes point here.
    pub(super) node_names: Vec<&'a str>,
    /// Per node: the maintenances selecting it (input order).
    pub(super) node_maints: Vec<Vec<usize>>,
    /// Per node: indexes into `input.pods` of its non-terminal pods.
    pub(super) node_pods: Vec<Vec<usize>>,
    /// Per input pod.
    pub(super) roles: Vec<Role>,
    /// Per input pod on a selected node: [`selector_bits`].
    selected: Vec<u64>,
    /// Per node: what it already reached.
    pub(super) floor: Vec<Targets>,
    /// Per node: whether the draining taint is on it.
    pub(super) tainted: Vec<bool>,
    /// Per maintenance: its node indexes, sorted and unique.
    pub(super) maint_nodes: Vec<Vec<usize>>,
    /// Per maintenance: the new cursor.
    pub(super) cursor: Vec<usize>,
    /// Per maintenance: the proposal at the new cursor; `None` for an empty plan, which takes
    /// no part in combining.
    pub(super) proposal: Vec<Option<Targets>>,
    /// Per maintenance: for each of its nodes in order, for each pod of that node in order, the
    /// first entry matching the pod (`u32::MAX` when none up to the cursor, or not
    /// responsible), flattened; `offsets` gives where each node starts.
    firsts: Vec<Vec<u32>>,
    offsets: Vec<Vec<usize>>,
    /// Per node: the effective targets.
    pub(super) effective: Vec<Targets>,
    /// Per node: the most advanced proposal (group-wise maximum of the proposals).
    pub(super) join: Vec<Targets>,
    /// Per input pod: matched by its node's effective targets.
    pub(super) targeted: Vec<bool>,
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
        let (table, warnings) = SelectorTable::build(selectors);

        let mut node_names: Vec<&str> =
            input.maintenances.iter().flat_map(|m| m.nodes.iter().map(String::as_str)).collect();
        node_names.sort_unstable();
        node_names.dedup();
        let index: HashMap<&str, usize, BuildHasherDefault<Fnv>> =
            node_names.iter().enumerate().map(|(i, n)| (*n, i)).collect();

        let mut node_maints = vec![Vec::new(); node_names.len()];
        let maint_nodes: Vec<Vec<usize>> = input
            .maintenances
            .iter()
            .enumerate()
            .map(|(m, mi)| {
                let mut ns: Vec<usize> = mi.nodes.iter().filter_map(|n| index.get(n.as_str()).copied()).collect();
                ns.sort_unstable();
                ns.dedup();
                for &n in &ns {
                    node_maints[n].push(m);
                }
                ns
            })
            .collect();

        let mut floor = vec![Targets::default(); node_names.len()];
        let mut tainted = vec![false; node_names.len()];
        for ni in &input.nodes {
            if let Some(&n) = index.get(ni.name.as_str()) {
                floor[n] = floor[n].max(&Targets::from_entries(&ni.reached, &table));
                tainted[n] |= ni.draining_taint;
            }
        }

        let mut node_pods = vec![Vec::new(); node_names.len()];
        for (i, pod) in input.pods.iter().enumerate() {
            if let (false, Some(&n)) = (pod.terminal, index.get(&*pod.node_name)) {
                node_pods[n].push(i);
            }
        }
        let roles = input.pods.iter().map(|p| Role::of(p, input.options)).collect();
        let mut selected = vec![0; input.pods.len()];
        for &i in node_pods.iter().flatten() {
            selected[i] = selector_bits(&input.pods[i], &table);
        }

        let mut pass = Pass {
            input,
            table,
            warnings,
            node_names,
            node_maints,
            node_pods,
            roles,
            selected,
            floor,
            tainted,
            maint_nodes,
            cursor: Vec::new(),
            proposal: Vec::new(),
            firsts: Vec::new(),
            offsets: Vec::new(),
            effective: Vec::new(),
            join: Vec::new(),
            targeted: vec![false; input.pods.len()],
        };
        pass.advance_cursors();
        pass.combine();
        for n in 0..pass.node_names.len() {
            pass.retarget(n);
        }
        pass
    }

    /// The key pod `i` is matched by.
    fn key(&self, i: usize) -> PodKey<'a> {
        let pod = &self.input.pods[i];
        PodKey {
            pod_type: pod.pod_type,
            priority: pod.priority,
            labels: &pod.labels,
            selected: self.selected.get(i).copied(),
        }
    }

    /// SPEC 4.3 "Advancing": every cursor moves to the first entry, from the stored cursor on,
    /// that a responsible pod on one of the maintenance's nodes matches.
    fn advance_cursors(&mut self) {
        for (m, mi) in self.input.maintenances.iter().enumerate() {
            let plan = CompiledPlan::compile(&mi.drain_plan, &self.table);
            let stored = usize::try_from(mi.drain_plan_index).unwrap_or(0);
            let mut offsets = Vec::with_capacity(self.maint_nodes[m].len());
            let mut at = 0;
            for &n in &self.maint_nodes[m] {
                offsets.push(at);
                at += self.node_pods[n].len();
            }
            let keys = self.maint_nodes[m]
                .iter()
                .flat_map(|&n| &self.node_pods[n])
                .map(|&i| (self.roles[i] == Role::Evict).then(|| self.key(i)));
            let (cursor, firsts) = advance(&plan, stored, keys, &self.table);
            if plan.len() == 0 {
                self.warnings.push(format!("maintenance {} has an empty drainPlan; it targets no pod", mi.name));
            }
            self.proposal.push((plan.len() > 0).then(|| plan.proposal(cursor)));
            self.cursor.push(cursor);
            self.firsts.push(firsts);
            self.offsets.push(offsets);
        }
    }

    /// SPEC 4.3 "Combining": group-wise minimum of the proposals on each node, then group-wise
    /// maximum with the floor. Computed once per distinct set of maintenances.
    fn combine(&mut self) {
        let mut memo: HashMap<&[usize], (Targets, Targets)> = HashMap::new();
        let mut effective = Vec::with_capacity(self.node_names.len());
        let mut joins = Vec::with_capacity(self.node_names.len());
        for (n, maints) in self.node_maints.iter().enumerate() {
            let (min, join) = memo.entry(maints.as_slice()).or_insert_with(|| {
                let mut min: Option<Targets> = None;
                let mut join: Option<Targets> = None;
                for p in maints.iter().filter_map(|&m| self.proposal[m].as_ref()) {
                    min = Some(min.map_or_else(|| p.clone(), |t| t.min(p)));
                    join = Some(join.map_or_else(|| p.clone(), |t| t.max(p)));
                }
                (min.unwrap_or_default(), join.unwrap_or_default())
            });
            effective.push(if self.floor[n] == Targets::default() { min.clone() } else { min.max(&self.floor[n]) });
            joins.push(join.clone());
        }
        self.effective = effective;
        self.join = joins;
    }

    /// Groups nodes with the same maintenances and the same effective targets: everything
    /// about targets (limiters, fast-forwards, reached targets) is the same for all of them.
    /// Returns the class of each node and one node of each class.
    pub(super) fn classes(&self) -> (Vec<usize>, Vec<usize>) {
        let mut ids: HashMap<(&[usize], &Targets), usize> = HashMap::new();
        let mut reps = Vec::new();
        let class_of = (0..self.node_names.len())
            .map(|n| {
                *ids.entry((self.node_maints[n].as_slice(), &self.effective[n])).or_insert_with(|| {
                    reps.push(n);
                    reps.len() - 1
                })
            })
            .collect();
        (class_of, reps)
    }

    /// Recomputes which pods of node `n` its effective targets match.
    pub(super) fn retarget(&mut self, n: usize) {
        for &i in &self.node_pods[n] {
            self.targeted[i] = self.effective[n].matches(&self.key(i), &self.table);
        }
    }

    /// The first-match values of maintenance `m`'s pods on its `pos`-th node.
    fn firsts_at(&self, m: usize, pos: usize) -> &[u32] {
        let n = self.maint_nodes[m][pos];
        let start = self.offsets[m][pos];
        self.firsts[m].get(start..start + self.node_pods[n].len()).unwrap_or_default()
    }

    /// Pods of maintenance `m` on its `pos`-th node that match its proposal, with whether each
    /// is targeted by the node's effective targets.
    fn matching_at(&self, m: usize, pos: usize) -> impl Iterator<Item = bool> + '_ {
        let n = self.maint_nodes[m][pos];
        let cursor = u32::try_from(self.cursor[m]).unwrap_or(u32::MAX);
        self.firsts_at(m, pos)
            .iter()
            .zip(&self.node_pods[n])
            .filter(move |(f, _)| **f <= cursor)
            .map(|(_, &i)| self.targeted[i])
    }

    /// Some responsible pod on the maintenance's `pos`-th node matches its proposal.
    pub(super) fn has_matching(&self, m: usize, pos: usize) -> bool {
        self.matching_at(m, pos).next().is_some()
    }

    /// Some responsible pod on the maintenance's `pos`-th node matches its proposal but is
    /// not targeted there: another maintenance holds that node back.
    pub(super) fn held(&self, m: usize, pos: usize) -> bool {
        self.matching_at(m, pos).any(|t| !t)
    }

    /// The maintenance still has pods matching its proposal: its cursor cannot advance.
    pub(super) fn stuck(&self, m: usize) -> bool {
        (0..self.maint_nodes[m].len()).any(|pos| self.has_matching(m, pos))
    }

    /// Some responsible pod on node `n` is targeted: the node drains.
    pub(super) fn busy(&self, n: usize) -> bool {
        self.node_pods[n].iter().any(|&i| self.targeted[i] && self.roles[i] == Role::Evict)
    }

    /// The maintenances on node `n` whose proposals hold it below `reference` (SPEC 4.3
    /// "Messages"): below `reference` in a group where the node's targets are below it too.
    pub(super) fn limiters(&self, n: usize, reference: &Targets) -> BTreeSet<usize> {
        self.node_maints[n]
            .iter()
            .copied()
            .filter(|&l| self.proposal[l].as_ref().is_some_and(|p| p.holds_below(reference, &self.effective[n])))
            .collect()
    }
}
