//! The drain preview of `review`: what a maintenance's Drain stage will do to the
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
use crate::planner::from_cluster::{Drained, completion_wait, drain_maintenances, node_inputs};
use crate::planner::{self, BlockedCause, MaintenanceInput, NodeInput, PlannerInput, PlannerOptions, PodView};
use crate::selector::PodSelector;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
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
    pub selector: Option<PodSelector>,
    /// `status.disruptionsAllowed` now (0 when the status is missing).
    pub disruptions_allowed: i32,
}

/// Everything the simulation needs (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct PreviewInput {
    /// The reviewed maintenance: canonical drainPlan, selected nodes; its cursor is reset to 0.
    pub reviewed: MaintenanceInput,
    /// Its `spec.maxUnavailable` (at most this many nodes held at once), if set.
    pub max_unavailable: Option<IntOrString>,
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
    /// Pods (`namespace/name`) their Deployment's rollout moves ([`plan_rollouts`]): they
    /// leave without asking their PodDisruptionBudgets.
    pub rolled: BTreeSet<String>,
    /// The Deployments rolled instead of waiting.
    pub rolled_instead: Vec<RolledDeployment>,
    /// Pods a rollout would have spared a disruption that are not evacuated, and why.
    pub not_rolled: Vec<String>,
}

/// A Deployment that evacuation by rollout moves instead of evicting its pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledDeployment {
    /// Namespace.
    pub namespace: String,
    /// Name of the Deployment.
    pub name: String,
    /// Why a rollout rather than an eviction (one replica, or the budget that allows no
    /// disruption).
    pub why: String,
    /// Its pods on the selected nodes, `namespace/name`.
    pub pods: Vec<String>,
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

/// The drain preview of one maintenance.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainPreview {
    /// The selected nodes.
    pub nodes: Vec<String>,
    /// Pods on them (not terminating, not finished).
    pub pods: usize,
    /// How owners were resolved.
    pub owner_resolution: Option<OwnerResolution>,
    /// Its `spec.maxUnavailable` resolved against the selected nodes: at most this
    /// many of them evict pods at once; `None` without a budget. The simulation takes turns
    /// as the controller does, so it changes when pods go, not which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_at_once: Option<usize>,
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
    /// tolerating the draining taint (the controller's [`BlockedCause`] labels), pods left to
    /// finish (`spec.waitForCompletion` of a maintenance draining them, SPEC 4.6), DaemonSet
    /// pods skipped by `--skip-daemonset-pods`, and pods not evicted because the drain is stuck.
    pub remaining: Vec<BlockedGroup>,
    /// Evicted pods without a controller: they do not come back.
    pub not_coming_back: PodList,
    /// Evicted pods with `emptyDir` volumes: that data goes (`ns/pod (volume, ...)`).
    pub empty_dir_lost: PodList,
    /// The planner's warnings about the input.
    pub warnings: Vec<String>,
    /// Deployments rolled instead of waiting on their PodDisruptionBudgets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rolled_instead: Vec<RolledDeployment>,
    /// Pods a rollout would have spared a disruption that are not evacuated, and why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_rolled: Vec<String>,
}

mod objects;
mod render;
mod rollouts;
mod simulate;

pub use objects::{Reviewed, budgets, preview_input, preview_pods};
pub use render::render_text;
pub use rollouts::plan_rollouts;
pub use simulate::simulate;

#[cfg(test)]
use {objects::POD_TEMPLATE_HASH, render::owner_label};

#[cfg(test)]
mod tests;
