//! The drain preview of `review` (issue 16): what a maintenance's Drain stage will do to the
//! workloads, step by step, simulated with the controller's own planner ([`planner::plan`],
//! SPEC 4.3); no second implementation of the drain rules. Pure: plain data in, plain data
//! out, no I/O (the caller reads the cluster or a dump).
//!
//! # How the drain is simulated
//! The reviewed maintenance is put in stage Drain with its cursor at entry 0, next to the
//! other Drain maintenances of the view (with their stored cursors) and each node's persisted
//! floor (`reached` targets, draining taint). Then, pass after pass:
//! 1. [`planner::plan`] runs over that input, as the controller's planning pass does;
//! 2. the pods in each node's `evict` list are evicted, in the planner's order, as the
//!    Eviction API would: an eviction is refused when a PodDisruptionBudget covering the pod
//!    (same namespace, selector matching its labels) has no disruption left; each accepted
//!    eviction decrements `disruptionsAllowed` of every PDB covering the pod. Evicted pods
//!    disappear (their replacements land elsewhere: every selected node is cordoned);
//!    refused ones stay and the step waits;
//! 3. nodes whose targets reached podType DaemonSet get the draining taint, and the new
//!    cursors (`drain_plan_index`) and node targets become the next pass's input (what the
//!    controller persists).
//!
//! A pass that changes nothing ends the simulation. When evictions were refused only by
//! budgets this simulation used up, the budgets are restored to their starting values (the
//! evicted pods' replacements became ready elsewhere and the disruption controller gave the
//! budget back) and the simulation goes on; otherwise the drain is **stuck** at the current
//! step (a PDB already at 0, other maintenances it waits for, pods the plan never reaches).
//! Pods already terminating are assumed gone.
//!
//! # Owners
//! Evicted pods are grouped by namespace and owner: the controller ownerReference, with a
//! ReplicaSet resolved to its Deployment by the ReplicaSet's own controller ownerReference
//! when ReplicaSets are known ([`OwnerResolution::ReplicaSets`]), else by the
//! `pod-template-hash` naming convention ([`OwnerResolution::PodTemplateHash`]: a ReplicaSet
//! named `<deployment>-<hash>` whose pods carry the label `pod-template-hash=<hash>`).

use crate::api::{DrainPlanEntry, PodType};
use crate::planner::{self, BlockedCause, MaintenanceInput, NodeInput, PlannerInput, PlannerOptions, PodView};
use crate::selector::{compile_label_selector, labels_match};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::Selector;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A pod's owner, as a person names the workload.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Owner {
    /// `Deployment`, `StatefulSet`, `Job`, `DaemonSet`, `ReplicaSet`, `Node` (a mirror pod) or
    /// any other controller kind; `Pod` for a pod without a controller (a bare pod).
    pub kind: String,
    /// The owner's name; the pod's own name for a bare pod.
    pub name: String,
}

/// How ReplicaSet owners were resolved to Deployments (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum OwnerResolution {
    /// By the ReplicaSets' controller ownerReferences.
    ReplicaSets,
    /// By the `pod-template-hash` naming convention (no ReplicaSets known).
    PodTemplateHash,
}

/// One pod as the preview sees it: the planner's view plus what a person wants to know.
#[derive(Clone, Debug, PartialEq)]
pub struct PreviewPod {
    /// The planner's view ([`PodView::from_pod`]).
    pub view: PodView,
    /// The workload owning it.
    pub owner: Owner,
    /// It has a controller ownerReference: something re-creates it after eviction.
    pub comes_back: bool,
    /// Names of its `emptyDir` volumes, whose data goes with it.
    pub empty_dir: Vec<String>,
}

/// A PodDisruptionBudget as the Eviction API applies it.
#[derive(Clone, Debug)]
pub struct Budget {
    /// Namespace: it covers pods of this namespace only.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector`, compiled; `None` (an invalid or missing selector) covers no pod.
    pub selector: Option<Selector>,
    /// `status.disruptionsAllowed` now (0 when the status is missing).
    pub disruptions_allowed: i32,
}

/// Everything the simulation needs (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct PreviewInput {
    /// The reviewed maintenance: canonical drainPlan, selected nodes; its cursor is reset to 0.
    pub reviewed: MaintenanceInput,
    /// The other Drain-stage maintenances, with their stored cursors.
    pub others: Vec<MaintenanceInput>,
    /// The persisted state of the nodes (floor, draining taint); missing nodes start bare.
    pub nodes: Vec<NodeInput>,
    /// The pods.
    pub pods: Vec<PreviewPod>,
    /// The PodDisruptionBudgets.
    pub budgets: Vec<Budget>,
    /// The planner's switches.
    pub options: PlannerOptions,
    /// How `pods`' owners were resolved.
    pub owner_resolution: Option<OwnerResolution>,
}

/// Pods of one owner evicted at a step.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerGroup {
    /// Namespace.
    pub namespace: String,
    /// Owner.
    pub owner: Owner,
    /// Number of pods.
    pub count: usize,
    /// Their distinct priorities, ascending.
    pub priorities: Vec<i32>,
    /// Their names.
    pub pods: Vec<String>,
}

/// Evictions a PodDisruptionBudget refused at a step.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetWait {
    /// `namespace/name` of the PDB.
    pub pdb: String,
    /// Its `status.disruptionsAllowed` when the preview started.
    pub disruptions_allowed: i32,
    /// The refused pods, `namespace/name`.
    pub pods: Vec<String>,
}

/// Targeted pods the controller reports instead of evicting, by cause.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedGroup {
    /// The planner's cause (`StaticPod`, `ToleratesDrainingTaint`).
    pub cause: String,
    /// How the controller reports it ([`BlockedCause::label`]).
    pub label: String,
    /// The pods, `namespace/name`.
    pub pods: Vec<String>,
}

/// What happens while the cursor stands at one drainPlan entry.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Position of the entry in the drainPlan, from 1 (as `review` numbers the plan).
    pub entry: usize,
    /// The entry.
    pub plan_entry: DrainPlanEntry,
    /// Pods evicted from the selected nodes during this step.
    pub evicted: usize,
    /// Those pods, by namespace and owner.
    pub by_owner: Vec<OwnerGroup>,
    /// Evictions refused by a PodDisruptionBudget: the step waits.
    pub pdb_waits: Vec<BudgetWait>,
    /// Targeted pods never evicted, by cause.
    pub blocked: Vec<BlockedGroup>,
    /// The maintenance's drain message at the step's first pass (the planner's words).
    pub message: String,
}

/// Where the drain ends.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// Every pod the controller is responsible for is gone from the selected nodes.
    pub drained: bool,
    /// The entry (from 1) the drain stops at, when not drained.
    pub stuck_at: Option<usize>,
    /// Why it stops, when not drained.
    pub reason: Option<String>,
}

/// Pods of a list (`namespace/name`), with a count for terse output.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PodList {
    /// Number of pods.
    pub count: usize,
    /// The pods, `namespace/name`, with extra detail in parentheses where useful.
    pub pods: Vec<String>,
}

/// The drain preview of one maintenance (issue 16).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainPreview {
    /// The selected nodes.
    pub nodes: Vec<String>,
    /// Pods on them (not terminating, not finished).
    pub pods: usize,
    /// How owners were resolved.
    pub owner_resolution: Option<OwnerResolution>,
    /// The other Drain maintenances planned together with it (SPEC 4.3 "Combining").
    pub planned_with: Vec<String>,
    /// The steps where the cursor stops, in order (entries passed with nothing to do are
    /// left out).
    pub steps: Vec<Step>,
    /// Where it ends.
    pub outcome: Outcome,
    /// Other maintenances that held it back at some step (the planner's `limited by` and
    /// `Waiting for` names: the KEP's joint drain targets).
    pub held_back_by: Vec<String>,
    /// Pods left on the selected nodes at the end, by cause: static pods, DaemonSet pods
    /// tolerating the draining taint (the controller's [`BlockedCause`] labels), DaemonSet
    /// pods skipped by `--skip-daemonset-pods`, and pods not evicted because the drain is stuck.
    pub remaining: Vec<BlockedGroup>,
    /// Evicted pods without a controller: they do not come back.
    pub not_coming_back: PodList,
    /// Evicted pods with `emptyDir` volumes: that data goes (`ns/pod (volume, ...)`).
    pub empty_dir_lost: PodList,
    /// The planner's warnings about the input.
    pub warnings: Vec<String>,
}

/// `pod-template-hash`: the label a Deployment's ReplicaSet puts on its pods.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

fn controller_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Owner> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| Owner { kind: o.kind.clone(), name: o.name.clone() })
}

/// Builds the preview's pods from Pods (SPEC 2 pod types via [`PodView::from_pod`]); unbound
/// pods are left out. `replica_sets`: `Some` resolves ReplicaSet owners by the ReplicaSets'
/// controllers, `None` by the `pod-template-hash` convention (see the module documentation).
/// Returns the pods and which resolution was used.
pub fn preview_pods(pods: &[Pod], replica_sets: Option<&[ReplicaSet]>) -> (Vec<PreviewPod>, OwnerResolution) {
    let rs_owner: HashMap<(String, String), Option<Owner>> = replica_sets
        .into_iter()
        .flatten()
        .map(|rs| {
            let key = (rs.metadata.namespace.clone().unwrap_or_default(), rs.metadata.name.clone().unwrap_or_default());
            (key, controller_of(&rs.metadata))
        })
        .collect();
    let resolution =
        if replica_sets.is_some() { OwnerResolution::ReplicaSets } else { OwnerResolution::PodTemplateHash };
    let out = pods
        .iter()
        .filter_map(|pod| {
            let view = PodView::from_pod(pod, false)?;
            let controller = controller_of(&pod.metadata);
            let comes_back = controller.is_some();
            let owner = match controller {
                Some(o) if o.kind == "ReplicaSet" => {
                    resolve_replica_set(o, pod, &view, replica_sets.is_some(), &rs_owner)
                }
                Some(o) => o,
                None => Owner { kind: "Pod".into(), name: view.name.to_string() },
            };
            let empty_dir = pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter(|v| v.empty_dir.is_some())
                .map(|v| v.name.clone())
                .collect();
            Some(PreviewPod { view, owner, comes_back, empty_dir })
        })
        .collect();
    (out, resolution)
}

fn resolve_replica_set(
    rs: Owner,
    pod: &Pod,
    view: &PodView,
    known: bool,
    rs_owner: &HashMap<(String, String), Option<Owner>>,
) -> Owner {
    if known {
        return match rs_owner.get(&(view.namespace.to_string(), rs.name.clone())) {
            Some(Some(d)) if d.kind == "Deployment" => d.clone(),
            _ => rs,
        };
    }
    let hash = pod.metadata.labels.as_ref().and_then(|l| l.get(POD_TEMPLATE_HASH));
    match hash.and_then(|h| rs.name.strip_suffix(h.as_str())).and_then(|d| d.strip_suffix('-')) {
        Some(d) if !d.is_empty() => Owner { kind: "Deployment".into(), name: d.to_owned() },
        _ => rs,
    }
}

/// Builds the budgets from PodDisruptionBudgets (`status.disruptionsAllowed`, 0 without a
/// status, as the Eviction API treats a PDB the disruption controller has not processed).
pub fn budgets(pdbs: &[PodDisruptionBudget]) -> Vec<Budget> {
    pdbs.iter()
        .map(|p| Budget {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            selector: p.spec.as_ref().and_then(|s| s.selector.as_ref()).and_then(compile_label_selector),
            disruptions_allowed: p.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0),
        })
        .collect()
}

fn pod_key(p: &PodView) -> (String, String) {
    (p.namespace.to_string(), p.name.to_string())
}

fn full_name(p: &PodView) -> String {
    format!("{}/{}", p.namespace, p.name)
}

/// What a step accumulates over its passes.
#[derive(Default)]
struct StepAcc {
    evicted: Vec<usize>,
    waits: BTreeMap<usize, BTreeSet<String>>,
    blocked: BTreeMap<BlockedCause, BTreeSet<String>>,
    message: String,
}

/// Names in a planner message `Draining (limited by a, b)` or `Waiting for a, b.`.
fn named_in(message: &str) -> Vec<&str> {
    let list = message
        .strip_prefix("Draining (limited by ")
        .and_then(|m| m.strip_suffix(')'))
        .or_else(|| message.strip_prefix("Waiting for ").and_then(|m| m.strip_suffix('.')));
    list.map(|l| l.split(", ").collect()).unwrap_or_default()
}

/// Simulates the reviewed maintenance's drain (see the module documentation) and reports it
/// step by step. Never panics on input; bounded (a pass that changes nothing stops it).
pub fn simulate(input: &PreviewInput) -> DrainPreview {
    let me = input.reviewed.name.clone();
    let mut maints: Vec<MaintenanceInput> = input.others.iter().filter(|m| m.name != me).cloned().collect();
    maints.push(MaintenanceInput { drain_plan_index: 0, ..input.reviewed.clone() });
    let mine: BTreeSet<&str> = input.reviewed.nodes.iter().map(String::as_str).collect();
    let mut floors: BTreeMap<String, NodeInput> = input.nodes.iter().map(|n| (n.name.clone(), n.clone())).collect();
    let pods: Vec<&PreviewPod> = input.pods.iter().filter(|p| !p.view.eviction_in_progress).collect();
    let index: HashMap<(String, String), usize> = pods.iter().enumerate().map(|(i, p)| (pod_key(&p.view), i)).collect();
    let covers: Vec<Vec<usize>> = pods
        .iter()
        .map(|p| {
            input
                .budgets
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    *b.namespace == *p.view.namespace
                        && b.selector.as_ref().is_some_and(|s| labels_match(s, &p.view.labels))
                })
                .map(|(i, _)| i)
                .collect()
        })
        .collect();
    let mut alive = vec![true; pods.len()];
    let mut allowed: Vec<i32> = input.budgets.iter().map(|b| b.disruptions_allowed).collect();
    let mut steps: BTreeMap<usize, StepAcc> = BTreeMap::new();
    let mut held_back_by = BTreeSet::new();
    let mut warnings = BTreeSet::new();
    let mut outcome = Outcome { drained: false, stuck_at: None, reason: Some("no pass ran".into()) };
    // Each productive pass evicts a pod, taints a node, raises a floor, moves a cursor or
    // restores budgets after an eviction; this bound is never reached in practice.
    let plan_len: usize = maints.iter().map(|m| m.drain_plan.len()).sum();
    let max_passes = 4 * (pods.len() + plan_len * (floors.len() + mine.len() + 1)) + 16;
    for _ in 0..max_passes {
        let planner_input = PlannerInput {
            maintenances: maints.clone(),
            pods: pods.iter().zip(&alive).filter(|(_, a)| **a).map(|(p, _)| p.view.clone()).collect(),
            nodes: floors.values().cloned().collect(),
            options: input.options,
        };
        let decision = planner::plan(&planner_input);
        warnings.extend(decision.warnings.iter().cloned());
        let Some(mp) = decision.maintenance(&me) else { break };
        let cursor = usize::try_from(mp.drain_plan_index).unwrap_or(0);
        if mp.drained {
            outcome = Outcome { drained: true, stuck_at: None, reason: None };
            break;
        }
        let step =
            steps.entry(cursor).or_insert_with(|| StepAcc { message: mp.drain_message.clone(), ..Default::default() });
        held_back_by.extend(named_in(&mp.drain_message).into_iter().filter(|n| *n != me).map(str::to_owned));
        let mut progress = false;
        let (mut refused_all, mut refused_by) = (BTreeSet::new(), BTreeSet::new());
        for np in &decision.nodes {
            let on_mine = mine.contains(np.name.as_str());
            if on_mine {
                for b in &np.blocked {
                    step.blocked.entry(b.cause).or_default().insert(format!("{}/{}", b.pod.namespace, b.pod.name));
                }
            }
            for r in &np.evict {
                let Some(&i) = index.get(&(r.namespace.to_string(), r.name.to_string())) else { continue };
                if let Some(&b) = covers[i].iter().find(|&&b| allowed[b] <= 0) {
                    refused_all.insert(b);
                    if on_mine {
                        refused_by.insert(b);
                        step.waits.entry(b).or_default().insert(full_name(&pods[i].view));
                    }
                    continue;
                }
                for &b in &covers[i] {
                    allowed[b] -= 1;
                }
                alive[i] = false;
                progress = true;
                if on_mine {
                    step.evicted.push(i);
                }
            }
            let floor = floors
                .entry(np.name.clone())
                .or_insert_with(|| NodeInput { name: np.name.clone(), ..Default::default() });
            if np.needs_daemonset_taint && !floor.draining_taint {
                floor.draining_taint = true;
                progress = true;
            }
            if floor.reached != np.drain_targets {
                floor.reached = np.drain_targets.clone();
                progress = true;
            }
        }
        for (m, plan) in maints.iter_mut().zip(&decision.maintenances) {
            if m.drain_plan_index != plan.drain_plan_index {
                m.drain_plan_index = plan.drain_plan_index;
                progress = true;
            }
        }
        if progress {
            continue;
        }
        // Budgets this drain used up and that now refuse: the replacements came up elsewhere.
        let used: Vec<usize> =
            refused_all.into_iter().filter(|&b| allowed[b] < input.budgets[b].disruptions_allowed).collect();
        if !used.is_empty() {
            for b in used {
                allowed[b] = input.budgets[b].disruptions_allowed;
            }
            continue;
        }
        let reason = if refused_by.is_empty() {
            mp.drain_message.clone()
        } else {
            let names: Vec<String> = refused_by
                .iter()
                .map(|&b| format!("{}/{}", input.budgets[b].namespace, input.budgets[b].name))
                .collect();
            format!("PodDisruptionBudget {} allows no eviction", names.join(", "))
        };
        outcome = Outcome { drained: false, stuck_at: Some(cursor + 1), reason: Some(reason) };
        break;
    }
    let plan = &input.reviewed.drain_plan;
    let mut not_coming_back = PodList::default();
    let mut empty_dir_lost = PodList::default();
    let steps: Vec<Step> = steps
        .into_iter()
        .filter_map(|(cursor, acc)| {
            let mut groups: BTreeMap<(String, Owner), (BTreeSet<i32>, Vec<String>)> = BTreeMap::new();
            for &i in &acc.evicted {
                let p = pods[i];
                let g = groups.entry((p.view.namespace.to_string(), p.owner.clone())).or_default();
                g.0.insert(p.view.priority);
                g.1.push(p.view.name.to_string());
                if !p.comes_back {
                    not_coming_back.pods.push(full_name(&p.view));
                }
                if !p.empty_dir.is_empty() {
                    empty_dir_lost.pods.push(format!("{} ({})", full_name(&p.view), p.empty_dir.join(", ")));
                }
            }
            let by_owner = groups
                .into_iter()
                .map(|((namespace, owner), (prios, mut pods))| {
                    pods.sort();
                    OwnerGroup { namespace, owner, count: pods.len(), priorities: prios.into_iter().collect(), pods }
                })
                .collect();
            let pdb_waits = acc
                .waits
                .into_iter()
                .map(|(b, pods)| BudgetWait {
                    pdb: format!("{}/{}", input.budgets[b].namespace, input.budgets[b].name),
                    disruptions_allowed: input.budgets[b].disruptions_allowed,
                    pods: pods.into_iter().collect(),
                })
                .collect();
            let blocked = acc
                .blocked
                .into_iter()
                .map(|(cause, pods)| BlockedGroup {
                    cause: format!("{cause:?}"),
                    label: cause.label().to_owned(),
                    pods: pods.into_iter().collect(),
                })
                .collect();
            Some(Step {
                entry: cursor + 1,
                plan_entry: plan.get(cursor)?.clone(),
                evicted: acc.evicted.len(),
                by_owner,
                pdb_waits,
                blocked,
                message: acc.message,
            })
        })
        .collect();
    not_coming_back.pods.sort();
    not_coming_back.count = not_coming_back.pods.len();
    empty_dir_lost.pods.sort();
    empty_dir_lost.count = empty_dir_lost.pods.len();
    let mut remaining: BTreeMap<(u8, String, String), BTreeSet<String>> = BTreeMap::new();
    for (p, _) in pods.iter().zip(&alive).filter(|(p, a)| **a && !p.view.terminal && mine.contains(&*p.view.node_name))
    {
        let (rank, cause, label) = match (p.view.pod_type, p.view.tolerates_draining_taint) {
            (PodType::Static, _) => (0, "StaticPod", BlockedCause::StaticPod.label()),
            (PodType::DaemonSet, true) => (1, "ToleratesDrainingTaint", BlockedCause::ToleratesDrainingTaint.label()),
            (PodType::DaemonSet, _) if input.options.skip_daemonset_pods => {
                (2, "SkippedDaemonSet", "DaemonSet pods (--skip-daemonset-pods)")
            }
            _ => (3, "NotEvicted", "not evicted (the drain stops first)"),
        };
        remaining.entry((rank, cause.into(), label.into())).or_default().insert(full_name(&p.view));
    }
    let remaining = remaining
        .into_iter()
        .map(|((_, cause, label), pods)| BlockedGroup { cause, label, pods: pods.into_iter().collect() })
        .collect();
    let nodes: Vec<String> = mine.iter().map(|n| n.to_string()).collect();
    DrainPreview {
        pods: pods.iter().filter(|p| mine.contains(&*p.view.node_name) && !p.view.terminal).count(),
        nodes,
        owner_resolution: input.owner_resolution,
        planned_with: maints.iter().filter(|m| m.name != me).map(|m| m.name.clone()).collect(),
        steps,
        outcome,
        held_back_by: held_back_by.into_iter().collect(),
        remaining,
        not_coming_back,
        empty_dir_lost,
        warnings: warnings.into_iter().collect(),
    }
}

/// The maintenance under review, as [`preview_input`] needs it.
#[derive(Clone, Debug)]
pub struct Reviewed<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// Creation time in Unix seconds: the stored one for an UPDATE, `None` for a CREATE (it
    /// is then the newest maintenance, the one that gives way when plans conflict).
    pub created: Option<i64>,
    /// The defaulted, canonical `spec.drainPlan`.
    pub drain_plan: &'a [DrainPlanEntry],
    /// The nodes its selector picks.
    pub nodes: &'a [String],
}

/// Builds the simulation's input from a cluster's objects, as the controller's
/// `planner_input` does from its caches (SPEC 4.3): the other Drain-stage maintenances not
/// being deleted (their selectors matched against `nodes`, their stored cursors), the node
/// floors and draining taints the controller persisted on the Nodes, the pods and the
/// PodDisruptionBudgets. `replica_sets` as in [`preview_pods`].
pub fn preview_input(
    reviewed: &Reviewed<'_>,
    nodes: &[std::sync::Arc<k8s_openapi::api::core::v1::Node>],
    maintenances: &[std::sync::Arc<crate::api::NodeMaintenance>],
    pods: &[Pod],
    pdbs: &[PodDisruptionBudget],
    replica_sets: Option<&[ReplicaSet]>,
    options: PlannerOptions,
) -> PreviewInput {
    use crate::controller::node_state::{has_draining_taint, reached_targets};
    use crate::selector::NodeMatcher;
    use kube::ResourceExt;
    let mut others = Vec::new();
    let mut involved: BTreeSet<String> = reviewed.nodes.iter().cloned().collect();
    for m in maintenances.iter().filter(|m| {
        m.spec.stage == crate::api::Stage::Drain
            && m.metadata.deletion_timestamp.is_none()
            && m.metadata.name.as_deref() != Some(reviewed.name)
    }) {
        let Some(matcher) = NodeMatcher::compile(&m.spec.node_selector) else { continue };
        let selected: Vec<String> = nodes.iter().filter(|n| matcher.matches(n)).map(|n| n.name_any()).collect();
        involved.extend(selected.iter().cloned());
        others.push(MaintenanceInput {
            name: m.name_any(),
            created: m.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
            drain_plan: m.spec.drain_plan.clone(),
            drain_plan_index: m.status.as_ref().and_then(|s| s.drain_status.as_ref()).map_or(0, |d| d.drain_plan_index),
            nodes: selected,
        });
    }
    let node_inputs = nodes
        .iter()
        .filter(|n| involved.contains(&n.name_any()))
        .map(|n| NodeInput { name: n.name_any(), reached: reached_targets(n), draining_taint: has_draining_taint(n) })
        .collect();
    let (pods, resolution) = preview_pods(pods, replica_sets);
    PreviewInput {
        reviewed: MaintenanceInput {
            name: reviewed.name.to_owned(),
            created: reviewed.created.unwrap_or(i64::MAX),
            drain_plan: reviewed.drain_plan.to_vec(),
            drain_plan_index: 0,
            nodes: reviewed.nodes.to_vec(),
        },
        others,
        nodes: node_inputs,
        pods: pods.into_iter().filter(|p| involved.contains(&*p.view.node_name)).collect(),
        budgets: budgets(pdbs),
        options,
        owner_resolution: Some(resolution),
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("{n} {word}") } else { format!("{n} {word}s") }
}

fn owner_label(o: &Owner) -> String {
    if o.kind == "Pod" { format!("bare pod {}", o.name) } else { format!("{}/{}", o.kind, o.name) }
}

fn priorities(p: &[i32]) -> String {
    let p: Vec<String> = p.iter().map(i32::to_string).collect();
    format!("priority {}", p.join(", "))
}

/// Renders a preview for a terminal: counts first; `verbose` also lists the pods.
pub fn render_text(p: &DrainPreview, verbose: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let with =
        if p.planned_with.is_empty() { String::new() } else { format!(", planned with {}", p.planned_with.join(", ")) };
    let _ = writeln!(out, "Drain preview ({} on {}{with}):", plural(p.pods, "pod"), plural(p.nodes.len(), "node"));
    let list = |pods: &[String]| if verbose { format!(": {}", pods.join(", ")) } else { String::new() };
    for s in &p.steps {
        let e = &s.plan_entry;
        let selector = e
            .pod_selector
            .as_ref()
            .map(|s| format!(" podSelector {}", serde_json::to_string(s).unwrap_or_default()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  step {} ({} podPriority <= {}{selector}): evicts {}; {}",
            s.entry,
            e.pod_type.as_str(),
            e.pod_priority,
            plural(s.evicted, "pod"),
            s.message
        );
        for g in &s.by_owner {
            let _ = writeln!(
                out,
                "    {} {}: {} ({}){}",
                g.namespace,
                owner_label(&g.owner),
                g.count,
                priorities(&g.priorities),
                list(&g.pods)
            );
        }
        for w in &s.pdb_waits {
            let _ = writeln!(
                out,
                "    waits: PodDisruptionBudget {} ({} allowed now) refuses {}{}",
                w.pdb,
                w.disruptions_allowed,
                plural(w.pods.len(), "eviction"),
                list(&w.pods)
            );
        }
        for b in &s.blocked {
            let _ = writeln!(out, "    blocked: {}: {}{}", b.label, b.pods.len(), list(&b.pods));
        }
    }
    let end = match (&p.outcome.stuck_at, &p.outcome.reason) {
        _ if p.outcome.drained => "drained".to_owned(),
        (Some(at), Some(r)) => format!("STUCK at step {at}: {r}"),
        (_, r) => format!("STUCK: {}", r.as_deref().unwrap_or("no progress")),
    };
    let _ = writeln!(out, "  Result: {end}");
    for r in &p.remaining {
        let _ = writeln!(out, "  Remaining: {}: {}{}", r.label, r.pods.len(), list(&r.pods));
    }
    if !p.held_back_by.is_empty() {
        let _ = writeln!(out, "  Held back by: {}", p.held_back_by.join(", "));
    }
    for (label, l) in
        [("Will not come back (no controller)", &p.not_coming_back), ("emptyDir data lost", &p.empty_dir_lost)]
    {
        if l.count > 0 {
            let _ = writeln!(out, "  {label}: {}{}", plural(l.count, "pod"), list(&l.pods));
        }
    }
    for w in &p.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    out
}

#[cfg(test)]
mod tests;
