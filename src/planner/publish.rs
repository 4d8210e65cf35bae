//! Turning a planned pass into node and maintenance statuses, evictions and fast-forward
//! notices (SPEC 4.3 "Messages", counts, `reachedDrainTargets`, `Drained`).

use super::messages::{DRAINED, PLAN_COMPLETE, draining, waiting};
use super::output::{
    BlockedCause, BlockedPod, DrainDecision, FastForward, FastForwardCause, MaintenancePlan, NodePlan, PodRef,
};
use super::state::{Pass, Role};
use super::targets::Targets;
use crate::api::PodType;
use std::collections::{BTreeMap, BTreeSet, HashMap};

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Node classes (same maintenances, same targets) and the limiters computed per class.
struct Classes<'p, 'a> {
    pass: &'p Pass<'a>,
    class_of: Vec<usize>,
    reps: Vec<usize>,
    /// (class, maintenance) -> the maintenances holding that class below its proposal.
    limiters: HashMap<(usize, usize), BTreeSet<usize>>,
}

impl<'p, 'a> Classes<'p, 'a> {
    fn new(pass: &'p Pass<'a>) -> Self {
        let (class_of, reps) = pass.classes();
        Classes { pass, class_of, reps, limiters: HashMap::new() }
    }

    /// The maintenances holding node `n` below maintenance `m`'s proposal.
    fn below_proposal(&mut self, n: usize, m: usize) -> &BTreeSet<usize> {
        let pass = self.pass;
        let class = self.class_of[n];
        self.limiters.entry((class, m)).or_insert_with(|| match pass.proposal[m].as_ref() {
            Some(p) => pass.limiters(n, p),
            None => BTreeSet::new(),
        })
    }

    /// The distinct classes of some nodes, each with one of its nodes.
    fn of_nodes(&self, nodes: &[usize]) -> BTreeMap<usize, usize> {
        nodes.iter().map(|&n| (self.class_of[n], n)).collect()
    }
}

/// Builds the output of a pass; `raised` holds the (node, maintenance) pairs where a
/// standstill was broken.
pub(super) fn publish(pass: &Pass<'_>, raised: &BTreeSet<(usize, usize)>) -> DrainDecision {
    let mut classes = Classes::new(pass);
    let stuck: Vec<bool> = (0..pass.maint_nodes.len()).map(|m| pass.stuck(m)).collect();
    let waits: Vec<BTreeSet<usize>> = (0..pass.maint_nodes.len())
        .map(|m| if stuck[m] { waits_for(&mut classes, m) } else { BTreeSet::new() })
        .collect();
    let join_limiters: Vec<BTreeSet<usize>> = classes.reps.iter().map(|&n| pass.limiters(n, &pass.join[n])).collect();
    let nodes: Vec<NodePlan> = (0..pass.node_names.len())
        .map(|n| node_plan(pass, n, &join_limiters[classes.class_of[n]], &stuck, &waits))
        .collect();

    let below: Vec<Vec<usize>> = classes
        .reps
        .iter()
        .map(|&n| {
            let below = |&&m: &&usize| pass.proposal[m].as_ref().is_some_and(|p| p.is_below(&pass.effective[n]));
            pass.node_maints[n].iter().filter(below).copied().collect()
        })
        .collect();
    let mut fast_forwards = BTreeSet::new();
    for n in 0..pass.node_names.len() {
        for &m in &below[classes.class_of[n]] {
            let conflict = raised.iter().any(|&(rn, w)| rn == n && w != m);
            fast_forwards.insert(FastForward {
                maintenance: pass.input.maintenances[m].name.clone(),
                node: pass.node_names[n].to_string(),
                cause: if conflict { FastForwardCause::ConflictingPlans } else { FastForwardCause::NodeAlreadyReached },
            });
        }
    }

    let maintenances = (0..pass.maint_nodes.len())
        .map(|m| maintenance_plan(&mut classes, m, &nodes, stuck[m], &waits[m], &fast_forwards))
        .collect();
    DrainDecision {
        nodes,
        maintenances,
        fast_forwards: fast_forwards.into_iter().collect(),
        warnings: pass.warnings.clone(),
    }
}

/// What a stuck maintenance waits for (SPEC 4.3 "Messages"): on each node where its pods
/// are held back, the maintenances holding that node below its proposal; itself where its
/// pods are all targeted (it is draining there).
fn waits_for(classes: &mut Classes<'_, '_>, m: usize) -> BTreeSet<usize> {
    let pass = classes.pass;
    let mut names = BTreeSet::new();
    for (pos, &n) in pass.maint_nodes[m].iter().enumerate() {
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

fn names<'a>(pass: &'a Pass<'_>, ms: impl IntoIterator<Item = usize>) -> impl Iterator<Item = &'a str> {
    ms.into_iter().map(|m| pass.input.maintenances[m].name.as_str())
}

fn pod_ref(pass: &Pass<'_>, i: usize) -> PodRef {
    let p = &pass.input.pods[i];
    PodRef { namespace: p.namespace.clone(), name: p.name.clone(), uid: p.uid.clone() }
}

fn node_plan(
    pass: &Pass<'_>,
    n: usize,
    join_limiters: &BTreeSet<usize>,
    stuck: &[bool],
    waits: &[BTreeSet<usize>],
) -> NodePlan {
    let skip_ds = pass.input.options.skip_daemonset_pods;
    let (mut pending, mut active, mut drained) = (0usize, 0usize, true);
    let mut evict: Vec<usize> = Vec::new();
    let mut blocked = Vec::new();
    for &i in &pass.node_pods[n] {
        let pod = &pass.input.pods[i];
        let role = pass.roles[i];
        drained &= role != Role::Evict;
        if !pass.targeted[i] {
            continue;
        }
        match role {
            Role::Evict if pod.eviction_in_progress => active += 1,
            Role::Evict => {
                pending += 1;
                if pod.pod_type != PodType::DaemonSet || pass.tainted[n] {
                    evict.push(i);
                }
            }
            Role::Static => blocked.push(BlockedPod { pod: pod_ref(pass, i), cause: BlockedCause::StaticPod }),
            Role::ToleratesTaint => {
                blocked.push(BlockedPod { pod: pod_ref(pass, i), cause: BlockedCause::ToleratesDrainingTaint })
            }
            Role::SkippedDaemonSet => {}
        }
    }
    let pods = &pass.input.pods;
    evict.sort_by(|&a, &b| {
        (pods[a].priority, &pods[a].namespace, &pods[a].name).cmp(&(
            pods[b].priority,
            &pods[b].namespace,
            &pods[b].name,
        ))
    });
    blocked.sort_by(|a, b| a.pod.cmp(&b.pod));

    let drain_message = if pending + active > 0 {
        draining(names(pass, join_limiters.iter().copied()))
    } else {
        let wait: BTreeSet<usize> =
            pass.node_maints[n].iter().filter(|&&m| stuck[m]).flat_map(|&m| waits[m].iter().copied()).collect();
        if !wait.is_empty() {
            waiting(names(pass, wait))
        } else if drained {
            DRAINED.to_string()
        } else {
            PLAN_COMPLETE.to_string()
        }
    };
    let mut maintenances: Vec<String> = names(pass, pass.node_maints[n].iter().copied()).map(String::from).collect();
    maintenances.sort();
    NodePlan {
        name: pass.node_names[n].to_string(),
        maintenances,
        drain_targets: pass.effective[n].to_entries(&pass.table),
        drain_message,
        pods_pending_eviction_request: count(pending),
        active_eviction_requests: count(active),
        evict: evict.into_iter().map(|i| pod_ref(pass, i)).collect(),
        blocked,
        needs_daemonset_taint: !skip_ds && pass.effective[n].has_type(PodType::DaemonSet),
        drained,
    }
}

fn maintenance_plan(
    classes: &mut Classes<'_, '_>,
    m: usize,
    nodes: &[NodePlan],
    stuck: bool,
    waits: &BTreeSet<usize>,
    fast_forwards: &BTreeSet<FastForward>,
) -> MaintenancePlan {
    let pass = classes.pass;
    let mi = &pass.input.maintenances[m];
    let mine = &pass.maint_nodes[m];
    let mine_by_class = classes.of_nodes(mine);
    let reached = mine_by_class
        .values()
        .map(|&n| &pass.effective[n])
        .fold(None::<Targets>, |acc, t| Some(acc.map_or_else(|| t.clone(), |a| a.min(t))))
        .unwrap_or_default();
    let pending = mine.iter().fold(0i32, |s, &n| s.saturating_add(nodes[n].pods_pending_eviction_request));
    let active = mine.iter().fold(0i32, |s, &n| s.saturating_add(nodes[n].active_eviction_requests));
    let drained = mine.iter().all(|&n| nodes[n].drained);
    let draining_somewhere =
        mine.iter().any(|&n| nodes[n].pods_pending_eviction_request > 0 || nodes[n].active_eviction_requests > 0);
    let drain_message = if draining_somewhere {
        let mut limiters = BTreeSet::new();
        for &n in mine_by_class.values() {
            limiters.extend(classes.below_proposal(n, m).iter().copied().filter(|&l| l != m));
        }
        draining(names(pass, limiters))
    } else if stuck && !waits.is_empty() {
        waiting(names(pass, waits.iter().copied()))
    } else if drained {
        DRAINED.to_string()
    } else {
        PLAN_COMPLETE.to_string()
    };
    MaintenancePlan {
        name: mi.name.clone(),
        drain_plan_index: i32::try_from(pass.cursor[m]).unwrap_or(i32::MAX),
        reached_drain_targets: reached.to_entries(&pass.table),
        drain_message,
        pods_pending_eviction_request: pending,
        active_eviction_requests: active,
        drained,
        fast_forwarded_on: fast_forwards
            .iter()
            .filter(|f| f.maintenance == mi.name)
            .map(|f| f.node.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
    }
}
