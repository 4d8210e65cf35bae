//! The `NodeDisruptionBudget` custom resource (SPEC 4.5): how many nodes of a set
//! may be unavailable at once, shared by every NodeMaintenance. The Node Operation
//! Controller's NodeDisruptionBudget (`../shared/reference/`), in the shape of a
//! PodDisruptionBudget.
//!
//! The CRD YAML is generated from these types (`node-maintenance crd`), so the doc comments
//! here are what `kubectl explain nodedisruptionbudget` shows.

use super::gates::{Blackout, ClosedGate, HealthGate, MaintenanceWindow, MaintenanceWindowStatus, PauseRequest};
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// kube's derive takes one `printcolumn(...)` per column; clippy reads the repeated keys as
// duplicated attributes.
#[allow(clippy::duplicated_attributes)]
/// Desired state of a NodeDisruptionBudget: which nodes, and how many of them may be
/// unavailable at once.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[kube(
    group = "nodemaintenance.k8s.io",
    version = "v1alpha1",
    kind = "NodeDisruptionBudget",
    doc = "NodeDisruptionBudget limits how many of the nodes it selects NodeMaintenances may make unavailable at once: no maintenance cordons a selected node while the budget allows no further disruption.",
    plural = "nodedisruptionbudgets",
    shortname = "ndb",
    status = "NodeDisruptionBudgetStatus",
    annotation("api-approved.kubernetes.io", "unapproved, experimental-only"),
    printcolumn(name = "Selected", type_ = "integer", json_path = ".status.expectedNodes"),
    printcolumn(name = "Unavailable", type_ = "integer", json_path = ".status.currentUnavailable"),
    printcolumn(name = "Allowed", type_ = "integer", json_path = ".status.disruptionsAllowed"),
    printcolumn(
        name = "Gate",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"DisruptionAllowed\")].reason",
        description = "Why disruption is or is not allowed: the first closed gate (Paused, Blackout, OutsideMaintenanceWindow, AlertsFiring, TooManyUnhealthyNodes), InsufficientNodes, InvalidSpec or SufficientNodes"
    ),
    printcolumn(
        name = "Window",
        type_ = "boolean",
        json_path = ".status.maintenanceWindow.open",
        description = "Whether a maintenance window is open now (empty without maintenanceWindows)"
    ),
    printcolumn(
        name = "Next Window",
        type_ = "string",
        json_path = ".status.maintenanceWindow.nextOpensAt",
        priority = 1,
        description = "When a maintenance window next opens (UTC)"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = super::cel::at_most_one_count())]
pub struct NodeDisruptionBudgetSpec {
    /// Selects the nodes this budget protects (core/v1 NodeSelector, validated like a
    /// NodeMaintenance's: terms ORed, expressions ANDed, matchFields only on
    /// `metadata.name`). Required. At most 64 terms of at most 64 requirements, each with at
    /// most 5000 values of at most 253 characters.
    #[schemars(transform = super::cel::node_selector_schema)]
    pub node_selector: NodeSelector,
    /// At most this many selected nodes may be unavailable (not Ready, or unschedulable by
    /// anyone's cordon) at once: a positive integer, or a percentage of the selected nodes
    /// from "1%" to "100%" rounded up. At most one of maxUnavailable and minAvailable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 8))]
    #[x_kube(validation = super::cel::positive_count())]
    pub max_unavailable: Option<IntOrString>,
    /// At least this many selected nodes must stay available (Ready and schedulable): a
    /// positive integer, or a percentage of the selected nodes from "1%" to "100%" rounded
    /// up. At most one of maxUnavailable and minAvailable; with neither, the budget limits
    /// only through its gates (SPEC 4.6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 8))]
    #[x_kube(validation = super::cel::positive_count())]
    pub min_available: Option<IntOrString>,
    /// With windows set, maintenance starts on a selected node only while one of them is
    /// open (SPEC 4.6). Nodes already draining finish their stage when a window closes. At
    /// most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub maintenance_windows: Vec<MaintenanceWindow>,
    /// Spans during which no maintenance starts on a selected node, windows or not. At most
    /// 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub blackouts: Vec<Blackout>,
    /// While any is present, no selected node starts and no new eviction, EvictionRequest or
    /// rollout starts on one; cordons and holds stay, accepted evictions run their course,
    /// releases, Complete and deletion proceed. Keyed by `name`: each party server-side
    /// applies and removes its own entry. At most 32.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub pause_requests: Vec<PauseRequest>,
    /// Nothing new starts while too many selected nodes are unhealthy or a matching alert
    /// fires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_gate: Option<HealthGate>,
}

/// Observed state of a NodeDisruptionBudget, written by the controller (in the style of
/// PodDisruptionBudget's status).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionBudgetStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Number of nodes the nodeSelector selects.
    #[serde(default)]
    pub expected_nodes: i32,
    /// Selected nodes that are Ready and schedulable.
    #[serde(default)]
    pub current_available: i32,
    /// Selected nodes that are not Ready or unschedulable.
    #[serde(default)]
    pub current_unavailable: i32,
    /// Fewest selected nodes that must stay available.
    #[serde(default)]
    pub desired_available: i32,
    /// How many more selected nodes may be made unavailable now (0 when none).
    #[serde(default)]
    pub disruptions_allowed: i32,
    /// With `spec.maintenanceWindows`: whether one is open now, and the next edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindowStatus>,
    /// The gates closed now, in report order, each with since when (SPEC 4.6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub closed_gates: Vec<ClosedGate>,
    /// Standard conditions (metav1.Condition): `DisruptionAllowed`, True while at least one
    /// more node may be disrupted; while False, the reason is the first closed gate's
    /// (`Paused`, `Blackout`, `OutsideMaintenanceWindow`, `AlertsFiring`,
    /// `TooManyUnhealthyNodes`) or `InsufficientNodes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
