//! Watch caches of Nodes and NodeMaintenances (SPEC 3.5: admission never LISTs per request):
//! kube-runtime reflectors, with what no decision reads stripped to keep memory small.
//!
//! These watches are the only ones of their kinds in the process: the controller reads the
//! same stores and change signals instead of opening watches of its own.

use super::changes::{self, Changes};
use super::node_index::{self, SharedIndex};
use crate::admission::ClusterView;
use crate::api::{NodeDisruptionBudget, NodeMaintenance};
use crate::selector::NodeIndex;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, NodeStatus, NodeSystemInfo};
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
    budgets: Store<NodeDisruptionBudget>,
    budget_changes: tokio::sync::watch::Receiver<()>,
    maintenance_changes: tokio::sync::watch::Receiver<()>,
    changes: tokio::sync::watch::Receiver<()>,
    synced: tokio::sync::watch::Receiver<bool>,
    index: SharedIndex,
}

impl ClusterView for ClusterCache {
    fn node_index(&self) -> Arc<NodeIndex> {
        node_index::latest(&self.index)
    }

    fn maintenances(&self) -> Vec<Arc<NodeMaintenance>> {
        self.maintenances.state()
    }

    fn nodes(&self) -> Vec<Arc<Node>> {
        self.nodes.state()
    }

    fn budgets(&self) -> Vec<Arc<NodeDisruptionBudget>> {
        self.budgets.state()
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
    /// Starts watching Nodes, NodeMaintenances and NodeDisruptionBudgets cluster-wide. Returns the cache (empty until
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
                // Images, volumes and addresses are most of a Node; only conditions (Ready, and
                // the maintenance conditions' transition times) and the boot ID (reboot
                // releases) are read.
                n.status = n.status.take().map(|s| NodeStatus {
                    conditions: s.conditions,
                    node_info: s.node_info.map(|i| NodeSystemInfo { boot_id: i.boot_id, ..Default::default() }),
                    ..Default::default()
                });
            })
            .reflect(node_writer);
        let nm_stream = watcher(Api::<NodeMaintenance>::all(client.clone()), watcher::Config::default())
            .default_backoff()
            .modify(strip_metadata)
            .reflect(nm_writer);
        let (budgets, budget_writer) = reflector::store();
        let (budget_changed, budget_changes) = tokio::sync::watch::channel(());
        let budget_stream = watcher(Api::<NodeDisruptionBudget>::all(client), watcher::Config::default())
            .default_backoff()
            .modify(strip_metadata)
            .reflect(budget_writer)
            .for_each(mark_changes(budget_changed, "NodeDisruptionBudget"));
        let (maintenance_changed, maintenance_changes) = tokio::sync::watch::channel(());
        let (changed, changes) = tokio::sync::watch::channel(());
        let (labels_changed, label_changes) = tokio::sync::watch::channel(());
        let index = SharedIndex::default();
        // The stores' own readiness wakes only ONE waiter (kube-runtime's DelayedInit polls a
        // oneshot receiver, which keeps the last waker): these futures are its only waiters and
        // publish the result on a watch channel, which wakes any number. Synced means both
        // lists are complete and the Node index was built from them (SPEC 3.4 fails closed
        // until then).
        let (synced_tx, synced) = tokio::sync::watch::channel(false);
        let maintain_index = {
            let (nodes, maintenances, index) = (nodes.clone(), maintenances.clone(), index.clone());
            async move {
                if maintenances.wait_until_ready().await.is_ok() {
                    let built = move || {
                        synced_tx.send_if_modified(|synced| !std::mem::replace(synced, true));
                    };
                    node_index::maintain(nodes, index, label_changes, built).await;
                }
            }
        };
        let drive = async move {
            let (mut labels, mut inputs) = (Changes::new(changes::labels), Changes::new(changes::controller_inputs));
            let nodes = node_stream.for_each(move |e| {
                match e {
                    Ok(event) => {
                        if labels.changed_by(&event) {
                            labels_changed.send_replace(());
                        }
                        if inputs.changed_by(&event) {
                            changed.send_replace(());
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "Node watch failed; retrying"),
                }
                async {}
            });
            let nms = nm_stream.for_each(mark_changes(maintenance_changed, "NodeMaintenance"));
            futures::join!(nodes, nms, budget_stream, maintain_index);
        };
        let cache =
            ClusterCache { nodes, maintenances, budgets, budget_changes, maintenance_changes, changes, synced, index };
        (cache, drive)
    }

    /// Waits until both caches have had their initial list (any number of tasks may wait);
    /// never returns if the driving future is dropped first.
    pub async fn wait_synced(&self) {
        if self.synced.clone().wait_for(|synced| *synced).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// A receiver that is marked changed after every Node watch event that changes what the
    /// controller reads of a Node (labels, annotations, spec, deletion, its own conditions):
    /// not after heartbeats (the controller's trigger).
    pub fn node_changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.changes.clone()
    }

    /// The Node store (shared with the controller).
    pub fn node_store(&self) -> Store<Node> {
        self.nodes.clone()
    }

    /// The NodeDisruptionBudget store. Its readiness is not part of
    /// [`ClusterCache::wait_synced`] (admission only warns from it); the controller waits for
    /// it before it cordons anything.
    pub fn budget_store(&self) -> Store<NodeDisruptionBudget> {
        self.budgets.clone()
    }

    /// A receiver marked changed after every NodeDisruptionBudget change (and each relist).
    pub fn budget_changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.budget_changes.clone()
    }

    /// A receiver marked changed after every NodeMaintenance change (and each relist): one
    /// of the controller loop's triggers.
    pub fn maintenance_changes(&self) -> tokio::sync::watch::Receiver<()> {
        self.maintenance_changes.clone()
    }

    /// The NodeMaintenance store (shared with the controller).
    pub fn maintenance_store(&self) -> Store<NodeMaintenance> {
        self.maintenances.clone()
    }
}

/// A watch event handler that marks `changed` after every object applied or deleted and each
/// completed relist, and logs watch errors naming `kind` (the watch retries them).
fn mark_changes<K>(
    changed: tokio::sync::watch::Sender<()>,
    kind: &'static str,
) -> impl FnMut(watcher::Result<watcher::Event<K>>) -> std::future::Ready<()> {
    move |e| {
        match e {
            Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone) => {
                changed.send_replace(());
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "{kind} watch failed; retrying"),
        }
        std::future::ready(())
    }
}
