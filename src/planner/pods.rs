//! What the planner needs to know about a pod, and how to get it from a core/v1 Pod
//! (SPEC 2 "Pod types", SPEC 4.3 DaemonSet and static pods).

use crate::api::{DRAINING_TAINT, PodType, WAIT_FOR_COMPLETION_ANNOTATION};
use k8s_openapi::api::core::v1::{Pod, Toleration};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Annotation the kubelet puts on the mirror pod of a static pod: such pods are podType Static
/// (SPEC 2 "Pod types").
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Karpenter's opt-out: a pod annotated `karpenter.sh/do-not-disrupt: "true"` is not
/// evicted.
pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
/// Cluster Autoscaler's opt-out: a pod annotated
/// `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` is not evicted.
pub const SAFE_TO_EVICT_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/safe-to-evict";

/// A pod's labels, sorted by key. The controller's Pod cache shares one set between every
/// pod that has the same labels (the pods of a ReplicaSet or DaemonSet), and a planning pass
/// copies none of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PodLabels(Arc<[(Arc<str>, Arc<str>)]>);

impl PodLabels {
    /// Labels from pairs already sorted by key with no key twice (what a `BTreeMap` yields);
    /// the cache builds them from its shared strings.
    pub fn from_sorted(pairs: Arc<[(Arc<str>, Arc<str>)]>) -> Self {
        PodLabels(pairs)
    }

    /// The value of label `key`, `None` when the pod has no such label.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &*self.0[i].1)
    }

    /// The labels, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for PodLabels {
    /// Labels from any pairs; a key given twice keeps its last value, as in a label map.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let map: BTreeMap<String, String> =
            pairs.into_iter().map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())).collect();
        PodLabels(map.into_iter().map(|(k, v)| (Arc::from(k), Arc::from(v))).collect())
    }
}

/// The planner's view of one pod (SPEC 4.3). Its strings are shared (`Arc<str>`) with the
/// controller's Pod cache, so building the views of 100,000 pods for a planning pass copies
/// no string (docs/benchmarks.md, "Controller: planning pass and memory").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodView {
    /// Namespace of the pod.
    pub namespace: Arc<str>,
    /// Name of the pod.
    pub name: Arc<str>,
    /// UID, used as the eviction precondition (SPEC 4.3).
    pub uid: Arc<str>,
    /// The node it is bound to.
    pub node_name: Arc<str>,
    /// `spec.priority`, 0 when absent (SPEC 2).
    pub priority: i32,
    /// Default, DaemonSet or Static (SPEC 2).
    pub pod_type: PodType,
    /// The pod's labels, for drainPlan podSelectors.
    pub labels: PodLabels,
    /// An eviction was accepted or the pod is terminating: it still counts as present (the
    /// drain waits for it) but is not evicted again.
    pub eviction_in_progress: bool,
    /// Phase Succeeded or Failed: the pod is neither counted nor evicted (SPEC 2).
    pub terminal: bool,
    /// The pod tolerates the `nodemaintenance.k8s.io/draining:NoSchedule` taint; as a DaemonSet
    /// pod it would come straight back, so it is reported instead of evicted (SPEC 4.3).
    pub tolerates_draining_taint: bool,
    /// The pod opted out of eviction ([`opted_out`]): reported, never evicted, and it holds
    /// the drain.
    pub opted_out: bool,
    /// No controller ownerReference: nothing re-creates the pod once it is evicted.
    pub unmanaged: bool,
    /// The pod has `emptyDir` volumes: their data goes with it.
    pub emptydir: bool,
    /// Its controller ownerReference is a batch Job: what a maintenance's
    /// `spec.waitForCompletion` without podSelector waits for (SPEC 4.6).
    pub owned_by_job: bool,
    /// Annotated `nodemaintenance.k8s.io/wait-for-completion: "true"`: every maintenance with
    /// `spec.waitForCompletion` set waits for it, whatever its podSelector (SPEC 4.6).
    pub wait_annotated: bool,
}

impl Default for PodView {
    /// An unbound Default pod with priority 0, no labels and no name.
    fn default() -> Self {
        PodView {
            namespace: Arc::from(""),
            name: Arc::from(""),
            uid: Arc::from(""),
            node_name: Arc::from(""),
            priority: 0,
            pod_type: PodType::Default,
            labels: PodLabels::default(),
            eviction_in_progress: false,
            terminal: false,
            tolerates_draining_taint: false,
            opted_out: false,
            unmanaged: false,
            emptydir: false,
            owned_by_job: false,
            wait_annotated: false,
        }
    }
}

/// Classifies a pod (SPEC 2): Static when it has the `kubernetes.io/config.mirror`
/// annotation, DaemonSet when its controller ownerReference is of kind DaemonSet, Default
/// otherwise.
pub fn classify_pod(pod: &Pod) -> PodType {
    let meta = &pod.metadata;
    if meta.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION)) {
        return PodType::Static;
    }
    let owned_by_daemonset =
        meta.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
    if owned_by_daemonset { PodType::DaemonSet } else { PodType::Default }
}

/// Whether a toleration tolerates the `nodemaintenance.k8s.io/draining:NoSchedule` taint
/// (which has no value), by the core/v1 toleration matching rules. A DaemonSet pod with such a
/// toleration is reported, not evicted (SPEC 4.3).
pub fn tolerates_draining_taint(t: &Toleration) -> bool {
    let effect_ok = t.effect.as_deref().is_none_or(|e| e.is_empty() || e == "NoSchedule");
    let key = t.key.as_deref().unwrap_or_default();
    let op = t.operator.as_deref().unwrap_or("Equal");
    let key_ok = key == DRAINING_TAINT || (key.is_empty() && op == "Exists");
    let value_ok = op == "Exists" || (op == "Equal" && t.value.as_deref().unwrap_or_default().is_empty());
    effect_ok && key_ok && value_ok
}

/// Whether the pod opted out of eviction with an annotation the ecosystem already uses:
/// `karpenter.sh/do-not-disrupt: "true"` or
/// `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`. Other values are not an opt-out
/// (both tools read them so).
pub fn opted_out(pod: &Pod) -> bool {
    let Some(a) = pod.metadata.annotations.as_ref() else { return false };
    a.get(DO_NOT_DISRUPT_ANNOTATION).is_some_and(|v| v == "true")
        || a.get(SAFE_TO_EVICT_ANNOTATION).is_some_and(|v| v == "false")
}

/// Whether the pod's controller ownerReference is a batch Job (any version of `batch`): what
/// `spec.waitForCompletion` without podSelector waits for (SPEC 4.6).
pub fn owned_by_job(pod: &Pod) -> bool {
    let owners = pod.metadata.owner_references.iter().flatten();
    owners.filter(|o| o.controller == Some(true)).any(|o| o.kind == "Job" && o.api_version.starts_with("batch/"))
}

/// Whether the pod is annotated `nodemaintenance.k8s.io/wait-for-completion: "true"` (other
/// values are not): with a maintenance's `spec.waitForCompletion` set, it is left to finish
/// (SPEC 4.6).
pub fn wait_annotated(pod: &Pod) -> bool {
    pod.metadata.annotations.as_ref().and_then(|a| a.get(WAIT_FOR_COMPLETION_ANNOTATION)).is_some_and(|v| v == "true")
}

impl PodView {
    /// Builds the view of a Pod (SPEC 2, 4.3). `eviction_accepted` says whether the controller
    /// already had an eviction of this pod (this UID) accepted. Returns `None` for a pod that is
    /// not bound to a node or has no name.
    pub fn from_pod(pod: &Pod, eviction_accepted: bool) -> Option<PodView> {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref()?;
        let node_name = spec.node_name.as_deref().filter(|n| !n.is_empty())?.into();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        Some(PodView {
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            name: meta.name.as_deref()?.into(),
            uid: meta.uid.as_deref().unwrap_or_default().into(),
            node_name,
            priority: spec.priority.unwrap_or(0),
            pod_type: classify_pod(pod),
            labels: meta.labels.iter().flatten().collect(),
            eviction_in_progress: eviction_accepted || meta.deletion_timestamp.is_some(),
            terminal: matches!(phase, Some("Succeeded" | "Failed")),
            tolerates_draining_taint: spec.tolerations.iter().flatten().any(tolerates_draining_taint),
            opted_out: opted_out(pod),
            unmanaged: !meta.owner_references.iter().flatten().any(|o| o.controller == Some(true)),
            emptydir: spec.volumes.iter().flatten().any(|v| v.empty_dir.is_some()),
            owned_by_job: owned_by_job(pod),
            wait_annotated: wait_annotated(pod),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta { name: Some("p".into()), namespace: Some("ns".into()), ..Default::default() },
            spec: Some(PodSpec { node_name: Some("one".into()), ..Default::default() }),
            status: None,
        }
    }

    fn owner(kind: &str, controller: bool) -> OwnerReference {
        OwnerReference { kind: kind.into(), controller: Some(controller), name: "x".into(), ..Default::default() }
    }

    #[test]
    fn mirror_annotation_makes_a_static_pod() {
        let mut p = pod();
        p.metadata.annotations = Some(BTreeMap::from([(MIRROR_POD_ANNOTATION.to_string(), "abc".to_string())]));
        p.metadata.owner_references = Some(vec![owner("DaemonSet", true)]);
        assert_eq!(classify_pod(&p), PodType::Static);
    }

    #[test]
    fn controller_owner_of_kind_daemonset_makes_a_daemonset_pod() {
        let mut p = pod();
        p.metadata.owner_references = Some(vec![owner("DaemonSet", true)]);
        assert_eq!(classify_pod(&p), PodType::DaemonSet);
        p.metadata.owner_references = Some(vec![owner("DaemonSet", false), owner("ReplicaSet", true)]);
        assert_eq!(classify_pod(&p), PodType::Default);
        assert_eq!(classify_pod(&pod()), PodType::Default);
    }

    #[test]
    fn priority_defaults_to_zero_and_terminal_phases_are_marked() {
        let mut p = pod();
        let v = PodView::from_pod(&p, false);
        assert_eq!(v.as_ref().map(|v| (v.priority, v.terminal)), Some((0, false)));
        p.status = Some(PodStatus { phase: Some("Succeeded".into()), ..Default::default() });
        if let Some(s) = p.spec.as_mut() {
            s.priority = Some(7);
        }
        let v = PodView::from_pod(&p, true);
        assert_eq!(v.map(|v| (v.priority, v.terminal, v.eviction_in_progress)), Some((7, true, true)));
    }

    #[test]
    fn opt_out_annotations_unmanaged_pods_and_emptydir_are_seen() {
        let annotated = |key: &str, value: &str| {
            let mut p = pod();
            p.metadata.annotations = Some(BTreeMap::from([(key.to_string(), value.to_string())]));
            p
        };
        assert!(opted_out(&annotated(DO_NOT_DISRUPT_ANNOTATION, "true")));
        assert!(!opted_out(&annotated(DO_NOT_DISRUPT_ANNOTATION, "false")));
        assert!(opted_out(&annotated(SAFE_TO_EVICT_ANNOTATION, "false")));
        assert!(!opted_out(&annotated(SAFE_TO_EVICT_ANNOTATION, "true")));
        assert!(!opted_out(&pod()));

        let mut p = pod();
        let v = PodView::from_pod(&p, false).unwrap();
        assert!(v.unmanaged && !v.emptydir && !v.opted_out);
        p.metadata.owner_references = Some(vec![owner("ReplicaSet", false)]);
        assert!(
            PodView::from_pod(&p, false).unwrap().unmanaged,
            "an owner that is not the controller re-creates nothing"
        );
        p.metadata.owner_references = Some(vec![owner("ReplicaSet", true)]);
        if let Some(s) = p.spec.as_mut() {
            s.volumes = Some(vec![k8s_openapi::api::core::v1::Volume {
                name: "scratch".into(),
                empty_dir: Some(Default::default()),
                ..Default::default()
            }]);
        }
        let v = PodView::from_pod(&p, false).unwrap();
        assert!(!v.unmanaged && v.emptydir);
    }

    #[test]
    fn job_pods_and_the_wait_annotation_are_seen() {
        let mut p = pod();
        p.metadata.owner_references =
            Some(vec![OwnerReference { api_version: "batch/v1".into(), ..owner("Job", true) }]);
        let v = PodView::from_pod(&p, false).unwrap();
        assert!(v.owned_by_job && !v.wait_annotated);
        p.metadata.owner_references =
            Some(vec![OwnerReference { api_version: "batch/v1".into(), ..owner("Job", false) }]);
        assert!(!owned_by_job(&p), "an owner that is not the controller does not run the pod");
        p.metadata.owner_references =
            Some(vec![OwnerReference { api_version: "example.com/v1".into(), ..owner("Job", true) }]);
        assert!(!owned_by_job(&p), "a Job of another API group");
        for (value, waited) in [("true", true), ("false", false), ("yes", false)] {
            p.metadata.annotations =
                Some(BTreeMap::from([(WAIT_FOR_COMPLETION_ANNOTATION.to_string(), value.to_string())]));
            assert_eq!(PodView::from_pod(&p, false).map(|v| v.wait_annotated), Some(waited), "{value}");
        }
    }

    #[test]
    fn unbound_pod_has_no_view() {
        let mut p = pod();
        p.spec = Some(PodSpec::default());
        assert_eq!(PodView::from_pod(&p, false), None);
    }

    #[test]
    fn toleration_of_the_draining_taint_follows_core_matching() {
        let tol = |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| Toleration {
            key: key.map(Into::into),
            operator: op.map(Into::into),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
            toleration_seconds: None,
        };
        assert!(tolerates_draining_taint(&tol(None, Some("Exists"), None, None)));
        assert!(tolerates_draining_taint(&tol(Some(DRAINING_TAINT), Some("Exists"), None, Some("NoSchedule"))));
        assert!(tolerates_draining_taint(&tol(Some(DRAINING_TAINT), None, None, None)));
        assert!(!tolerates_draining_taint(&tol(Some(DRAINING_TAINT), None, Some("x"), None)));
        assert!(!tolerates_draining_taint(&tol(Some(DRAINING_TAINT), Some("Exists"), None, Some("NoExecute"))));
        assert!(!tolerates_draining_taint(&tol(Some("node.kubernetes.io/unschedulable"), Some("Exists"), None, None)));
    }
}
