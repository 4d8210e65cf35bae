//! Turning a planned pass into node and maintenance statuses, evictions and fast-forward
//! notices (SPEC 4.3 "Messages", counts, `reachedDrainTargets`, `Drained`).

use super::budget::Slot;
use super::index::{ClassIx, MaintIx, NodeIx};
use super::messages::ReasonFacts;
use super::output::{
    BlockedPod, DrainDecision, DrainReason, EvictionRisk, FastForward, FastForwardCause, MaintenancePlan, NodePlan,
    PodRef, RiskyPod,
};
use super::pods::PodView;
use super::state::{Pass, Role};
use super::targets::Targets;
use super::wait::Gates;
use crate::api::PodType;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use typed_index_collections::{TiSlice, TiVec};

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Node classes (same maintenances, same targets: everything about targets, i.e. limiters,
/// fast-forwards and reached targets, is the same for all their nodes) and the limiters
/// computed per class.
struct Classes<'p, 'a> {
    pass: &'p Pass<'a>,
    class_of: TiVec<NodeIx, ClassIx>,
    /// One node of each class.
    reps: TiVec<ClassIx, NodeIx>,
    /// (class, maintenance) -> the maintenances holding that class below its proposal.
    limiters: HashMap<(ClassIx, MaintIx), BTreeSet<MaintIx>>,
}

impl<'p, 'a> Classes<'p, 'a> {
    fn new(pass: &'p Pass<'a>) -> Self {
        let mut ids: HashMap<(&[MaintIx], &Targets), ClassIx> = HashMap::new();
        let mut reps: TiVec<ClassIx, NodeIx> = TiVec::new();
        let class_of = pass
            .nodes()
            .iter_enumerated()
            .map(|(n, node)| *ids.entry((node.maints(), node.effective())).or_insert_with(|| reps.push_and_get_key(n)))
            .collect();
        Classes { pass, class_of, reps, limiters: HashMap::new() }
    }

    /// The maintenances holding node `n` below maintenance `m`'s proposal.
    fn below_proposal(&mut self, n: NodeIx, m: MaintIx) -> &BTreeSet<MaintIx> {
        let pass = self.pass;
        let class = self.class_of[n];
        self.limiters.entry((class, m)).or_insert_with(|| match pass.maints()[m].proposal() {
            Some(p) => limiters(pass, n, p),
            None => BTreeSet::new(),
        })
    }

    /// The distinct classes of some nodes, each with one of its nodes.
    fn of_nodes(&self, nodes: &[NodeIx]) -> BTreeMap<ClassIx, NodeIx> {
        nodes.iter().map(|&n| (self.class_of[n], n)).collect()
    }
}

/// The maintenances on node `n` whose proposals hold it below `reference` (SPEC 4.3
/// "Messages"): below `reference` in a group where the node's targets are below it too.
fn limiters(pass: &Pass<'_>, n: NodeIx, reference: &Targets) -> BTreeSet<MaintIx> {
    let node = &pass.nodes()[n];
    let holds = |&l: &MaintIx| pass.maints()[l].proposal().is_some_and(|p| p.holds_below(reference, node.effective()));
    node.maints().iter().copied().filter(holds).collect()
}

/// Builds the output of a pass; `raised` holds the (node, maintenance) pairs where a
/// standstill was broken, `slots` each node's drain slot.
pub(super) fn publish(
    pass: &Pass<'_>,
    raised: &BTreeSet<(NodeIx, MaintIx)>,
    slots: TiVec<NodeIx, Slot>,
) -> DrainDecision {
    let mut classes = Classes::new(pass);
    let stuck: TiVec<MaintIx, bool> = pass.maints().keys().map(|m| pass.stuck(m)).collect();
    let waits: TiVec<MaintIx, BTreeSet<MaintIx>> =
        pass.maints().keys().map(|m| if stuck[m] { waits_for(&mut classes, m) } else { BTreeSet::new() }).collect();
    let join_limiters: TiVec<ClassIx, BTreeSet<MaintIx>> =
        classes.reps.iter().map(|&n| limiters(pass, n, pass.nodes()[n].join())).collect();
    let nodes: TiVec<NodeIx, NodePlan> = pass
        .nodes()
        .keys()
        .map(|n| node_plan(pass, n, &join_limiters[classes.class_of[n]], &stuck, &waits, &slots[n]))
        .collect();

    let below: TiVec<ClassIx, Vec<MaintIx>> = classes
        .reps
        .iter()
        .map(|&n| {
            let node = &pass.nodes()[n];
            let below = |&&m: &&MaintIx| pass.maints()[m].proposal().is_some_and(|p| p.is_below(node.effective()));
            node.maints().iter().filter(below).copied().collect()
        })
        .collect();
    let mut fast_forwards = BTreeSet::new();
    for (n, node) in pass.nodes().iter_enumerated() {
        for &m in &below[classes.class_of[n]] {
            let conflict = raised.iter().any(|&(rn, w)| rn == n && w != m);
            fast_forwards.insert(FastForward {
                maintenance: pass.maints()[m].name().to_string(),
                node: node.name().to_string(),
                cause: if conflict { FastForwardCause::ConflictingPlans } else { FastForwardCause::NodeAlreadyReached },
            });
        }
    }

    let maintenances = pass
        .maints()
        .keys()
        .map(|m| maintenance_plan(&mut classes, m, &nodes, &slots, stuck[m], &waits[m], &fast_forwards))
        .collect();
    DrainDecision {
        wait_deadline: nodes.iter().filter_map(|n| n.wait_deadline).min(),
        nodes: nodes.into(),
        maintenances,
        fast_forwards: fast_forwards.into_iter().collect(),
        warnings: pass.warnings().to_vec(),
        by_name: Default::default(),
    }
}

/// What a stuck maintenance waits for (SPEC 4.3 "Messages"): on each node where its pods
/// are held back, the maintenances holding that node below its proposal; itself where its
/// pods are all targeted (it is draining there).
fn waits_for(classes: &mut Classes<'_, '_>, m: MaintIx) -> BTreeSet<MaintIx> {
    let pass = classes.pass;
    let mut names = BTreeSet::new();
    for (pos, &n) in pass.maints()[m].nodes().iter().enumerate() {
        if !pass.has_matching(m, pos) {
            continue;
        }
        let limiters = if pass.held(m, pos) { classes.below_proposal(n, m).clone() } else { BTreeSet::new() };
        if limiters.is_empty() {
            names.insert(m);
        } else {
            names.extend(limiters);
        }
    }
    names
}

fn names<'a>(pass: &Pass<'a>, ms: impl IntoIterator<Item = MaintIx>) -> impl Iterator<Item = &'a str> {
    ms.into_iter().map(|m| pass.maints()[m].name())
}

/// Sorted and without repeats, as the messages list them.
fn sorted<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names.into_iter().collect::<BTreeSet<_>>().into_iter().map(String::from).collect()
}

fn pod_ref(p: &PodView) -> PodRef {
    PodRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() }
}

/// What is lost when `pod` is evicted.
fn risks(pod: &PodView) -> impl Iterator<Item = EvictionRisk> {
    let unmanaged = pod.unmanaged && pod.pod_type == PodType::Default;
    [(unmanaged, EvictionRisk::Unmanaged), (pod.emptydir, EvictionRisk::EmptyDir)]
        .into_iter()
        .filter_map(|(at_risk, risk)| at_risk.then_some(risk))
}

fn node_plan(
    pass: &Pass<'_>,
    n: NodeIx,
    join_limiters: &BTreeSet<MaintIx>,
    stuck: &TiSlice<MaintIx, bool>,
    waits: &TiSlice<MaintIx, BTreeSet<MaintIx>>,
    slot: &Slot,
) -> NodePlan {
    let node = &pass.nodes()[n];
    let skip_ds = pass.options().skip_daemonset_pods;
    let (mut pending, mut active, mut drained) = (0usize, 0usize, true);
    let mut evict: Vec<&PodView> = Vec::new();
    let mut blocked = Vec::new();
    let mut left_to_finish = Vec::new();
    // A node whose drain may not start is not Drained, even with nothing to evict: the
    // gate's opening starts it (SPEC 4.6).
    drained &= !node.held_back();
    for p in node.pods() {
        let (pod, role) = (p.pod(), p.role());
        drained &= !role.holds_drain();
        if !p.targeted() {
            continue;
        }
        match role {
            Role::Evict if pod.eviction_in_progress => active += 1,
            Role::Evict => {
                pending += 1;
                if pod.pod_type != PodType::DaemonSet || node.tainted() {
                    evict.push(pod);
                }
            }
            Role::Report(cause) => blocked.push(BlockedPod { pod: pod_ref(pod), cause }),
            Role::Wait => left_to_finish.push(pod_ref(pod)),
            Role::SkippedDaemonSet => {}
        }
    }
    let waits_for_slot = matches!(slot, Slot::Waiting(_) | Slot::Gated);
    if waits_for_slot {
        evict.clear();
    }
    evict.sort_by(|a, b| (a.priority, &a.namespace, &a.name).cmp(&(b.priority, &b.namespace, &b.name)));
    blocked.sort_by(|a, b| a.pod.cmp(&b.pod));
    left_to_finish.sort();
    let mut at_risk: Vec<RiskyPod> =
        evict.iter().flat_map(|&pod| risks(pod).map(|risk| RiskyPod { pod: pod_ref(pod), risk })).collect();
    at_risk.sort();

    let waits_on: BTreeSet<MaintIx> =
        node.maints().iter().filter(|&&m| stuck[m]).flat_map(|&m| waits[m].iter().copied()).collect();
    let reason = DrainReason::of(ReasonFacts {
        draining: (!waits_for_slot && pending + active > 0).then(|| sorted(names(pass, join_limiters.iter().copied()))),
        gated: node.gated().filter(|_| !drained).cloned(),
        full_budgets: if let Slot::Waiting(budget) = slot { vec![budget.clone()] } else { Vec::new() },
        waiting_for: sorted(names(pass, waits_on)),
        drained,
        blocked: blocked.iter().any(|b| b.cause.holds_drain()),
        completing: !left_to_finish.is_empty(),
    });
    let mut maintenances: Vec<String> = names(pass, node.maints().iter().copied()).map(String::from).collect();
    maintenances.sort();
    NodePlan {
        name: node.name().to_string(),
        maintenances,
        drain_targets: node.effective().to_entries(pass.table()),
        drain_message: reason.message(),
        reason,
        pods_pending_eviction_request: count(pending),
        active_eviction_requests: count(active),
        evict: evict.into_iter().map(pod_ref).collect(),
        blocked,
        waiting_for_completion: left_to_finish,
        wait_deadline: node.wait_deadline(),
        at_risk,
        waiting_for_slot: waits_for_slot,
        needs_daemonset_taint: !skip_ds && !waits_for_slot && node.effective().has_type(PodType::DaemonSet),
        waiting_for_gate: node.gated().is_some() && !drained,
        drained,
    }
}

fn maintenance_plan(
    classes: &mut Classes<'_, '_>,
    m: MaintIx,
    nodes: &TiSlice<NodeIx, NodePlan>,
    slots: &TiSlice<NodeIx, Slot>,
    stuck: bool,
    waits: &BTreeSet<MaintIx>,
    fast_forwards: &BTreeSet<FastForward>,
) -> MaintenancePlan {
    let pass = classes.pass;
    let maint = &pass.maints()[m];
    let mine = maint.nodes();
    let mine_by_class = classes.of_nodes(mine);
    let reached = mine_by_class
        .values()
        .map(|&n| pass.nodes()[n].effective())
        .fold(None::<Targets>, |acc, t| Some(acc.map_or_else(|| t.clone(), |a| a.min(t))))
        .unwrap_or_default();
    let pending = mine.iter().fold(0i32, |s, &n| s.saturating_add(nodes[n].pods_pending_eviction_request));
    let active = mine.iter().fold(0i32, |s, &n| s.saturating_add(nodes[n].active_eviction_requests));
    let left_to_finish = mine.iter().fold(0i32, |s, &n| s.saturating_add(count(nodes[n].waiting_for_completion.len())));
    let drained = mine.iter().all(|&n| nodes[n].drained);
    let draining_somewhere = mine.iter().any(|&n| {
        !nodes[n].waiting_for_slot
            && (nodes[n].pods_pending_eviction_request > 0 || nodes[n].active_eviction_requests > 0)
    });
    let mut gated: Option<Gates> = None;
    for g in mine.iter().filter(|&&n| nodes[n].waiting_for_gate).filter_map(|&n| pass.nodes()[n].gated()) {
        gated.get_or_insert_default().merge(g);
    }
    let draining = draining_somewhere.then(|| {
        let mut limiters = BTreeSet::new();
        for &n in mine_by_class.values() {
            limiters.extend(classes.below_proposal(n, m).iter().copied().filter(|&l| l != m));
        }
        sorted(names(pass, limiters))
    });
    let reason = DrainReason::of(ReasonFacts {
        draining,
        gated,
        full_budgets: sorted(mine.iter().filter_map(|&n| match &slots[n] {
            Slot::Waiting(budget) => Some(budget.as_str()),
            _ => None,
        })),
        waiting_for: if stuck { sorted(names(pass, waits.iter().copied())) } else { Vec::new() },
        drained,
        blocked: mine.iter().any(|&n| nodes[n].reason == DrainReason::Blocked),
        completing: left_to_finish > 0,
    });
    let name = maint.name();
    MaintenancePlan {
        name: name.to_string(),
        drain_plan_index: i32::try_from(maint.cursor()).unwrap_or(i32::MAX),
        reached_drain_targets: reached.to_entries(pass.table()),
        drain_message: reason.message(),
        reason,
        pods_pending_eviction_request: pending,
        active_eviction_requests: active,
        pods_waiting_for_completion: left_to_finish,
        drained,
        fast_forwarded_on: fast_forwards
            .iter()
            .filter(|f| f.maintenance == name)
            .map(|f| f.node.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    }
}
