//! Which Node watch events matter to whom. Almost every Node event is a heartbeat or a status
//! update that neither the Node index (names and labels) nor the controller (labels,
//! annotations, spec, its own conditions) reads; reacting to those would rebuild the index
//! and re-run every decision several times a second on a large cluster, for nothing.
//!
//! Not kube-runtime's `WatchStreamExt::predicate_filter` (kube-runtime 5.0): it sees only
//! applied objects, so a deleted Node (which changes selections and budgets) would not
//! count; a Node deleted while the watch was down is not noticed at the relist; and its
//! cache forgets an object not seen for its TTL (1 h), after which the next sighting counts as
//! a change: on a cluster whose Nodes rarely change, every relist would re-trigger everything.
//! [`Changes`] compares each relist as a whole with what it knew.

use crate::api::NODE_CONDITION_TYPES;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::watcher;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

/// What of a Node a reader depends on, as a hash.
pub(super) type Fingerprint = fn(&Node) -> u64;

/// The Node's labels (its name is the key): what the Node index reads.
pub(super) fn labels(node: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    node.metadata.labels.hash(&mut h);
    h.finish()
}

/// What the controller reads of a Node: labels, annotations (holders, published status, the
/// done signal), spec (unschedulable, taints), deletion, the conditions it sets, whether the
/// node is Ready and its boot ID (NodeDisruptionBudgets and reboot releases). Not
/// heartbeat times, addresses or capacity.
pub(super) fn controller_inputs(node: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    let meta = &node.metadata;
    (&meta.labels, &meta.annotations, meta.deletion_timestamp.is_some()).hash(&mut h);
    serde_json::to_string(&node.spec).unwrap_or_default().hash(&mut h);
    for c in node.status.iter().flat_map(|s| s.conditions.iter().flatten()) {
        if NODE_CONDITION_TYPES.contains(&c.type_.as_str()) {
            (&c.type_, &c.status, &c.reason, &c.message).hash(&mut h);
        } else if c.type_ == "Ready" {
            c.status.hash(&mut h);
        }
    }
    node.status.as_ref().and_then(|s| s.node_info.as_ref()).map(|i| &i.boot_id).hash(&mut h);
    h.finish()
}

/// Remembers one fingerprint per Node and says which watch events change it.
#[derive(Debug)]
pub(super) struct Changes {
    fingerprint: Fingerprint,
    seen: HashMap<String, u64>,
    /// Fingerprints of a (re)list in progress; they replace `seen` once it is complete.
    relist: Option<HashMap<String, u64>>,
}

impl Changes {
    /// Tracks `fingerprint` of every Node.
    pub(super) fn new(fingerprint: Fingerprint) -> Self {
        Changes { fingerprint, seen: HashMap::new(), relist: None }
    }

    fn key(&self, node: &Node) -> (String, u64) {
        (node.metadata.name.clone().unwrap_or_default(), (self.fingerprint)(node))
    }

    /// Whether `event` (already applied to the Node store) changes what the reader depends
    /// on: a Node appeared, went away or changed its fingerprint, or a (re)list completed.
    pub(super) fn changed_by(&mut self, event: &watcher::Event<Node>) -> bool {
        match event {
            watcher::Event::Apply(node) => {
                let (name, fp) = self.key(node);
                self.seen.insert(name, fp) != Some(fp)
            }
            watcher::Event::Delete(node) => {
                self.seen.remove(node.metadata.name.as_deref().unwrap_or_default());
                true
            }
            watcher::Event::Init => {
                self.relist = Some(HashMap::new());
                false
            }
            watcher::Event::InitApply(node) => {
                let (name, fp) = self.key(node);
                self.relist.get_or_insert_default().insert(name, fp);
                false
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.relist.take() {
                    self.seen = listed;
                }
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(name: &str, pool: &str, heartbeat: &str) -> Node {
        let ready = NodeCondition { type_: "Ready".into(), status: "True".into(), ..Default::default() };
        let mut ready = ready;
        ready.last_heartbeat_time =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(heartbeat.parse().expect("timestamp")));
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("pool".to_string(), pool.to_string())])),
                ..Default::default()
            },
            spec: Some(NodeSpec::default()),
            status: Some(NodeStatus { conditions: Some(vec![ready]), ..Default::default() }),
        }
    }

    const T1: &str = "2026-11-23T10:00:00Z";
    const T2: &str = "2026-11-23T10:00:10Z";

    #[test]
    fn only_what_the_reader_depends_on_is_a_change() {
        use watcher::Event::*;
        let mut index = Changes::new(labels);
        let mut controller = Changes::new(controller_inputs);
        for c in [&mut index, &mut controller] {
            assert!(!c.changed_by(&Init));
            assert!(!c.changed_by(&InitApply(node("a", "x", T1))));
            assert!(c.changed_by(&InitDone), "a completed list is a change");
            assert!(!c.changed_by(&Apply(node("a", "x", T2))), "a heartbeat is not a change");
            assert!(c.changed_by(&Apply(node("a", "y", T2))), "a label changed");
            assert!(c.changed_by(&Apply(node("b", "x", T1))), "a new node");
            assert!(c.changed_by(&Delete(node("b", "x", T1))), "a node went away");
        }
        let mut cordoned = node("a", "y", T2);
        cordoned.spec = Some(NodeSpec { unschedulable: Some(true), ..Default::default() });
        assert!(!index.changed_by(&Apply(cordoned.clone())), "the index reads labels only");
        assert!(controller.changed_by(&Apply(cordoned.clone())), "the controller reads the spec");
        let mut ours = cordoned.clone();
        ours.status.as_mut().unwrap().conditions.as_mut().unwrap().push(NodeCondition {
            type_: "MaintenanceInProgress".into(),
            status: "True".into(),
            ..Default::default()
        });
        assert!(controller.changed_by(&Apply(ours)), "and its own conditions");
    }
}
