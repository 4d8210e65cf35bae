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
use kube::runtime::watcher;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock};

/// The latest index, shared by the cache's clones.
pub(super) type SharedIndex = Arc<RwLock<Arc<NodeIndex>>>;

/// Reads the latest index.
pub(super) fn latest(index: &SharedIndex) -> Arc<NodeIndex> {
    index.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Says which Node watch events change a Node's name or labels: it remembers a fingerprint of
/// each Node's labels.
#[derive(Debug, Default)]
pub(super) struct LabelTracker {
    fingerprints: HashMap<String, u64>,
    /// Fingerprints of a (re)list in progress; they replace the others once it is complete.
    relist: Option<HashMap<String, u64>>,
}

fn fingerprint(node: &Node) -> (String, u64) {
    let mut h = DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    (node.metadata.name.clone().unwrap_or_default(), h.finish())
}

impl LabelTracker {
    /// Whether the index must be rebuilt after `event` (already applied to the Node store):
    /// a Node appeared, went away or changed labels, or a (re)list completed.
    pub(super) fn changes_index(&mut self, event: &watcher::Event<Node>) -> bool {
        match event {
            watcher::Event::Apply(node) => {
                let (name, fp) = fingerprint(node);
                self.fingerprints.insert(name, fp) != Some(fp)
            }
            watcher::Event::Delete(node) => {
                self.fingerprints.remove(node.metadata.name.as_deref().unwrap_or_default());
                true
            }
            watcher::Event::Init => {
                self.relist = Some(HashMap::new());
                false
            }
            watcher::Event::InitApply(node) => {
                let (name, fp) = fingerprint(node);
                self.relist.get_or_insert_default().insert(name, fp);
                false
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.relist.take() {
                    self.fingerprints = listed;
                }
                true
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(name: &str, labels: &[(&str, &str)], heartbeat: &str) -> Node {
        let labels: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let annotations = BTreeMap::from([("hb".to_string(), heartbeat.to_string())]);
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(labels),
                annotations: Some(annotations),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_names_and_labels_change_the_index() {
        use watcher::Event::*;
        let mut t = LabelTracker::default();
        assert!(!t.changes_index(&Init));
        assert!(!t.changes_index(&InitApply(node("a", &[("pool", "x")], "1"))));
        assert!(t.changes_index(&InitDone), "a completed list is indexed");
        assert!(!t.changes_index(&Apply(node("a", &[("pool", "x")], "2"))), "a heartbeat is not a change");
        assert!(t.changes_index(&Apply(node("a", &[("pool", "y")], "2"))), "a label changed");
        assert!(t.changes_index(&Apply(node("b", &[], "1"))), "a new node");
        assert!(t.changes_index(&Delete(node("b", &[], "1"))), "a node went away");
        assert!(t.changes_index(&Apply(node("b", &[], "1"))), "and came back");
    }
}
