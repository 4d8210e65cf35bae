//! What one planning pass takes (SPEC 4.3): plain data the controller builds from its caches.

use super::pods::PodView;
use crate::api::DrainPlanEntry;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::time::Duration;

/// One NodeMaintenance in the Drain stage (SPEC 4.3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MaintenanceInput {
    /// `metadata.name`.
    pub name: String,
    /// Creation time (e.g. Unix seconds of `metadata.creationTimestamp`); with `name` it orders
    /// maintenances by age, the older one winning when plans conflict.
    pub created: i64,
    /// `spec.drainPlan`, canonical (SPEC 3.1: defaulted and sorted by admission).
    pub drain_plan: Vec<DrainPlanEntry>,
    /// The persisted cursor, `status.drainStatus.drainPlanIndex` (0 when there is none yet).
    /// Negative values count as 0, values past the plan as its last entry.
    pub drain_plan_index: i32,
    /// Names of the nodes it drains (duplicates are ignored): those its nodeSelector selects
    /// and it holds, cordoned (a rolling maintenance holds only some at a time).
    pub nodes: Vec<String>,
    /// `spec.waitForCompletion`: the pods on its nodes left to finish instead of being
    /// evicted (SPEC 4.6); `None`: none.
    pub wait_for_completion: Option<CompletionWait>,
}

/// A maintenance's `spec.waitForCompletion` (SPEC 4.6 "Pods that finish"): which pods on its
/// nodes are not evicted while they run, and for how long.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompletionWait {
    /// `podSelector`: the pods waited for, by label. `None`: pods whose controller is a Job.
    /// Either way pods annotated `nodemaintenance.k8s.io/wait-for-completion: "true"` are
    /// waited for too. An invalid selector selects no pod (admission refuses one).
    pub pod_selector: Option<LabelSelector>,
    /// `timeout`, counted from each node's drain start ([`NodeInput::drain_start`]): after
    /// it, the pods still running are evicted like any other. `None`: no limit.
    pub timeout: Option<Duration>,
}

/// What the controller persisted about one node (SPEC 4.3, node annotation
/// `nodemaintenance.k8s.io/maintenance-status`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeInput {
    /// The node's name.
    pub name: String,
    /// The drain targets the node already reached: the floor its targets never go below.
    pub reached: Vec<DrainPlanEntry>,
    /// Whether the node already carries the `nodemaintenance.k8s.io/draining:NoSchedule`
    /// taint; DaemonSet pods are evicted only then.
    pub draining_taint: bool,
    /// Why no new eviction may start on the node now (SPEC 4.6: a pause, or a closed gate
    /// of a budget selecting a node whose drain has not started); `None`: evictions may
    /// start. A node whose drain has not started and that has it is not Drained.
    pub gated: Option<super::wait::Gates>,
    /// When its drain started (`drainStartTime` of its published status, SPEC 4.6): the
    /// start of every `waitForCompletion.timeout` on it. `None`: not started, so no wait
    /// timeout runs yet.
    pub drain_start: Option<Timestamp>,
}

/// What the controller does with pods whose eviction loses something: pods with no
/// controller (nothing re-creates them) and pods with `emptyDir` volumes (their data goes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum PodPolicy {
    /// Evict them like any other pod, and report each one (status message, Warning Event).
    #[default]
    Evict,
    /// Do not evict them: they are reported as blockers and hold the drain.
    Block,
}

/// Switches of the planner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlannerOptions {
    /// `--skip-daemonset-pods`: DaemonSet pods are neither evicted nor waited for.
    pub skip_daemonset_pods: bool,
    /// `--unmanaged-pods`: what happens to pods no controller re-creates.
    pub unmanaged_pods: PodPolicy,
    /// `--emptydir-pods`: what happens to pods with `emptyDir` volumes.
    pub emptydir_pods: PodPolicy,
    /// `--max-draining-nodes`: at most this many nodes drain at once over all maintenances;
    /// `None` for no limit.
    pub max_draining_nodes: Option<u32>,
}

/// Everything one planning pass needs (SPEC 4.3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlannerInput {
    /// The maintenances in the Drain stage. Others must be left out.
    pub maintenances: Vec<MaintenanceInput>,
    /// The pods; pods on nodes no maintenance selects are ignored.
    pub pods: Vec<PodView>,
    /// Persisted node state; a selected node without an entry starts from no floor.
    pub nodes: Vec<NodeInput>,
    /// Switches.
    pub options: PlannerOptions,
    /// The time of the pass, compared with the deadlines of `waitForCompletion` (SPEC 4.6): a
    /// wait is over at its node's drain start plus its timeout.
    pub now: Timestamp,
}
