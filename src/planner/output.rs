//! What one planning pass returns (SPEC 4.3): the statuses to publish and the pods to evict.

use crate::api::DrainPlanEntry;
use jiff::Timestamp;
use std::sync::Arc;

/// A pod to act on: evict it with its UID as precondition (SPEC 4.3).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodRef {
    /// Namespace of the pod.
    pub namespace: Arc<str>,
    /// Name of the pod.
    pub name: Arc<str>,
    /// UID precondition.
    pub uid: Arc<str>,
}

/// Why a targeted pod is reported instead of evicted (SPEC 4.3 "Blocked progress").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BlockedCause {
    /// A static (mirror) pod: the kubelet owns it, it is never evicted.
    StaticPod,
    /// A DaemonSet pod that tolerates the draining taint: it would come straight back.
    ToleratesDrainingTaint,
    /// Annotated `karpenter.sh/do-not-disrupt: "true"` or
    /// `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`.
    OptedOut,
    /// No controller re-creates it, and `--unmanaged-pods=block`.
    Unmanaged,
    /// It has `emptyDir` volumes, and `--emptydir-pods=block`.
    EmptyDir,
}

impl BlockedCause {
    /// Every cause, in the order summaries list them.
    pub const ALL: [BlockedCause; 5] = [
        BlockedCause::StaticPod,
        BlockedCause::ToleratesDrainingTaint,
        BlockedCause::OptedOut,
        BlockedCause::Unmanaged,
        BlockedCause::EmptyDir,
    ];

    /// How the controller names the cause in node messages and the `Drained` condition
    /// (SPEC 4.3 "Blocked progress"), e.g. `static pods (never evicted)`.
    pub fn label(self) -> &'static str {
        match self {
            BlockedCause::StaticPod => "static pods (never evicted)",
            BlockedCause::ToleratesDrainingTaint => "DaemonSet pods tolerating the draining taint",
            BlockedCause::OptedOut => "opted out",
            BlockedCause::Unmanaged => "unmanaged pods (no controller; --unmanaged-pods=block)",
            BlockedCause::EmptyDir => "pods with emptyDir data (--emptydir-pods=block)",
        }
    }

    /// Whether such a pod keeps its node from being drained (opt-outs and blocked
    /// pods hold the drain so that the operator sees them). Static pods and DaemonSet pods
    /// tolerating the taint do not: nothing could ever remove them (SPEC 4.3).
    pub fn holds_drain(self) -> bool {
        !matches!(self, BlockedCause::StaticPod | BlockedCause::ToleratesDrainingTaint)
    }
}

/// What an eviction loses, reported when such a pod is evicted (`--unmanaged-pods`
/// and `--emptydir-pods` at `evict`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EvictionRisk {
    /// No controller re-creates the pod.
    Unmanaged,
    /// Its `emptyDir` data goes with it.
    EmptyDir,
}

impl EvictionRisk {
    /// How node messages name it, e.g. `evicting unmanaged pods (nothing re-creates them)`.
    pub fn label(self) -> &'static str {
        match self {
            EvictionRisk::Unmanaged => "evicting unmanaged pods (nothing re-creates them)",
            EvictionRisk::EmptyDir => "evicting pods with emptyDir data (the data is deleted)",
        }
    }
}

/// A pod to evict whose eviction loses something.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RiskyPod {
    /// The pod (also in [`NodePlan::evict`] or already being evicted).
    pub pod: PodRef,
    /// What goes with it.
    pub risk: EvictionRisk,
}

/// A targeted pod the controller will not evict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockedPod {
    /// The pod.
    pub pod: PodRef,
    /// Why it stays.
    pub cause: BlockedCause,
}

/// The plan for one selected node (SPEC 4.3; published in `status.nodeStatuses` and the node
/// annotation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodePlan {
    /// The node's name.
    pub name: String,
    /// The Drain maintenances selecting it, sorted by name.
    pub maintenances: Vec<String>,
    /// The effective drain targets: group-wise minimum of the proposals, then group-wise
    /// maximum with the floor. Persist them: they are the next pass's floor.
    pub drain_targets: Vec<DrainPlanEntry>,
    /// `Draining`, `Draining (limited by x, y)`, `Waiting for x.`, `Waiting for a drain slot
    /// (...)`, `Blocked by pods that are not evicted.`, `Waiting for pods to complete`,
    /// `Drained` or `Drain plan complete`.
    pub drain_message: String,
    /// Targeted pods the controller is responsible for and has not evicted yet.
    pub pods_pending_eviction_request: i32,
    /// Targeted pods whose eviction was accepted (or that are terminating) and still exist.
    pub active_eviction_requests: i32,
    /// Pods to evict now, lowest priority first (DaemonSet pods only once the node is tainted).
    pub evict: Vec<PodRef>,
    /// Targeted pods that are reported, never evicted.
    pub blocked: Vec<BlockedPod>,
    /// Targeted pods left to finish (SPEC 4.6 `spec.waitForCompletion`): not evicted while
    /// they run, and the node is not drained until they are terminal; sorted.
    pub waiting_for_completion: Vec<PodRef>,
    /// The earliest instant ahead at which a wait for one of its pods left to finish ends (its
    /// node's drain start plus the timeout of a maintenance selecting it): the pass must be
    /// planned again then, as that pod may have to be evicted. `None`: no such deadline.
    pub wait_deadline: Option<Timestamp>,
    /// Targeted pods evicted although that loses something (a pod with both risks is listed
    /// twice), sorted.
    pub at_risk: Vec<RiskyPod>,
    /// The node has pods to evict but waits for a drain slot (`spec.maxUnavailable` of a
    /// maintenance selecting it, or `--max-draining-nodes`): nothing is evicted from it now.
    pub waiting_for_slot: bool,
    /// The targets include podType DaemonSet and DaemonSet pods are evicted: the node needs
    /// the `nodemaintenance.k8s.io/draining:NoSchedule` taint.
    pub needs_daemonset_taint: bool,
    /// No pod the controller is responsible for remains on the node.
    pub drained: bool,
    /// Its drain may not start (a pause or a closed gate before its drain started, SPEC
    /// 4.6): not Drained even with nothing to evict, and its Node says `WaitingForGate`.
    pub waiting_for_gate: bool,
    /// Why its drain stands where it does, as data (`drain_message` in words).
    pub reason: DrainReason,
}

/// The plan for one maintenance (SPEC 4.3; published in `status.drainStatus`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MaintenancePlan {
    /// `metadata.name`.
    pub name: String,
    /// The new cursor (`status.drainStatus.drainPlanIndex`); never below the stored one.
    pub drain_plan_index: i32,
    /// The least powerful effective targets among its nodes.
    pub reached_drain_targets: Vec<DrainPlanEntry>,
    /// `Draining`, `Draining (limited by x, y)`, `Waiting for x.`, `Waiting for pods to
    /// complete`, `Drained` or `Drain plan complete`: [`Self::reason`] in words
    /// ([`DrainReason::message`]).
    pub drain_message: String,
    /// Why the drain stands where it does, as data (`review` reads it rather than
    /// parsing the message).
    pub reason: DrainReason,
    /// Sum of its nodes' pending counts.
    pub pods_pending_eviction_request: i32,
    /// Sum of its nodes' active counts.
    pub active_eviction_requests: i32,
    /// Sum of its nodes' pods left to finish (SPEC 4.6).
    pub pods_waiting_for_completion: i32,
    /// No pod the controller is responsible for remains on any of its nodes (condition
    /// `Drained`).
    pub drained: bool,
    /// Nodes on which its proposal is below the node's targets (sorted).
    pub fast_forwarded_on: Vec<String>,
}

/// Why a maintenance's drain stands where it does: its `drainMessage` (SPEC 4.3
/// "Messages") as data, for callers that act on it rather than show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DrainReason {
    /// Pods are being evicted on some of its nodes; `limited_by`: the other maintenances
    /// that hold it below its own proposal there (sorted; empty when none does).
    Draining {
        /// Names of the limiting maintenances.
        limited_by: Vec<String>,
    },
    /// No node drains and some wait for a drain slot; each entry names a full
    /// budget and its use (`m-a: 1 of 1 nodes draining`), sorted.
    WaitingForSlot {
        /// The full budgets.
        budgets: Vec<String>,
    },
    /// No node drains and some may not start evictions (a pause or a closed gate, SPEC 4.6):
    /// the union of their gates.
    Gated(super::wait::Gates),
    /// Stuck: it cannot advance until these maintenances do (sorted).
    WaitingFor {
        /// Names of the maintenances waited for.
        maintenances: Vec<String>,
    },
    /// Nothing it is responsible for remains.
    #[default]
    Drained,
    /// Nothing left to evict, but pods that are reported instead hold the drain.
    Blocked,
    /// Nothing left to evict and nothing blocked, but pods left to finish still run (SPEC
    /// 4.6 "Pods that finish"): condition `Drained` False with reason `WaitingForCompletion`.
    /// Not a stall: the pods end by themselves, or at the wait's timeout.
    WaitingForCompletion,
    /// Every plan is through but pods the plans never select remain.
    PlanComplete,
}

impl DrainReason {
    /// The other maintenances this one is held back by: those limiting it while it drains or
    /// those it waits for (sorted); empty otherwise.
    pub fn held_back_by(&self) -> &[String] {
        match self {
            DrainReason::Draining { limited_by: names } | DrainReason::WaitingFor { maintenances: names } => names,
            _ => &[],
        }
    }
}

/// Why a maintenance is fast-forwarded on a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FastForwardCause {
    /// The node already reached further (an older maintenance drained it): SPEC 4.3.
    NodeAlreadyReached,
    /// Plans with podSelectors ordered pods in opposite ways and every maintenance involved
    /// waited for another; the oldest one was let through on this node.
    ConflictingPlans,
}

/// A maintenance whose proposal is below a node's targets: emit an Event (SPEC 4.3, 4.4).
/// Reported on every pass while it holds; de-duplicate before emitting.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FastForward {
    /// The maintenance fast-forwarded.
    pub maintenance: String,
    /// The node.
    pub node: String,
    /// Why.
    pub cause: FastForwardCause,
}

/// What one planning pass decided (SPEC 4.3): per node and per maintenance. Not to be
/// confused with a maintenance's `spec.drainPlan` (the ordered entries the pass reads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DrainDecision {
    /// Every node selected by some Drain maintenance, sorted by name.
    pub nodes: Vec<NodePlan>,
    /// One per input maintenance, in input order.
    pub maintenances: Vec<MaintenancePlan>,
    /// Fast-forwards, sorted.
    pub fast_forwards: Vec<FastForward>,
    /// Problems with the input that did not stop planning (e.g. an invalid podSelector).
    pub warnings: Vec<String>,
    /// The earliest [`NodePlan::wait_deadline`] (SPEC 4.6): the decision holds until then at
    /// most, as a pod left to finish may then have to be evicted.
    pub wait_deadline: Option<Timestamp>,
    /// The position of each node's plan by name, built on the first lookup: every
    /// maintenance's decision looks up each node it holds in the one shared pass.
    pub by_name: Positions,
}

/// [`DrainDecision::nodes`]' positions by node name, built once on first use; it reads the
/// nodes as they are then, so a decision is not to be changed after a lookup. Equal to any
/// other: it is derived from the nodes.
#[derive(Clone, Debug, Default)]
pub struct Positions(std::sync::OnceLock<rustc_hash::FxHashMap<String, usize>>);

impl PartialEq for Positions {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl DrainDecision {
    /// Takes a node name; returns its plan, `None` when no Drain maintenance selects it.
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.position(name).map(|i| &self.nodes[i])
    }

    /// Takes a node name; returns the position of its plan in [`DrainDecision::nodes`].
    pub fn position(&self, name: &str) -> Option<usize> {
        let by_name =
            self.by_name.0.get_or_init(|| self.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect());
        by_name.get(name).copied()
    }

    /// Takes a maintenance name; returns its plan, `None` when it was not in the input.
    pub fn maintenance(&self, name: &str) -> Option<&MaintenancePlan> {
        self.maintenances.iter().find(|m| m.name == name)
    }
}
