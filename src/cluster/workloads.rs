//! The workloads a drain preview needs: Pods, PodDisruptionBudgets and, when
//! present, ReplicaSets, from a `kubectl get nodes,pods,pdb,rs -A -o yaml` dump or from one
//! LIST of each in the cluster. Standalone `serve` never reads them.

use super::standalone::{LoadError, for_each_item};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::path::Path;

/// Pods, PodDisruptionBudgets and ReplicaSets of a cluster, as read once.
#[derive(Clone, Debug, Default)]
pub struct Workloads {
    /// Every Pod.
    pub pods: Vec<Pod>,
    /// Every PodDisruptionBudget (policy/v1).
    pub pdbs: Vec<PodDisruptionBudget>,
    /// The ReplicaSets, `None` when the source had none to offer (a dump taken without `rs`):
    /// owners are then resolved by the `pod-template-hash` naming convention.
    pub replica_sets: Option<Vec<ReplicaSet>>,
    /// The Deployments (which would be rolled instead of waiting); empty when the
    /// source had none.
    pub deployments: Vec<Deployment>,
}

impl Workloads {
    /// Whether there is anything to preview a drain with: some Pod or PodDisruptionBudget.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.pdbs.is_empty()
    }

    /// Reads Pods, PodDisruptionBudgets and ReplicaSets from a cluster file (the formats of
    /// [`super::standalone::StaticView::load`]); other kinds are skipped. `replica_sets` is
    /// `Some` only when the file holds at least one ReplicaSet.
    ///
    /// # Errors
    /// [`LoadError`] when the file is unreadable, not YAML/JSON, or holds a malformed Pod,
    /// PodDisruptionBudget or ReplicaSet.
    pub fn load(path: &Path) -> Result<Self, LoadError> {
        let mut w = Workloads::default();
        let mut rs = Vec::new();
        for_each_item(path, |item| {
            match item.kind.as_str() {
                "Pod" => w.pods.push(item.decode()?),
                "PodDisruptionBudget" => w.pdbs.push(item.decode()?),
                "ReplicaSet" => rs.push(item.decode()?),
                "Deployment" => w.deployments.push(item.decode()?),
                _ => {}
            }
            Ok(())
        })?;
        w.replica_sets = (!rs.is_empty()).then_some(rs);
        Ok(w)
    }

    /// One LIST of Pods, PodDisruptionBudgets and ReplicaSets in all namespaces, with the
    /// client's credentials. ReplicaSets that cannot be listed (e.g. forbidden) leave
    /// `replica_sets` at `None`.
    ///
    /// # Errors
    /// The apiserver's error when Pods or PodDisruptionBudgets cannot be listed.
    pub async fn list(client: &kube::Client) -> Result<Self, kube::Error> {
        use kube::api::{Api, ListParams};
        let lp = ListParams::default();
        let pods = Api::<Pod>::all(client.clone()).list(&lp).await?.items;
        let pdbs = Api::<PodDisruptionBudget>::all(client.clone()).list(&lp).await?.items;
        let replica_sets = match Api::<ReplicaSet>::all(client.clone()).list(&lp).await {
            Ok(l) => Some(l.items),
            Err(e) => {
                tracing::debug!(error = %e, "cannot list ReplicaSets; owners by pod-template-hash");
                None
            }
        };
        let deployments = Api::<Deployment>::all(client.clone()).list(&lp).await.map(|l| l.items).unwrap_or_else(|e| {
            tracing::debug!(error = %e, "cannot list Deployments; no evacuation by rollout previewed");
            Vec::new()
        });
        Ok(Workloads { pods, pdbs, replica_sets, deployments })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_pods_pdbs_and_replicasets_and_skips_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        std::fs::write(
            &p,
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: a}}\n\
             - {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ns}}\n\
             - {apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: b, namespace: ns}}\n",
        )
        .unwrap();
        let w = Workloads::load(&p).unwrap();
        assert_eq!((w.pods.len(), w.pdbs.len(), w.replica_sets.is_none()), (1, 1, true));
        std::fs::write(&p, "{apiVersion: apps/v1, kind: ReplicaSet, metadata: {name: r, namespace: ns}}\n").unwrap();
        assert_eq!(Workloads::load(&p).unwrap().replica_sets.map(|r| r.len()), Some(1));
    }
}
