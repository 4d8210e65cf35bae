//! API types of `nodemaintenance.k8s.io/v1alpha1` (SPEC 2), the parsers of what the
//! controller records on a Node ([`node`]) and the API's rule for an EvictionRequest's
//! `spec.requester` ([`requester`], with the DNS-1123 subdomain rule pause request names share):
//! plain data, no I/O.

mod budget;
pub mod cel;
mod count;
mod drain_plan;
mod drain_timeout;
mod evacuation;
mod gates;
mod maintenance;
pub mod node;
pub mod requester;
mod stage;

pub use budget::{NodeDisruptionBudget, NodeDisruptionBudgetSpec, NodeDisruptionBudgetStatus};
pub use count::{budget_max_unavailable, scaled_count, shown};
pub use drain_plan::{DEFAULT_PRIORITIES, DrainPlanEntry, PodType, default_plan, first_out_of_order};
pub use drain_timeout::{DrainTimeoutError, parse_drain_timeout};
pub use evacuation::{
    EVACUATED_AT_ANNOTATION, EVACUATED_FOR_ANNOTATION, EVACUATION_ANNOTATION, Evacuation, EvacuationStatus,
    RolloutState,
};
pub use gates::{
    AlertGate, Blackout, ClosedGate, GateReason, HealthGate, MaintenanceWindow, MaintenanceWindowStatus, PauseRequest,
    WAIT_FOR_COMPLETION_ANNOTATION,
};
pub use maintenance::{
    DrainStatus, ForecastStatus, NodeCounts, NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceSpec,
    NodeMaintenanceStatus, NodePhase, NodeRef, ReleaseTrigger, StageStatus, WaitForCompletion,
};
pub use stage::Stage;

/// API group of the NodeMaintenance resource.
pub const GROUP: &str = "nodemaintenance.k8s.io";
/// Finalizer that makes deletion run the Complete stage first (SPEC 4.2).
pub const FINALIZER: &str = "nodemaintenance.k8s.io/maintenance-completion";
/// Node annotation recording which maintenances hold the node and whether it was
/// unschedulable before the first one did (SPEC 4.1).
pub const MAINTENANCES_ANNOTATION: &str = "nodemaintenance.k8s.io/maintenances";
/// Node annotation carrying the per-node maintenance status as JSON (SPEC 4.3).
pub const MAINTENANCE_STATUS_ANNOTATION: &str = "nodemaintenance.k8s.io/maintenance-status";
/// Node annotation by which an admin's automation signals that the work on a node is done:
/// its value names the rolling maintenance that may release the node. The
/// controller removes it when it releases the node.
pub const DONE_ANNOTATION: &str = "nodemaintenance.k8s.io/done";
/// Taint put on a node before its DaemonSet pods are evicted (SPEC 4.3).
pub const DRAINING_TAINT: &str = "nodemaintenance.k8s.io/draining";
/// The Node condition a maintenance that will take a node sets on it beforehand: Idle, or
/// rolling and waiting for a place (1.37 Node Lifecycle Conditions; SPEC 4.5).
pub const MAINTENANCE_PLANNED: &str = "MaintenancePlanned";
/// The Node lifecycle condition types the controller sets (SPEC 4.3, 4.5).
pub const NODE_CONDITION_TYPES: [&str; 4] =
    ["MaintenanceInProgress", "DrainInProgress", "Drained", MAINTENANCE_PLANNED];
/// Label of control-plane nodes (SPEC 3.5).
pub const CONTROL_PLANE_LABEL: &str = "node-role.kubernetes.io/control-plane";
/// Maximum length of `spec.reason` in characters (SPEC 3.2).
pub const MAX_REASON_CHARS: usize = 1024;

/// Renders the NodeMaintenance CustomResourceDefinition as YAML (what
/// `node-maintenance crd --kind NodeMaintenance` prints and
/// `charts/node-maintenance/crds/nodemaintenances.yaml` holds).
///
/// # Errors
/// Only if YAML serialization fails, which the generated CRD does not trigger.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    use kube::CustomResourceExt;
    serde_saphyr::to_string(&NodeMaintenance::crd())
}

/// Renders the NodeDisruptionBudget CustomResourceDefinition as YAML (what
/// `charts/node-maintenance/crds/nodedisruptionbudgets.yaml` holds).
///
/// # Errors
/// Only if YAML serialization fails, which the generated CRD does not trigger.
pub fn budget_crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    use kube::CustomResourceExt;
    serde_saphyr::to_string(&NodeDisruptionBudget::crd())
}
