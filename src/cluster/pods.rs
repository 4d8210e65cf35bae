//! The controller's Pod cache (SPEC 4.3): a watch over every Pod that keeps, per pod, only
//! what the drain planner reads, compactly. Clusters have 100,000 pods; a full Pod is
//! kilobytes, and even stripped, a `k8s_openapi` Pod in kube's reflector takes about 3.9 KiB
//! of heap (the struct alone is 2.4 KiB): 390 MiB for 100,000 pods. Here a pod takes about
//! 0.2 KiB: its name and uid, with namespaces, node names and whole label sets (the pods of
//! one ReplicaSet or DaemonSet have the same) shared between pods (docs/benchmarks.md,
//! "Controller: planning pass and memory").

use crate::api::PodType;
use crate::planner::{PodLabels, PodView};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

/// A string shared by every pod that has it (namespaces, node names, label keys and values).
type Sym = Arc<str>;

/// Namespace and name.
type Key = (Sym, Arc<str>);

/// A pod's labels, sorted by key; shared by every pod with the same labels.
type Labels = Arc<[(Sym, Sym)]>;

/// What the cache keeps of one bound pod: [`PodView`] without namespace and name (the key),
/// with `eviction_in_progress` meaning "terminating" (the controller's own accepted
/// evictions are added when views are built).
#[derive(Debug, PartialEq)]
struct CachedPod {
    uid: Arc<str>,
    node_name: Sym,
    labels: Labels,
    priority: i32,
    pod_type: PodType,
    terminating: bool,
    terminal: bool,
    tolerates_draining_taint: bool,
    opted_out: bool,
    unmanaged: bool,
    emptydir: bool,
    owned_by_job: bool,
    wait_annotated: bool,
    /// Kind and name of the controller ownerReference (for evacuation by rollout), shared
    /// strings.
    controller: Option<(Sym, Sym)>,
}

/// Shared strings and label sets; forgotten once no cached pod uses them.
#[derive(Debug, Default)]
struct Interner {
    set: HashSet<Sym>,
    label_sets: HashSet<Labels>,
    swept_at: usize,
}

impl Interner {
    fn get(&mut self, s: &str) -> Sym {
        if let Some(sym) = self.set.get(s) {
            return sym.clone();
        }
        let sym: Sym = Arc::from(s);
        self.set.insert(sym.clone());
        sym
    }

    fn labels(&mut self, labels: &PodLabels) -> Labels {
        let pairs: Vec<(Sym, Sym)> = labels.iter().map(|(k, v)| (self.get(k), self.get(v))).collect();
        if let Some(set) = self.label_sets.get(pairs.as_slice()) {
            return set.clone();
        }
        let set: Labels = pairs.into();
        self.label_sets.insert(set.clone());
        set
    }

    /// Drops the strings only the interner holds, once the set doubled since the last sweep
    /// (amortised O(1) per pod).
    fn sweep_if_grown(&mut self) {
        if self.set.len() + self.label_sets.len() > 2 * self.swept_at.max(1024) {
            // Label sets first: they hold strings.
            self.label_sets.retain(|l| Arc::strong_count(l) > 1);
            self.label_sets.shrink_to_fit();
            self.set.retain(|s| Arc::strong_count(s) > 1);
            self.set.shrink_to_fit();
            self.swept_at = self.set.len() + self.label_sets.len();
        }
    }
}

#[derive(Debug, Default)]
struct State {
    pods: HashMap<Key, CachedPod>,
    /// Objects of a (re)list in progress; replaces `pods` when the list is complete, as in
    /// kube's reflector.
    buffer: Option<HashMap<Key, CachedPod>>,
    strings: Interner,
}

impl State {
    fn key(&mut self, pod: &Pod) -> Option<Key> {
        let meta = &pod.metadata;
        let name = meta.name.as_deref()?;
        Some((self.strings.get(meta.namespace.as_deref().unwrap_or_default()), name.into()))
    }

    /// The cache entry of a pod, `None` for one the planner ignores (unbound or nameless).
    fn entry(&mut self, pod: &Pod) -> Option<(Key, CachedPod)> {
        let view = PodView::from_pod(pod, false)?;
        let key = (self.strings.get(&view.namespace), view.name);
        let labels = self.strings.labels(&view.labels);
        let cached = CachedPod {
            uid: view.uid,
            node_name: self.strings.get(&view.node_name),
            labels,
            priority: view.priority,
            pod_type: view.pod_type,
            terminating: view.eviction_in_progress,
            terminal: view.terminal,
            tolerates_draining_taint: view.tolerates_draining_taint,
            opted_out: view.opted_out,
            unmanaged: view.unmanaged,
            emptydir: view.emptydir,
            owned_by_job: view.owned_by_job,
            wait_annotated: view.wait_annotated,
            controller: controller_of(pod).map(|(kind, name)| (self.strings.get(kind), self.strings.get(name))),
        };
        Some((key, cached))
    }

    /// Applies a watch event. Returns whether it completed a list, and what it changed of
    /// what the planner reads (`None` for nothing: a status update, an unbound pod).
    fn apply(&mut self, event: watcher::Event<Pod>) -> (bool, Option<PodChange>) {
        let change = match event {
            watcher::Event::Init => {
                self.buffer = Some(HashMap::new());
                None
            }
            watcher::Event::InitApply(pod) => {
                if let Some((key, cached)) = self.entry(&pod) {
                    self.buffer.get_or_insert_default().insert(key, cached);
                }
                None
            }
            watcher::Event::InitDone => {
                if let Some(listed) = self.buffer.take() {
                    self.pods = listed;
                }
                self.strings.sweep_if_grown();
                return (true, Some(PodChange::All));
            }
            watcher::Event::Apply(pod) => match self.entry(&pod) {
                Some((key, cached)) => {
                    let node = cached.node_name.clone();
                    let old = self.pods.insert(key.clone(), cached);
                    let same = old.is_some_and(|o| self.pods.get(&key) == Some(&o));
                    (!same).then_some(PodChange::Node(node))
                }
                None => self.remove(&pod),
            },
            watcher::Event::Delete(pod) => self.remove(&pod),
        };
        self.strings.sweep_if_grown();
        (false, change)
    }

    fn remove(&mut self, pod: &Pod) -> Option<PodChange> {
        let key = self.key(pod)?;
        self.pods.remove(&key).map(|old| PodChange::Node(old.node_name))
    }
}

/// The kind and name of the pod's controller ownerReference, if it has one.
fn controller_of(pod: &Pod) -> Option<(&str, &str)> {
    let owners = pod.metadata.owner_references.as_deref().unwrap_or_default();
    owners.iter().find(|o| o.controller == Some(true)).map(|o| (o.kind.as_str(), o.name.as_str()))
}

/// A cached pod's controller and what evacuation by rollout needs of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodOwner {
    /// Kind of the controller ownerReference (`ReplicaSet`, `StatefulSet`, ...); `None` for a
    /// bare pod.
    pub kind: Option<Arc<str>>,
    /// Name of the controller.
    pub name: Option<Arc<str>>,
    /// The `pod-template-hash` label (set on the pods of a Deployment's ReplicaSet).
    pub template_hash: Option<Arc<str>>,
    /// The pod opted out of eviction (`karpenter.sh/do-not-disrupt`, `safe-to-evict`).
    pub opted_out: bool,
}

/// Label the Deployment controller puts on the pods (and in the name) of each ReplicaSet.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// What a Pod watch event changed of what the planner reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodChange {
    /// A pod bound to this node appeared, went away, or changed (labels, priority,
    /// termination, phase, tolerations, opt-out and wait-for-completion annotations, owner,
    /// emptyDir volumes).
    Node(Arc<str>),
    /// A (re)list completed: any pod may have changed.
    All,
}

impl PodChange {
    /// Whether the change concerns a node for which `watched` holds (`All` always does).
    pub fn concerns(&self, watched: impl Fn(&str) -> bool) -> bool {
        match self {
            PodChange::Node(node) => watched(node),
            PodChange::All => true,
        }
    }
}

/// The controller's read-only Pod cache, kept current by the stream [`pod_cache`] returns.
#[derive(Clone, Debug)]
pub struct PodCache {
    state: Arc<RwLock<State>>,
    ready: tokio::sync::watch::Receiver<bool>,
}

impl PodCache {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until the first list is complete (any number of tasks may wait); never returns if
    /// the driving stream is dropped first.
    pub async fn wait_until_ready(&self) {
        if self.ready.clone().wait_for(|ready| *ready).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// The controller of the cached pod `namespace/name` (for evacuation by rollout), `None`
    /// when the pod is not cached (gone, or not bound).
    pub fn owner(&self, namespace: &str, name: &str) -> Option<PodOwner> {
        let state = self.read();
        let p = state.pods.get(&(Arc::from(namespace), Arc::from(name)))?;
        Some(owner_of(p))
    }

    /// Every cached pod of `namespace` whose controller is a ReplicaSet whose name `rs` accepts,
    /// with its name (the pods a rollout of their Deployment replaces). Scans the
    /// cache: for decisions taken once per Deployment, not per pod.
    pub fn owned_by_replica_sets(&self, namespace: &str, rs: impl Fn(&str) -> bool) -> Vec<(Arc<str>, PodOwner)> {
        let state = self.read();
        state
            .pods
            .iter()
            .filter(|((ns, _), p)| {
                &**ns == namespace && p.controller.as_ref().is_some_and(|(k, n)| &**k == "ReplicaSet" && rs(n))
            })
            .map(|((_, name), p)| (name.clone(), owner_of(p)))
            .collect()
    }

    /// The UIDs of every cached pod (memories keyed by pod UID forget the pods
    /// that are gone). Scans the cache: for a periodic sweep, not per decision.
    pub fn uids(&self) -> HashSet<Arc<str>> {
        self.read().pods.values().map(|p| p.uid.clone()).collect()
    }

    /// Number of cached (bound) pods.
    pub fn len(&self) -> usize {
        self.read().pods.len()
    }

    /// Whether no pod is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The planner's view ([`PodView::from_pod`]) of every cached pod on a node for which
    /// `on_node` holds, in no particular order. `eviction_accepted(uid)` says whether the
    /// controller already had an eviction of that pod accepted. Every string and label set of
    /// a view is shared with the cache: nothing is copied but the view itself. The views come
    /// grouped by node (in no particular node order), so the planner reads each node's pods
    /// from one stretch of memory instead of all over the cache's hash order.
    pub fn views(&self, on_node: impl Fn(&str) -> bool, eviction_accepted: impl Fn(&str) -> bool) -> Vec<PodView> {
        let state = self.read();
        let mut views: Vec<PodView> = state
            .pods
            .iter()
            .filter(|(_, p)| on_node(&p.node_name))
            .map(|((namespace, name), p)| PodView {
                namespace: namespace.clone(),
                name: name.clone(),
                uid: p.uid.clone(),
                node_name: p.node_name.clone(),
                priority: p.priority,
                pod_type: p.pod_type,
                labels: PodLabels::from_sorted(p.labels.clone()),
                eviction_in_progress: p.terminating || eviction_accepted(&p.uid),
                terminal: p.terminal,
                tolerates_draining_taint: p.tolerates_draining_taint,
                opted_out: p.opted_out,
                unmanaged: p.unmanaged,
                emptydir: p.emptydir,
                owned_by_job: p.owned_by_job,
                wait_annotated: p.wait_annotated,
            })
            .collect();
        // Node names are interned: one allocation per node, so its address groups them.
        views.sort_unstable_by_key(|v| Arc::as_ptr(&v.node_name).cast::<u8>() as usize);
        views
    }
}

fn owner_of(p: &CachedPod) -> PodOwner {
    let hash = p.labels.binary_search_by(|(k, _)| (**k).cmp(POD_TEMPLATE_HASH_LABEL)).ok();
    PodOwner {
        kind: p.controller.as_ref().map(|(k, _)| k.clone()),
        name: p.controller.as_ref().map(|(_, n)| n.clone()),
        template_hash: hash.map(|i| p.labels[i].1.clone()),
        opted_out: p.opted_out,
    }
}

/// Starts a cluster-wide Pod watch. Returns the cache and the stream that drives it, yielding
/// a [`PodChange`] after each event that changed what the planner reads (used to trigger
/// decisions; status-only updates yield nothing); poll it to keep the cache current. Watch
/// errors are retried with kube's default backoff and logged.
pub fn pod_cache(client: Client) -> (PodCache, impl Stream<Item = PodChange> + Send + 'static) {
    let state = Arc::new(RwLock::new(State::default()));
    let (ready_tx, ready) = tokio::sync::watch::channel(false);
    let writer = state.clone();
    let stream =
        watcher(Api::<Pod>::all(client), watcher::Config::default()).default_backoff().filter_map(move |event| {
            let out = match event {
                Ok(event) => {
                    // Each full Pod is dropped here, right after conversion.
                    let (listed, change) = writer.write().unwrap_or_else(PoisonError::into_inner).apply(event);
                    if listed {
                        ready_tx.send_replace(true);
                    }
                    change
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Pod watch failed; retrying");
                    None
                }
            };
            std::future::ready(out)
        });
    (PodCache { state, ready }, stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>, labels: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"), "labels": labels,
                "annotations": {"kubernetes.io/config.mirror": "h", "big": "x"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "o", "controller": true}],
                "managedFields": [{"manager": "m"}]},
            "spec": {"nodeName": node, "priority": 7, "containers": [{"name": "c", "image": "i"}],
                "tolerations": [{"key": "nodemaintenance.k8s.io/draining", "operator": "Exists"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        }))
        .unwrap()
    }

    fn cache() -> PodCache {
        let (_, ready) = tokio::sync::watch::channel(false);
        PodCache { state: Arc::new(RwLock::new(State::default())), ready }
    }

    fn apply(cache: &PodCache, event: watcher::Event<Pod>) -> bool {
        cache.state.write().unwrap().apply(event).0
    }

    fn names(cache: &PodCache) -> Vec<String> {
        let mut v: Vec<String> = cache.views(|_| true, |_| false).into_iter().map(|p| p.name.to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn views_equal_what_the_planner_builds_from_the_pod() {
        let c = cache();
        let p = pod("p", Some("n1"), serde_json::json!({"app": "x", "tier": "cache"}));
        apply(&c, watcher::Event::Apply(p.clone()));
        assert_eq!(c.views(|_| true, |_| false), vec![PodView::from_pod(&p, false).unwrap()]);
        assert_eq!(c.views(|_| true, |uid| uid == "u-p"), vec![PodView::from_pod(&p, true).unwrap()]);
        assert!(c.views(|n| n == "n2", |_| false).is_empty());
        assert_eq!(c.views(|_| true, |_| false)[0].labels.get("tier"), Some("cache"));
    }

    #[test]
    fn lists_replace_the_content_and_events_apply() {
        let c = cache();
        let on = |name: &str| pod(name, Some("n1"), serde_json::json!({"app": name}));
        apply(&c, watcher::Event::Apply(on("old")));
        assert!(!apply(&c, watcher::Event::Init));
        apply(&c, watcher::Event::InitApply(on("a")));
        apply(&c, watcher::Event::InitApply(pod("unbound", None, serde_json::json!({}))));
        assert_eq!(names(&c), ["old"], "a list in progress is not visible");
        assert!(apply(&c, watcher::Event::InitDone));
        assert_eq!(names(&c), ["a"]);
        apply(&c, watcher::Event::Apply(on("b")));
        apply(&c, watcher::Event::Delete(on("a")));
        assert_eq!(names(&c), ["b"]);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn owners_are_kept_for_evacuation() {
        let c = cache();
        let mut p = pod("web-abc12-x", Some("n1"), serde_json::json!({"pod-template-hash": "abc12"}));
        p.metadata.owner_references.as_mut().unwrap()[0].kind = "ReplicaSet".into();
        p.metadata.owner_references.as_mut().unwrap()[0].name = "web-abc12".into();
        apply(&c, watcher::Event::Apply(p));
        apply(&c, watcher::Event::Apply(pod("agent-1", Some("n1"), serde_json::json!({}))));
        let o = c.owner("ns", "web-abc12-x").unwrap();
        assert_eq!((o.kind.as_deref(), o.name.as_deref()), (Some("ReplicaSet"), Some("web-abc12")));
        assert_eq!(o.template_hash.as_deref(), Some("abc12"));
        assert_eq!(c.owner("ns", "agent-1").unwrap().kind.as_deref(), Some("DaemonSet"));
        assert_eq!(c.owner("other", "agent-1"), None);
        let owned = c.owned_by_replica_sets("ns", |rs| rs == "web-abc12");
        assert_eq!(owned.iter().map(|(n, _)| &**n).collect::<Vec<_>>(), ["web-abc12-x"]);
        assert!(c.owned_by_replica_sets("ns", |rs| rs == "web-other").is_empty());
    }

    #[test]
    fn equal_label_sets_are_shared() {
        let c = cache();
        let labels = serde_json::json!({"app": "x", "pod-template-hash": "abc"});
        apply(&c, watcher::Event::Apply(pod("a", Some("n1"), labels.clone())));
        apply(&c, watcher::Event::Apply(pod("b", Some("n2"), labels)));
        apply(&c, watcher::Event::Apply(pod("c", Some("n2"), serde_json::json!({"app": "x"}))));
        let state = c.state.read().unwrap();
        let set = |name: &str| state.pods.iter().find(|(k, _)| &*k.1 == name).map(|(_, p)| p.labels.clone()).unwrap();
        assert!(Arc::ptr_eq(&set("a"), &set("b")));
        assert!(!Arc::ptr_eq(&set("a"), &set("c")));
        assert!(Arc::ptr_eq(&set("a")[0].0, &set("c")[0].0), "label keys are shared");
    }

    #[test]
    fn unused_strings_are_forgotten() {
        let c = cache();
        for i in 0..5000 {
            let p = pod(&format!("p{i}"), Some(&format!("node-{i}")), serde_json::json!({"app": format!("a{i}")}));
            apply(&c, watcher::Event::Apply(p.clone()));
            apply(&c, watcher::Event::Delete(p));
        }
        assert!(c.is_empty());
        let state = c.state.read().unwrap();
        assert!(state.strings.set.len() + state.strings.label_sets.len() < 2100, "interned strings are swept");
    }
}
