//! Expectations, as controller-runtime keeps them: the resourceVersion each node write of
//! this controller gave its node, until the Node cache shows that version or a later one.
//! The loop waits for them before the next decision ([`Expectations::met`]), so a decision
//! reads our own writes from the cache alone: a hold written but not yet seen can never let
//! a NodeDisruptionBudget of one give a second node away, and a conditional node write is
//! never computed from a version we already replaced. The watch brings a write back within
//! milliseconds; a cache that lags longer holds the decisions back (it is stale for every
//! other purpose too), never lets them run on a cache that misses our own writes.

use super::memory::locked;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// By node name, the resourceVersion our last write gave it.
#[derive(Debug, Default)]
pub struct Expectations(Mutex<HashMap<String, u64>>);

impl Expectations {
    /// Expects the cache to show `written`, the node one of our writes returned. A
    /// resourceVersion that is not a number (the API calls it opaque; every apiserver today
    /// gives etcd's revision) cannot be compared, so nothing is expected of it.
    pub fn expect(&self, written: &Node) {
        if let Some(rv) = written.resource_version().and_then(|v| v.parse().ok()) {
            locked(&self.0).insert(written.name_any(), rv);
        }
    }

    /// Forgets what `nodes` shows already: the version expected or a later one, or the node
    /// gone. Returns how many expectations remain.
    fn settle(&self, nodes: &Store<Node>) -> usize {
        let mut expected = locked(&self.0);
        expected.retain(|name, rv| {
            let cached = nodes.get(&ObjectRef::new(name));
            cached.and_then(|n| n.resource_version()?.parse::<u64>().ok()).is_some_and(|seen| seen < *rv)
        });
        expected.len()
    }

    /// Waits until `nodes` shows every expectation, at most `timeout`, waking on
    /// `changes` (the Node cache's change signal) or every 50 ms. Returns whether all are
    /// met.
    pub async fn met(
        &self,
        nodes: &Store<Node>,
        mut changes: tokio::sync::watch::Receiver<()>,
        timeout: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.settle(nodes) > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            let step = tokio::time::sleep(Duration::from_millis(50));
            tokio::select! {
                _ = changes.changed() => {}
                () = step => {}
            }
        }
        true
    }

    /// How many expectations are pending.
    pub fn len(&self) -> usize {
        locked(&self.0).len()
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    fn node(name: &str, rv: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.resource_version = Some(rv.into());
        n
    }

    #[tokio::test]
    async fn an_expectation_is_met_by_its_version_a_later_one_or_the_node_gone() {
        let mut writer = Writer::<Node>::default();
        let store = writer.as_reader();
        writer.apply_watcher_event(&Event::Apply(node("a", "10")));
        writer.apply_watcher_event(&Event::Apply(node("b", "10")));
        let e = Expectations::default();
        e.expect(&node("a", "12"));
        e.expect(&node("b", "11"));
        e.expect(&node("gone", "11"));
        e.expect(&node("opaque", "xyz"));
        let (_tx, rx) = tokio::sync::watch::channel(());
        assert!(!e.met(&store, rx.clone(), Duration::from_millis(120)).await, "the cache shows neither write");
        assert_eq!(e.len(), 2, "a node gone and an opaque version expect nothing");
        writer.apply_watcher_event(&Event::Apply(node("a", "12")));
        writer.apply_watcher_event(&Event::Apply(node("b", "15")));
        assert!(e.met(&store, rx, Duration::from_millis(120)).await);
        assert!(e.is_empty());
    }
}
