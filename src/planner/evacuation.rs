//! The pure part of evacuation by rollout: whether a pod to evict is moved by its
//! Deployment's rollout instead, and where a rollout stands. Plain data in, a verdict out;
//! no I/O, unit-tested without an apiserver. The controller (`controller::evacuate`) acts on
//! the verdict; `review`'s drain preview shows it.

use crate::api::{EVACUATED_FOR_ANNOTATION, EVACUATION_ANNOTATION, Evacuation, EvacuationStatus, RolloutState};
use crate::planner::PodRef;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::sync::Arc;

/// The Deployment controller's reason on the `Progressing` condition once a rollout ran past
/// its `progressDeadlineSeconds` (what `kubectl rollout status` reports as failure).
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// What a pod to evict belongs to, as far as evacuation by rollout cares.
#[derive(Clone, Copy, Debug)]
pub enum Workload<'a> {
    /// No controller ownerReference.
    Bare,
    /// A ReplicaSet's pod whose Deployment is this one.
    Deployment(&'a Deployment),
    /// Any other controller (`StatefulSet`, `Job`, a ReplicaSet without Deployment ...): its
    /// kind and name.
    Other(&'a str, &'a str),
}

/// What the decision about one pod to evict reads.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// The maintenance's choice (`spec.evacuation`, else `--evacuation`).
    pub mode: Evacuation,
    /// `<name>/<uid>` of the maintenance: the value of the pod-template annotation
    /// [`EVACUATED_FOR_ANNOTATION`] on the Deployments it rolled.
    pub maintenance: &'a str,
    /// What the pod belongs to.
    pub workload: Workload<'a>,
    /// The PodDisruptionBudget that refused the pod's last eviction, if one did.
    pub refused_by: Option<&'a PodDisruptionBudget>,
    /// Whether this maintenance already started a rollout of the Deployment in this process
    /// (the cache may not show the annotation yet).
    pub started_here: bool,
}

/// Why a pod that a rollout would have spared a disruption is evicted (or waits on its
/// PodDisruptionBudget) as before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotEvacuated {
    /// A bare pod: nothing would re-create it elsewhere.
    Bare,
    /// Owned by something other than a Deployment (a StatefulSet cannot surge).
    NotADeployment(String),
    /// The Deployment's strategy is Recreate.
    Recreate,
    /// The Deployment's maxSurge resolves to 0.
    NoSurge,
    /// The Deployment's maxUnavailable resolves to this (above 0): its rollout would take
    /// pods down before their replacements are available.
    Unavailable(i32),
    /// The Deployment is paused: a rollout would not progress.
    Paused,
    /// A pod of the Deployment opted out of eviction (a rollout would replace it too).
    OptedOut(String),
}

impl fmt::Display for NotEvacuated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotEvacuated::Bare => f.write_str("a bare pod"),
            NotEvacuated::NotADeployment(owner) => write!(f, "owned by {owner}, not a Deployment"),
            NotEvacuated::Recreate => f.write_str("strategy Recreate"),
            NotEvacuated::NoSurge => f.write_str("maxSurge is 0"),
            NotEvacuated::Unavailable(n) => write!(f, "maxUnavailable is {n}, not 0"),
            NotEvacuated::Paused => f.write_str("the Deployment is paused"),
            NotEvacuated::OptedOut(pod) => write!(f, "its pod {pod} opted out of eviction"),
        }
    }
}

/// What to do with one pod to evict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Evict it as before: evacuation does not concern it.
    Evict,
    /// Evict it as before, and report why it is not evacuated by rollout: it would have
    /// needed it (its Deployment has one replica, or its budget allows no disruption).
    NotEvacuated(NotEvacuated),
    /// Start the rollout of its Deployment, and do not evict it (the Deployment removes it).
    Roll(Need),
    /// Do not evict it: a rollout of its Deployment is moving it (or this maintenance's
    /// rollout failed and the drain waits without forcing). The Deployment's state and the
    /// rollout's words.
    Wait(RolloutState, String),
}

/// Why a pod needs its Deployment's rollout rather than an eviction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// The Deployment has one replica: evicting it is downtime.
    OneReplica,
    /// This PodDisruptionBudget (`namespace/name`) allows no disruption even with every pod
    /// healthy: evictions wait forever.
    Budget(String),
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::OneReplica => f.write_str("its Deployment has one replica"),
            Need::Budget(pdb) => write!(f, "PodDisruptionBudget {pdb} allows no disruption"),
        }
    }
}

/// A rollout to start.
pub struct Rollout {
    /// The Deployment, as the decision read it (the patch is conditional on its
    /// resourceVersion).
    pub deployment: Arc<Deployment>,
    /// The pod's ReplicaSet, checked to be the Deployment's before the rollout starts.
    pub replica_set: String,
    /// The pod it moves.
    pub pod: PodRef,
    /// The node the pod runs on.
    pub node: Arc<Node>,
    /// Why the pod needs a rollout.
    pub need: Need,
}

/// This maintenance's evacuation step: the pods not to evict (a rollout moves them), what to
/// say on each node, the rollouts to start, and the status of the rollouts it started.
#[derive(Default)]
pub struct EvacuationPlan {
    /// UIDs of the pods a rollout moves: not evicted now.
    pub withheld: HashSet<Arc<str>>,
    /// What to say on each node, by node name.
    pub notes: BTreeMap<String, BTreeSet<String>>,
    /// The rollouts to start.
    pub rollouts: Vec<Rollout>,
    /// Pods evacuation does not apply to, with the node and the note of their Warning Event.
    pub not_evacuated: Vec<(Arc<Node>, String)>,
    /// `status.evacuations`: every Deployment this maintenance rolled, by namespace and name.
    pub statuses: Vec<EvacuationStatus>,
}

impl EvacuationPlan {
    /// What evacuation says about `node` (rollouts moving its pods, pods not evacuated and
    /// why), `None` if nothing.
    pub fn note(&self, node: &str) -> Option<String> {
        let notes = self.notes.get(node)?;
        Some(notes.iter().map(String::as_str).collect::<Vec<_>>().join("; "))
    }

    /// Every node's notes, without repeats, at most `limit` of them (`... and N more`).
    pub fn summary(&self, limit: usize) -> Option<String> {
        let all: BTreeSet<&str> = self.notes.values().flatten().map(String::as_str).collect();
        let shown: Vec<&str> = all.iter().copied().take(limit).collect();
        match all.len().saturating_sub(limit) {
            _ if shown.is_empty() => None,
            0 => Some(shown.join("; ")),
            more => Some(format!("{} and {more} more", shown.join("; "))),
        }
    }

    /// Adds `note` to what is said about `node`.
    pub fn say(&mut self, node: &str, note: String) {
        self.notes.entry(node.to_owned()).or_default().insert(note);
    }
}

/// Decides about one pod to evict. `opted_out_pod` names a pod of the Deployment
/// that opted out of eviction, if any; it is asked only when a rollout would start.
pub fn decide(facts: &Facts<'_>, opted_out_pod: impl FnOnce() -> Option<String>) -> Verdict {
    if facts.mode == Evacuation::Evict {
        return Verdict::Evict;
    }
    let budget_blocks = facts.refused_by.filter(|p| never_allows_a_disruption(p));
    let d = match facts.workload {
        Workload::Deployment(d) => d,
        Workload::Bare if budget_blocks.is_some() && facts.mode == Evacuation::Surge => {
            return Verdict::NotEvacuated(NotEvacuated::Bare);
        }
        Workload::Other(kind, name) if budget_blocks.is_some() && facts.mode == Evacuation::Surge => {
            return Verdict::NotEvacuated(NotEvacuated::NotADeployment(format!("{kind} {name}")));
        }
        _ => return Verdict::Evict,
    };
    let annotation = d.metadata.annotations.as_ref().and_then(|a| a.get(EVACUATION_ANNOTATION));
    if !facts.mode.applies_to(annotation.map(String::as_str)) {
        return Verdict::Evict;
    }
    let (state, words) = rollout_state(d);
    if facts.started_here || rolled_for(d) == Some(facts.maintenance) {
        // At most one rollout per Deployment and maintenance: follow it, never start another.
        // Started here but not in the cache yet: the state read is the one before the patch.
        let seen = rolled_for(d) == Some(facts.maintenance);
        return match state {
            _ if !seen => Verdict::Wait(RolloutState::RollingOut, "waiting for the rollout to be observed".into()),
            RolloutState::EvacuatedByRollout => Verdict::Evict,
            _ => Verdict::Wait(state, words),
        };
    }
    let need = if replicas(d) == 1 {
        Need::OneReplica
    } else if let Some(p) = budget_blocks {
        Need::Budget(format!(
            "{}/{}",
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default()
        ))
    } else {
        return Verdict::Evict;
    };
    if let Some(why) = cannot_surge(d) {
        return Verdict::NotEvacuated(why);
    }
    if state == RolloutState::RollingOut {
        // Someone else's rollout (or another maintenance's) is moving the pods already.
        return Verdict::Wait(state, words);
    }
    match opted_out_pod() {
        Some(pod) => Verdict::NotEvacuated(NotEvacuated::OptedOut(pod)),
        None => Verdict::Roll(need),
    }
}

/// The maintenance (`<name>/<uid>`) that started the Deployment's rollout, from its pod
/// template's [`EVACUATED_FOR_ANNOTATION`].
pub fn rolled_for(d: &Deployment) -> Option<&str> {
    let meta = d.spec.template.metadata.as_ref()?;
    meta.annotations.as_ref()?.get(EVACUATED_FOR_ANNOTATION).map(String::as_str)
}

/// `spec.replicas`, 1 when unset (the API default).
fn replicas(d: &Deployment) -> i32 {
    d.spec.replicas.unwrap_or(1)
}

/// Whether a PodDisruptionBudget allows no disruption even with every pod it expects
/// healthy (`minAvailable` equal to the replicas, `maxUnavailable: 0`): waiting never ends.
/// A budget that only has no disruption left for now (one is in progress, a pod is not
/// ready yet) gives it back once replacements are ready, as drains always waited for.
pub fn never_allows_a_disruption(pdb: &PodDisruptionBudget) -> bool {
    let Some(s) = pdb.status.as_ref() else { return false };
    let expected = s.expected_pods.unwrap_or(0);
    expected > 0 && s.desired_healthy.unwrap_or(0) >= expected
}

/// Why the Deployment's rollout would not keep every replica available while it moves the
/// pods, `None` when it would (RollingUpdate, maxSurge above 0, maxUnavailable 0, not paused).
pub fn cannot_surge(d: &Deployment) -> Option<NotEvacuated> {
    if d.spec.paused == Some(true) {
        return Some(NotEvacuated::Paused);
    }
    let strategy = d.spec.strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("Recreate") {
        return Some(NotEvacuated::Recreate);
    }
    let rolling = strategy.and_then(|s| s.rolling_update.as_ref());
    let quarter = IntOrString::String("25%".into());
    let (surge, unavailable) = (
        rolling.and_then(|r| r.max_surge.as_ref()).unwrap_or(&quarter),
        rolling.and_then(|r| r.max_unavailable.as_ref()).unwrap_or(&quarter),
    );
    let n = replicas(d);
    let surge = scaled(surge, n, true);
    // The Deployment controller's fenceposts: both zero makes maxUnavailable 1.
    let unavailable = if surge == 0 { scaled(unavailable, n, false).max(1) } else { scaled(unavailable, n, false) };
    if surge == 0 {
        Some(NotEvacuated::NoSurge)
    } else if unavailable > 0 {
        Some(NotEvacuated::Unavailable(unavailable))
    } else {
        None
    }
}

/// An int-or-percent of `total`, as the Deployment controller resolves it (a percentage
/// rounded up for maxSurge, down for maxUnavailable); an unreadable value counts as 0.
fn scaled(v: &IntOrString, total: i32, round_up: bool) -> i32 {
    match v {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let Some(pct) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else { return 0 };
            let scaled = i64::from(total) * pct;
            let value = if round_up { (scaled + 99).div_euclid(100) } else { scaled.div_euclid(100) };
            i32::try_from(value).unwrap_or(i32::MAX)
        }
    }
}

/// Where the Deployment's current rollout stands, with `kubectl rollout status`'s words:
/// not observed yet, or replicas still being updated, old ones terminating or new ones not
/// available is `RollingOut`; `Progressing` with reason `ProgressDeadlineExceeded` is
/// `RolloutFailed`; everything updated and available is `EvacuatedByRollout`.
pub fn rollout_state(d: &Deployment) -> (RolloutState, String) {
    let status = d.status.clone().unwrap_or_default();
    if status.observed_generation.unwrap_or(0) < d.metadata.generation.unwrap_or(0) {
        return (RolloutState::RollingOut, "waiting for the rollout to be observed".into());
    }
    let progressing = status.conditions.iter().flatten().find(|c| c.type_.as_deref() == Some("Progressing"));
    if let Some(c) = progressing.filter(|c| c.reason.as_deref() == Some(PROGRESS_DEADLINE_EXCEEDED)) {
        let why = c.message.as_deref().unwrap_or("the rollout exceeded its progress deadline");
        return (RolloutState::RolloutFailed, format!("{PROGRESS_DEADLINE_EXCEEDED}: {why}"));
    }
    let (want, updated) = (replicas(d), status.updated_replicas.unwrap_or(0));
    let (total, available) = (status.replicas.unwrap_or(0), status.available_replicas.unwrap_or(0));
    if updated < want {
        (RolloutState::RollingOut, format!("{updated} of {want} new replicas updated"))
    } else if total > updated {
        (RolloutState::RollingOut, format!("{} old replicas pending termination", total - updated))
    } else if available < updated {
        (RolloutState::RollingOut, format!("{available} of {updated} updated replicas available"))
    } else {
        (RolloutState::EvacuatedByRollout, format!("{available} of {want} replicas updated and available"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn deployment(extra: Value) -> Deployment {
        let mut d = json!({
            "metadata": {"name": "web", "namespace": "apps", "generation": 1},
            "spec": {"replicas": 1, "selector": {}, "template": {}},
            "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
        });
        json_patch::merge(&mut d, &extra);
        serde_json::from_value(d).unwrap()
    }

    fn pdb(expected: i32, desired: i32) -> PodDisruptionBudget {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "apps"},
            "status": {"expectedPods": expected, "desiredHealthy": desired, "currentHealthy": expected,
                "disruptionsAllowed": expected - desired, "observedGeneration": 1}}))
        .unwrap()
    }

    fn facts<'a>(mode: Evacuation, d: &'a Deployment, refused_by: Option<&'a PodDisruptionBudget>) -> Facts<'a> {
        Facts { mode, maintenance: "m/u1", workload: Workload::Deployment(d), refused_by, started_here: false }
    }

    fn no_opt_out() -> Option<String> {
        None
    }

    #[test]
    fn a_single_replica_deployment_is_rolled_when_the_maintenance_or_the_deployment_opts_in() {
        let d = deployment(json!({}));
        assert_eq!(decide(&facts(Evacuation::Surge, &d, None), no_opt_out), Verdict::Roll(Need::OneReplica));
        assert_eq!(decide(&facts(Evacuation::Annotated, &d, None), no_opt_out), Verdict::Evict);
        assert_eq!(decide(&facts(Evacuation::Evict, &d, None), no_opt_out), Verdict::Evict);
        let surge = deployment(json!({"metadata": {"annotations": {EVACUATION_ANNOTATION: "surge"}}}));
        assert_eq!(decide(&facts(Evacuation::Annotated, &surge, None), no_opt_out), Verdict::Roll(Need::OneReplica));
        assert_eq!(decide(&facts(Evacuation::Evict, &surge, None), no_opt_out), Verdict::Evict);
        let out = deployment(json!({"metadata": {"annotations": {EVACUATION_ANNOTATION: "evict"}}}));
        assert_eq!(decide(&facts(Evacuation::Surge, &out, None), no_opt_out), Verdict::Evict);
    }

    #[test]
    fn several_replicas_are_rolled_only_when_their_budget_never_allows_a_disruption() {
        let d = deployment(json!({"spec": {"replicas": 3, "strategy": {"rollingUpdate": {"maxUnavailable": 0}}},
            "status": {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3}}));
        assert_eq!(decide(&facts(Evacuation::Surge, &d, None), no_opt_out), Verdict::Evict, "not refused");
        let transient = pdb(3, 2);
        assert_eq!(
            decide(&facts(Evacuation::Surge, &d, Some(&transient)), no_opt_out),
            Verdict::Evict,
            "a budget with no disruption left for now gives it back: wait as before"
        );
        let stuck = pdb(3, 3);
        assert_eq!(
            decide(&facts(Evacuation::Surge, &d, Some(&stuck)), no_opt_out),
            Verdict::Roll(Need::Budget("apps/web".into()))
        );
    }

    #[test]
    fn deployments_that_cannot_surge_are_reported_not_rolled() {
        for (strategy, why) in [
            (json!({"type": "Recreate"}), NotEvacuated::Recreate),
            (json!({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}), NotEvacuated::NoSurge),
            (json!({"rollingUpdate": {"maxSurge": "0%"}}), NotEvacuated::NoSurge),
            (json!({"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}), NotEvacuated::Unavailable(1)),
        ] {
            let d = deployment(json!({"spec": {"strategy": strategy}}));
            assert_eq!(decide(&facts(Evacuation::Surge, &d, None), no_opt_out), Verdict::NotEvacuated(why));
        }
        let paused = deployment(json!({"spec": {"paused": true}}));
        assert_eq!(
            decide(&facts(Evacuation::Surge, &paused, None), no_opt_out),
            Verdict::NotEvacuated(NotEvacuated::Paused)
        );
        let d = deployment(json!({}));
        assert_eq!(
            decide(&facts(Evacuation::Surge, &d, None), || Some("apps/web-1".into())),
            Verdict::NotEvacuated(NotEvacuated::OptedOut("apps/web-1".into())),
            "the opt-out annotations always win"
        );
    }

    #[test]
    fn the_default_strategy_surges_small_deployments_only() {
        let sized = |n: i32| deployment(json!({"spec": {"replicas": n}}));
        assert_eq!(cannot_surge(&sized(1)), None, "25% of 1: surge 1, unavailable 0");
        assert_eq!(cannot_surge(&sized(3)), None);
        assert_eq!(cannot_surge(&sized(4)), Some(NotEvacuated::Unavailable(1)));
        assert_eq!(cannot_surge(&sized(10)), Some(NotEvacuated::Unavailable(2)));
    }

    #[test]
    fn other_workloads_are_reported_when_their_budget_blocks_under_surge() {
        let stuck = pdb(1, 1);
        let f = |workload, refused_by| Facts {
            mode: Evacuation::Surge,
            maintenance: "m/u1",
            workload,
            refused_by,
            started_here: false,
        };
        assert_eq!(
            decide(&f(Workload::Other("StatefulSet", "db"), Some(&stuck)), no_opt_out),
            Verdict::NotEvacuated(NotEvacuated::NotADeployment("StatefulSet db".into()))
        );
        assert_eq!(decide(&f(Workload::Bare, Some(&stuck)), no_opt_out), Verdict::NotEvacuated(NotEvacuated::Bare));
        assert_eq!(decide(&f(Workload::Other("StatefulSet", "db"), None), no_opt_out), Verdict::Evict);
    }

    #[test]
    fn a_maintenance_follows_its_rollout_and_never_starts_a_second() {
        let mine = json!({"metadata": {"generation": 2}, "spec": {"template": {"metadata": {"annotations": {EVACUATED_FOR_ANNOTATION: "m/u1"}}}},
            "status": {"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}});
        let rolling = deployment(mine.clone());
        let (state, words) = rollout_state(&rolling);
        assert_eq!((state, words.as_str()), (RolloutState::RollingOut, "1 old replicas pending termination"));
        assert_eq!(decide(&facts(Evacuation::Surge, &rolling, None), no_opt_out), Verdict::Wait(state, words));
        let mut failed = mine.clone();
        json_patch::merge(
            &mut failed,
            &json!({"status": {"replicas": 2, "updatedReplicas": 1, "availableReplicas": 0,
            "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                "message": "ReplicaSet \"web-2\" has timed out progressing."}]}}),
        );
        let failed = deployment(failed);
        assert_eq!(
            decide(&facts(Evacuation::Surge, &failed, None), no_opt_out),
            Verdict::Wait(
                RolloutState::RolloutFailed,
                "ProgressDeadlineExceeded: ReplicaSet \"web-2\" has timed out progressing.".into()
            ),
            "a failed rollout holds the pod: nothing forced, nothing started again"
        );
        let mut done = mine;
        json_patch::merge(&mut done, &json!({"status": {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}}));
        let done = deployment(done);
        assert_eq!(rollout_state(&done).0, RolloutState::EvacuatedByRollout);
        assert_eq!(
            decide(&facts(Evacuation::Surge, &done, None), no_opt_out),
            Verdict::Evict,
            "left-overs are evicted"
        );
        let other = Facts { maintenance: "m/u2", ..facts(Evacuation::Surge, &done, None) };
        assert_eq!(
            decide(&other, no_opt_out),
            Verdict::Roll(Need::OneReplica),
            "a new maintenance (uid) may roll again"
        );
        let d = deployment(json!({}));
        let started = Facts { started_here: true, ..facts(Evacuation::Surge, &d, None) };
        assert_eq!(
            decide(&started, no_opt_out),
            Verdict::Wait(RolloutState::RollingOut, "waiting for the rollout to be observed".into()),
            "started in this process but not in the cache yet: wait, do not start again"
        );
    }

    #[test]
    fn someone_elses_rollout_is_waited_for() {
        let d = deployment(json!({"metadata": {"generation": 3}}));
        assert_eq!(
            decide(&facts(Evacuation::Surge, &d, None), no_opt_out),
            Verdict::Wait(RolloutState::RollingOut, "waiting for the rollout to be observed".into())
        );
    }
}
