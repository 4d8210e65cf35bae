//! The controller's Deployment and PodDisruptionBudget caches: evacuation by
//! rollout decides from them whether a pod's Deployment can surge, whether its budget can
//! ever allow a disruption, and how a rollout it started is going. Deployments are kept
//! without their pod template's spec (the rollout is followed through `status`, and the
//! template's annotations say which maintenance rolled it), so a cluster's Deployments
//! cost about what their metadata does.

use crate::api::EVACUATED_FOR_ANNOTATION;
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

/// Annotation `kubectl apply` keeps the whole last applied object in; never read here.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The cached Deployments and PodDisruptionBudgets of the cluster.
#[derive(Clone)]
pub struct WorkloadCaches {
    /// Deployments, without `spec.template.spec`, managed fields and the last applied
    /// configuration.
    pub deployments: Store<Deployment>,
    /// PodDisruptionBudgets, without managed fields.
    pub pdbs: Store<PodDisruptionBudget>,
}

impl WorkloadCaches {
    /// Waits until both caches listed once.
    ///
    /// # Errors
    /// When a driving stream was dropped before its first list.
    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.deployments.wait_until_ready().await?;
        self.pdbs.wait_until_ready().await
    }
}

/// Drops what evacuation never reads of a Deployment.
fn strip_deployment(d: &mut Deployment) {
    d.metadata.managed_fields = None;
    if let Some(a) = d.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
    d.spec.template.spec = None;
    if let Some(meta) = d.spec.template.metadata.as_mut() {
        meta.labels = None;
        meta.managed_fields = None;
    }
}

/// Whether the Deployment carries a rollout started by a maintenance (its changes are worth
/// a decision: the rollout is being followed).
pub fn rolled_by_a_maintenance(d: &Deployment) -> bool {
    let meta = d.spec.template.metadata.as_ref();
    meta.and_then(|m| m.annotations.as_ref()).is_some_and(|a| a.contains_key(EVACUATED_FOR_ANNOTATION))
}

/// A change of a workload that a decision waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadChange {
    /// A Deployment that a maintenance rolled changed ([`rolled_by_a_maintenance`]: a rollout
    /// being followed moved).
    Rollout,
    /// A PodDisruptionBudget that refused one of our evictions allows a disruption again:
    /// the refused pod may go now, at the pace the budget allows.
    PdbAllows,
}

/// Starts cluster-wide watches of Deployments and PodDisruptionBudgets. Returns the caches
/// and the stream that drives them, yielding a [`WorkloadChange`] after each change of a
/// Deployment that a maintenance rolled and after each change of a PodDisruptionBudget that
/// allows a disruption and that `waited(namespace, name)` says refused one of our evictions;
/// poll it to keep the caches current. Watch errors are retried with kube's default backoff
/// and logged.
pub fn workload_caches(
    client: Client,
    waited: impl Fn(&str, &str) -> bool + Send + 'static,
) -> (WorkloadCaches, impl Stream<Item = WorkloadChange> + Send + 'static) {
    let (deployments, d_writer) = reflector::store();
    let (pdbs, p_writer) = reflector::store();
    let d_stream = watcher(Api::<Deployment>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(strip_deployment)
        .reflect(d_writer)
        .filter_map(|event| {
            let out = match event {
                Ok(watcher::Event::Apply(d) | watcher::Event::Delete(d)) => {
                    rolled_by_a_maintenance(&d).then_some(WorkloadChange::Rollout)
                }
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "Deployment watch failed; retrying");
                    None
                }
            };
            std::future::ready(out)
        });
    let p_stream = watcher(Api::<PodDisruptionBudget>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(|p: &mut PodDisruptionBudget| p.metadata.managed_fields = None)
        .reflect(p_writer)
        .filter_map(move |event| {
            let out = match event {
                Ok(watcher::Event::Apply(p)) => {
                    let allows = p.status.as_ref().is_some_and(|s| s.disruptions_allowed.is_some_and(|n| n > 0));
                    let refused_ours = || waited(p.namespace().as_deref().unwrap_or_default(), &p.name_any());
                    (allows && refused_ours()).then_some(WorkloadChange::PdbAllows)
                }
                Ok(_) => None,
                Err(e) => {
                    tracing::warn!(error = %e, "PodDisruptionBudget watch failed; retrying");
                    None
                }
            };
            std::future::ready(out)
        });
    (WorkloadCaches { deployments, pdbs }, futures::stream::select(d_stream, p_stream))
}

/// How many disruptions the cached PodDisruptionBudget `namespace/name` allows now (its
/// `status.disruptionsAllowed`, as the disruption controller last wrote it; 0 without a
/// status). `None`: the budget is not in the cache.
pub fn pdb_disruptions_allowed(pdbs: &Store<PodDisruptionBudget>, namespace: &str, name: &str) -> Option<i32> {
    let key = reflector::ObjectRef::new(name).within(namespace);
    pdbs.get(&key).map(|p| p.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0))
}

/// The ReplicaSet `namespace/name`, read afresh from the API (not cached: a rollout starts only
/// once the pod's ReplicaSet is known to be the Deployment's).
///
/// # Errors
/// The API error.
pub async fn replica_set(client: &Client, namespace: &str, name: &str) -> kube::Result<ReplicaSet> {
    Api::<ReplicaSet>::namespaced(client.clone(), namespace).get(name).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripped_deployments_keep_what_evacuation_reads() {
        let mut d: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "apps", "managedFields": [{"manager": "kubectl"}],
                "annotations": {LAST_APPLIED: "{...}", "nodemaintenance.k8s.io/evacuation": "surge"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                "template": {"metadata": {"labels": {"app": "web"},
                    "annotations": {EVACUATED_FOR_ANNOTATION: "m/u"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}},
            "status": {"availableReplicas": 1}
        }))
        .unwrap();
        assert!(rolled_by_a_maintenance(&d));
        strip_deployment(&mut d);
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["metadata"]["annotations"], serde_json::json!({"nodemaintenance.k8s.io/evacuation": "surge"}));
        assert!(json["metadata"].get("managedFields").is_none());
        assert!(json["spec"]["template"].get("spec").is_none());
        assert_eq!(json["spec"]["template"]["metadata"]["annotations"][EVACUATED_FOR_ANNOTATION], "m/u");
        assert_eq!(json["spec"]["strategy"]["rollingUpdate"]["maxSurge"], 1);
        assert_eq!(json["status"]["availableReplicas"], 1);
        assert!(rolled_by_a_maintenance(&d));
    }
}
