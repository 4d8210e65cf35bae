//! The `NodeMaintenance` custom resource (SPEC 2, KEP-4212 "NodeMaintenance API").
//!
//! The CRD YAML is generated from these types (`node-maintenance crd`), so the doc comments
//! here are what `kubectl explain nodemaintenance` shows.

use super::{DrainPlanEntry, Evacuation, EvacuationStatus, Stage};
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

// kube's derive takes one `printcolumn(...)` per column; clippy reads the repeated keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
/// Desired state of a NodeMaintenance: which nodes, which stage, and in which order pods leave.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "nodemaintenance.k8s.io",
    version = "v1alpha1",
    kind = "NodeMaintenance",
    doc = "NodeMaintenance declares that a set of nodes is to be cordoned and drained for maintenance, and later made schedulable again (KEP-4212).",
    plural = "nodemaintenances",
    shortname = "nm",
    status = "NodeMaintenanceStatus",
    annotation("api-approved.kubernetes.io", "unapproved, experimental-only"),
    printcolumn(name = "Stage", type_ = "string", json_path = ".spec.stage"),
    printcolumn(name = "Drained", type_ = "string", json_path = ".status.conditions[?(@.type==\"Drained\")].status"),
    printcolumn(name = "Nodes", type_ = "integer", json_path = ".status.selectedNodes"),
    printcolumn(name = "ETA", type_ = "string", json_path = ".status.forecast.completionTime"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".spec.reason"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = super::cel::drain_plan_is_immutable(), validation = super::cel::node_selector_changes_only_in_idle())]
pub struct NodeMaintenanceSpec {
    /// Selects the nodes under maintenance (core/v1 NodeSelector: terms are ORed, the
    /// expressions within a term ANDed; matchFields only on `metadata.name`). Required.
    /// May change only while the stage is Idle. At most 64 terms of at most 64 requirements,
    /// each with at most 5000 values (node names) of at most 253 characters.
    #[schemars(transform = super::cel::node_selector_schema)]
    pub node_selector: NodeSelector,
    /// Idle, Cordon, Drain or Complete; stages only move forward. Default Idle.
    #[serde(default)]
    #[x_kube(validation = super::cel::stage_moves_forward())]
    pub stage: Stage,
    /// Ordered drain steps, executed from the first entry to the last during Drain. Podtypes
    /// in the order Default, DaemonSet, Static; priorities ascending within a podType;
    /// at equal podType and priority, entries with a podSelector first. The 12 default
    /// entries (priorities 1000000000, 2000000000, 2000001000, 2147483647 for each podType)
    /// are added on admission. Immutable after creation. At most 128 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128), transform = super::cel::drain_plan_schema)]
    pub drain_plan: Vec<DrainPlanEntry>,
    /// Rolling maintenance: at most this many selected nodes are held (cordoned by this
    /// maintenance and not yet released) at once: an integer of at least 1, or a percentage of
    /// the selected nodes from "1%" to "100%", rounded up (so at least one node). The others
    /// wait uncordoned, in node name order (nodeStatuses phase `Waiting`). A held node is
    /// released (uncordoned, the next one starts) when its work is signalled done: the Node
    /// annotation `nodemaintenance.k8s.io/done` set to this maintenance's name, or, with
    /// `releaseNodesOn: Reboot`, a new `status.nodeInfo.bootID` once the node is Ready again.
    /// Unset: every selected node is held at once (the KEP's group maintenance) and released
    /// at Complete. May change in any stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 8))]
    #[x_kube(validation = super::cel::positive_count())]
    pub max_unavailable: Option<IntOrString>,
    /// Rolling maintenance (with maxUnavailable): what else, besides the
    /// `nodemaintenance.k8s.io/done` annotation, releases a held node. `Reboot`: the node was
    /// rebooted after it reached the end of this maintenance's stage (drained in Drain,
    /// cordoned in Cordon): its kubelet reports a new `status.nodeInfo.bootID` and the node
    /// is Ready again, as after kured or a machine-config agent. Unset: the annotation only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_nodes_on: Option<ReleaseTrigger>,
    /// Free-text reason for the maintenance, at most 1024 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub reason: Option<String>,
    /// How long the Drain stage may run, counted from its start in `status.stageStatuses`,
    /// before the maintenance reports a timeout: condition `Drained` False with reason
    /// `DrainTimedOut` (the message names the blockers by cause), a Warning Event
    /// `DrainTimedOut`. A Go duration greater than zero: `30m`, `1h30m`, `90s` (units h, m,
    /// s, ms, us, ns). It only reports: nothing is force-deleted, the drain goes on and
    /// `Drained` becomes True when it finishes. May change in any stage. Unset: no deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<String>,
    /// How pods of Deployments leave. `Surge`: a pod whose PodDisruptionBudget
    /// allows no disruption even with every pod healthy, or whose Deployment has one replica,
    /// is moved by the Deployment's own rollout (as `kubectl rollout restart` does: new pods
    /// start on schedulable nodes first, the old ones go once the new are available), at
    /// most once per Deployment and maintenance, never forced. Only Deployments with strategy
    /// RollingUpdate, maxSurge above 0 and maxUnavailable 0 qualify; a Deployment annotated
    /// `nodemaintenance.k8s.io/evacuation: evict` opts out. `Annotated`: only Deployments
    /// annotated `nodemaintenance.k8s.io/evacuation: surge`. `Evict`: never; the Eviction API
    /// only. Unset: the controller's `--evacuation` (default `Annotated`). May change in any
    /// stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evacuation: Option<Evacuation>,
    /// `true` freezes this maintenance as a pause request on a NodeDisruptionBudget does
    /// (SPEC 4.6; as `kubectl rollout pause`): no new node starts and no new eviction,
    /// EvictionRequest or rollout starts; cordons and holds stay, accepted evictions run their
    /// course, releases, Complete and deletion proceed. The maintenance shows condition
    /// `Paused`. May change in any stage. Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Pods left to finish instead of being evicted while they run on a draining node
    /// (SPEC 4.6). Unset: every pod is evicted per the drainPlan. May change in any stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_for_completion: Option<WaitForCompletion>,
}

/// Which pods a maintenance lets run to completion, and for how long (SPEC 4.6).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WaitForCompletion {
    /// The pods waited for (namespace-wide label selector). Unset: pods owned by a Job. Either
    /// way a pod annotated `nodemaintenance.k8s.io/wait-for-completion: "true"` is waited for
    /// too. They do not hold back the drainPlan for other pods; the node is Drained once they
    /// have finished (phase Succeeded or Failed). At most 64 matchLabels and 64
    /// matchExpressions of at most 256 values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = super::cel::label_selector_schema)]
    pub pod_selector: Option<LabelSelector>,
    /// How long to wait, counted from the node's drain start (its `nodeStatuses[].drainStartTime`):
    /// a Go duration greater than zero. After it the pods still running are evicted like any
    /// other (PDBs honoured, never forced). Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

impl NodeMaintenance {
    /// Whether this maintenance holds nodes by its own stage (SPEC 4.1): in Cordon or Drain
    /// ([`Stage::is_active`]) and not being deleted. The one notion of "active".
    pub fn is_active(&self) -> bool {
        self.spec.stage.is_active() && self.metadata.deletion_timestamp.is_none()
    }

    /// Whether this maintenance drains its nodes (SPEC 4.3): in the Drain stage and not being
    /// deleted. The one notion of "a Drain-stage maintenance": what the planner plans, what
    /// the state metrics count.
    pub fn is_draining(&self) -> bool {
        self.spec.stage == Stage::Drain && self.metadata.deletion_timestamp.is_none()
    }

    /// The nodes this maintenance released (rolling maintenance): the names of its
    /// stored `status.nodeStatuses` in phase Released.
    pub fn released_nodes(&self) -> BTreeSet<String> {
        let statuses = self.status.as_ref().map(|s| s.node_statuses.as_slice()).unwrap_or_default();
        statuses.iter().filter(|s| s.phase == Some(NodePhase::Released)).map(|s| s.node_ref.name.clone()).collect()
    }
}

/// What releases a node of a rolling maintenance besides the done annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReleaseTrigger {
    /// A new `status.nodeInfo.bootID` with the node Ready again, after the node reached the
    /// end of the stage.
    Reboot,
}

/// Where a selected node stands in its maintenance: `nodeStatuses[].phase`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum NodePhase {
    /// Not held: waiting for a place (maxUnavailable) or a NodeDisruptionBudget; schedulable.
    Waiting,
    /// Held; the cordon is not observed yet.
    Cordoning,
    /// Held and cordoned; not drained by this maintenance (Cordon stage, or waiting to drain).
    Cordoned,
    /// Held; pods this maintenance evicts remain.
    Draining,
    /// Held; nothing left that this maintenance evicts.
    Drained,
    /// Given back after its work was signalled done (rolling maintenance); it is not held
    /// again by this maintenance.
    Released,
}

/// How many selected nodes are in each phase: `status.nodeCounts`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCounts {
    /// Nodes waiting to be held.
    #[serde(default)]
    pub waiting: i32,
    /// Nodes held and cordoned (or being cordoned), not draining.
    #[serde(default)]
    pub cordoned: i32,
    /// Nodes draining.
    #[serde(default)]
    pub draining: i32,
    /// Nodes drained and still held.
    #[serde(default)]
    pub drained: i32,
    /// Nodes released.
    #[serde(default)]
    pub released: i32,
}

/// Observed state of a NodeMaintenance, written by the controller (SPEC 2, 4.3).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMaintenanceStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The stages started so far, append-only and in stage order; Drain is always preceded
    /// by Cordon.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage_statuses: Vec<StageStatus>,
    /// Progress of the drain over all selected nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_status: Option<DrainStatus>,
    /// Number of nodes the nodeSelector currently selects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_nodes: Option<i32>,
    /// How many selected nodes are in each phase (Cordon and Drain stages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_counts: Option<NodeCounts>,
    /// One entry per selected node: the out-of-tree equivalent of the KEP's
    /// `Node.status.maintenanceStatus`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_statuses: Vec<NodeMaintenanceNodeStatus>,
    /// Standard conditions (metav1.Condition); `Drained` is True when no pod that the
    /// controller is responsible for evicting remains on any selected node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Deployments this maintenance evacuated by rollout (`spec.evacuation`),
    /// each with where its rollout stands now, by namespace and name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evacuations: Vec<EvacuationStatus>,
    /// When this maintenance is expected to finish (SPEC 4.7), while it is in Cordon or Drain.
    /// Rewritten only when the expected completion moves by more than 15 minutes or 10 % of
    /// the time left, whichever is larger, or its basis changes; `computedAt` says when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forecast: Option<ForecastStatus>,
}

/// A maintenance's forecast as its status shows it (SPEC 4.7): the expected (median) and late
/// (90th percentile) completion, and what they rest on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForecastStatus {
    /// When the last selected node is expected to be done (RFC 3339): released in a rolling
    /// maintenance, drained otherwise. Absent without a basis (no node has finished yet) or
    /// when some node cannot start within a year (`message` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// The same with each node taking the 90th percentile of the finished nodes' times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_completion_time: Option<Time>,
    /// What node durations rest on: `3 finished nodes (median 1h12m, p90 1h40m)`, or
    /// `no basis: no node has finished yet`.
    pub basis: String,
    /// The next start of a blackout on the NodeDisruptionBudgets over its nodes (RFC 3339),
    /// however far ahead: a late completion past it means the maintenance will not finish
    /// before that freeze.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_blackout_start: Option<Time>,
    /// Why there is no completion time, when some node cannot start within a year (for
    /// instance its budgets' maintenance windows never open outside their blackouts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When this forecast was made (RFC 3339).
    pub computed_at: Time,
}

/// When a stage was started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StageStatus {
    /// The stage.
    pub name: Stage,
    /// When the controller started this stage (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_timestamp: Option<Time>,
}

/// Drain progress of a whole maintenance (KEP `DrainStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainStatus {
    /// The least powerful drain targets among all selected nodes: the pods being targeted on
    /// every node. Some nodes may have reached more.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reached_drain_targets: Vec<DrainPlanEntry>,
    /// Number of targeted pods that have not been evicted yet.
    #[serde(default)]
    pub pods_pending_eviction_request: i32,
    /// Number of pods whose eviction was accepted and that still exist.
    #[serde(default)]
    pub active_eviction_requests: i32,
    /// Index into `spec.drainPlan` of the entry this maintenance has reached (its cursor,
    /// SPEC 4.3); it only moves forward.
    #[serde(default)]
    pub drain_plan_index: i32,
    /// Human-readable state: `Draining`, `Draining (limited by a, b)` or `Waiting for a.`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_message: Option<String>,
    /// When the drain last made progress (RFC 3339, whole seconds): set when the Drain stage
    /// starts, moved when `podsPendingEvictionRequest` or the pods left (pending plus active
    /// evictions) fell, or `drainPlanIndex` advanced. An old time means the drain is stuck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_progress_time: Option<Time>,
}

/// Reference to a Node by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NodeRef {
    /// The Node's name.
    pub name: String,
}

/// Maintenance status of one selected node (KEP `Node.status.maintenanceStatus`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMaintenanceNodeStatus {
    /// The node.
    pub node_ref: NodeRef,
    /// Where the node stands: Waiting, Cordoning, Cordoned, Draining, Drained or Released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NodePhase>,
    /// The node's `status.nodeInfo.bootID` when it reached the end of the stage (rolling
    /// maintenance with `releaseNodesOn: Reboot`): a different boot ID means it rebooted.
    #[serde(default, rename = "bootID", skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// The pods currently targeted for eviction on this node: the least powerful targets of
    /// all maintenances draining it, never moving backwards.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drain_targets: Vec<DrainPlanEntry>,
    /// Human-readable state of the drain on this node and what holds it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_message: Option<String>,
    /// Number of targeted pods on this node that have not been evicted yet.
    #[serde(default)]
    pub pods_pending_eviction_request: i32,
    /// Number of pods on this node whose eviction was accepted and that still exist.
    #[serde(default)]
    pub active_eviction_requests: i32,
    /// When this node's drain started (its first eviction was allowed; RFC 3339): the start
    /// of `spec.waitForCompletion.timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_start_time: Option<Time>,
    /// When this maintenance first found the node held (RFC 3339, whole seconds): the start
    /// of its time under the maintenance, which the forecast's basis measures (SPEC 4.7).
    /// Unset while the node waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_time: Option<Time>,
    /// When the node's part of the maintenance was done (RFC 3339, whole seconds): its
    /// release (rolling maintenance), or, for a group maintenance in Drain, since when it is
    /// drained. What the forecast's basis measures up to (SPEC 4.7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_time: Option<Time>,
    /// Pods on this node left to finish (`spec.waitForCompletion`) that still run.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pods_waiting_for_completion: i32,
    /// This maintenance's drain was fast-forwarded on this node (SPEC 4.3, KEP
    /// "maintenance-c"): the node had already been drained further than this maintenance's
    /// plan reaches, so its targets start there. Set only in the maintenance's own
    /// `nodeStatuses`; its Normal Event `FastForwarded` goes once, when this turns true.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fast_forwarded: bool,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}
