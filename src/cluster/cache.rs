//! Watch caches of Nodes and NodeMaintenances (SPEC 3.5: admission never LISTs per request):
//! kube-runtime reflectors, with what no decision reads stripped to keep memory small.

use crate::admission::ClusterView;
use crate::api::NodeMaintenance;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeStatus};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use std::sync::Arc;

/// The annotation kubectl writes on `apply`: often the largest part of a small object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Read-only caches of Nodes and NodeMaintenances, kept current by watches.
#[derive(Clone)]
pub struct ClusterCache {
    nodes: Store<Node>,
    maintenances: Store<NodeMaintenance>,
    changes: tokio::sync::watch::Receiver<()>,
    synced: tokio::sync::watch::Receiver<bool>,
}

impl ClusterView for ClusterCache {
    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.state()
    }

    fn maintenances(&self) -> Vec<Arc<NodeMaintenance>> {
        self.maintenances.state()
    }

    fn synced(&self) -> bool {
        *self.synced.borrow()
    }
}

fn strip_metadata<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

impl ClusterCache {
    /// Starts watching Nodes and NodeMaintenances cluster-wide. Returns the cache (empty until
    /// synced: see [`ClusterCache::wait_synced`] and [`ClusterView::synced`]) and the future
    /// that drives both watches; spawn it. Watch errors are retried with kube's default
    /// backoff and logged.
    pub fn start(client: Client) -> (Self, impl Future<Output = ()> + Send + 'static) {
        let (nodes, node_writer) = reflector::store();
        let (maintenances, nm_writer) = reflector::store();
        let node_stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .modify(|n: &mut Node| {
                strip_metadata(n);
                // Images, volumes and addresses are most of a Node; only conditions are read
                // (to keep the maintenance conditions' transition times).
                n.status = n.status.take().map(|s| NodeStatus { conditions: s.conditions, ..Default::default() });
            })
            .reflect(node_writer);
        let nm_stream = watcher(Api::<NodeMaintenance>::all(client), watcher::Config::default())
            .default_backoff()
            .modify(strip_metadata)
            .reflect(nm_writer);
        let (changed, changes) = tokio::sync::watch::channel(());
        // The stores' own readiness wakes only ONE waiter (kube-runtime's DelayedInit polls a
        // oneshot receiver, which keeps the last waker): this future is its only waiter and
        // publishes the result on a watch channel, which wakes any number.
        let (synced_tx, synced) = tokio::sync::watch::channel(false);
        let mark_synced = {
            let (nodes, maintenances) = (nodes.clone(), maintenances.clone());
            async move {
                let (n, m) = futures::join!(nodes.wait_until_ready(), maintenances.wait_until_ready());
                if n.is_ok() && m.is_ok() {
                    synced_tx.send_replace(true);
                }
            }
        };
        let drive = async move {
            let nodes = node_stream.for_each(move |e| {
                match e {
                    Ok(_) => changed.send_replace(()),
                    Err(e) => tracing::warn!(error = %e, "Node watch failed; retrying"),
                }
                async {}
            });
            let nms = nm_stream.for_each(|e| async move {
                if let Err(e) = e {
                    tracing::warn!(error = %e, "NodeMaintenance watch failed; retrying");
                }
            });
            futures::join!(nodes, nms, mark_synced);
        };
        (ClusterCache { nodes, maintenances, changes, synced }, drive)
    }

    /// Waits until both caches have had their initial list (any number of tasks may wait);
    /// never returns if the driving future is dropped first.
    pub async fn wait_synced(&self) {
        if self.synced.clone().wait_for(|synced| *synced).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// A receiver that is marked changed after every Node watch event (controller trigger).
    pub fn node_changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.changes.clone()
    }

    /// The Node store (shared with the controller).
    pub fn node_store(&self) -> Store<Node> {
        self.nodes.clone()
    }

    /// The NodeMaintenance store (shared with the controller).
    pub fn maintenance_store(&self) -> Store<NodeMaintenance> {
        self.maintenances.clone()
    }
}
