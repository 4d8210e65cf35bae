//! The cluster cache's [`NodeIndex`] (SPEC 3.4, 3.5): rebuilt when a Node's name or labels
//! change, never on the heartbeats and status updates that make up almost every Node event.
//!
//! The rebuild runs off the request path (a blocking task), so a review never pays for it: it
//! reads the index built last. That index trails the Node cache by one build (a few
//! milliseconds at 5,000 Nodes, about 100 ms at 50,000: docs/benchmarks.md), as the cache
//! itself trails the apiserver by the watch's latency (docs/decisions.md).

use crate::selector::NodeIndex;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use std::sync::{Arc, PoisonError, RwLock};

/// The latest index, shared by the cache's clones.
pub(super) type SharedIndex = Arc<RwLock<Arc<NodeIndex>>>;

/// Reads the latest index.
pub(super) fn latest(index: &SharedIndex) -> Arc<NodeIndex> {
    index.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Keeps `index` current: builds it from `nodes` once the store is ready (then reports
/// `built`), and again after every change `changes` signals (changes during a build coalesce
/// into the next one). Returns when `changes` closes.
pub(super) async fn maintain(
    nodes: Store<Node>,
    index: SharedIndex,
    mut changes: tokio::sync::watch::Receiver<()>,
    built: impl Fn(),
) {
    if nodes.wait_until_ready().await.is_err() {
        return;
    }
    loop {
        changes.mark_unchanged();
        let store = nodes.clone();
        match tokio::task::spawn_blocking(move || NodeIndex::new(store.state().iter().map(AsRef::as_ref))).await {
            Ok(fresh) => *index.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(fresh),
            Err(e) => tracing::error!(error = %e, "building the Node index failed"),
        }
        built();
        if changes.changed().await.is_err() {
            return;
        }
    }
}
