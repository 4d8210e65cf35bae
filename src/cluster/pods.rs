//! The controller's Pod cache (SPEC 4.3): a reflector over every Pod, stripped to what the
//! drain planner reads (clusters have 100,000 pods; a full Pod is kilobytes).

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

/// Keeps only the fields [`crate::controller::planner::PodView::from_pod`] reads: name,
/// namespace, uid, labels, the mirror-pod annotation, the controller ownerReference,
/// deletionTimestamp, `spec.nodeName`, `spec.priority`, `spec.tolerations`, `status.phase`.
pub fn strip_pod(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    meta.generate_name = None;
    meta.finalizers = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.retain(|k, _| k == crate::controller::planner::MIRROR_POD_ANNOTATION);
    }
    if let Some(owners) = meta.owner_references.as_mut() {
        owners.retain(|o| o.controller == Some(true));
        for o in owners.iter_mut() {
            o.api_version.clear();
            o.uid.clear();
        }
    }
    pod.spec = pod.spec.take().map(|s| PodSpec {
        node_name: s.node_name,
        priority: s.priority,
        tolerations: s.tolerations,
        containers: Vec::new(),
        ..Default::default()
    });
    pod.status = pod.status.take().map(|s| PodStatus { phase: s.phase, ..Default::default() });
}

/// Starts a cluster-wide Pod reflector. Returns the store and the stream that drives it,
/// yielding `()` after each applied change (used to trigger reconciles); poll it to keep the
/// store current. Watch errors are retried with kube's default backoff and logged.
pub fn pod_cache(client: Client) -> (Store<Pod>, impl Stream<Item = ()> + Send + 'static) {
    let (store, writer) = reflector::store();
    let stream = watcher(Api::<Pod>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(strip_pod)
        .reflect(writer)
        .filter_map(|event| async move {
            match event {
                Ok(_) => Some(()),
                Err(e) => {
                    tracing::warn!(error = %e, "Pod watch failed; retrying");
                    None
                }
            }
        });
    (store, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::planner::PodView;

    #[test]
    fn stripping_keeps_what_the_planner_reads() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "x"},
                "annotations": {"kubernetes.io/config.mirror": "h", "big": "x"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "o", "controller": true}],
                "managedFields": [{"manager": "m"}]},
            "spec": {"nodeName": "n1", "priority": 7, "containers": [{"name": "c", "image": "i"}],
                "tolerations": [{"key": "nodemaintenance.k8s.io/draining", "operator": "Exists"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        }))
        .unwrap();
        let before = PodView::from_pod(&pod, false);
        let mut stripped = pod.clone();
        strip_pod(&mut stripped);
        assert_eq!(PodView::from_pod(&stripped, false), before);
        assert!(stripped.spec.as_ref().unwrap().containers.is_empty());
        assert_eq!(stripped.metadata.annotations.as_ref().unwrap().len(), 1);
        assert!(serde_json::to_string(&stripped).unwrap().len() < serde_json::to_string(&pod).unwrap().len());
    }
}
