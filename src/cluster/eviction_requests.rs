//! Evictions through KEP-4563's `EvictionRequest` (`lifecycle.k8s.io/v1alpha1`, alpha in
//! Kubernetes 1.37 behind the `EvictionRequestAPI` feature gate) where the cluster serves it:
//! the API KEP-4212 names for its drain. Where it is not served, the
//! controller calls the Eviction API ([`super::eviction`]). This module is what the API says
//! and takes; when the controller asks, withdraws and retries is
//! `crate::controller::eviction_requests`.
//!
//! One EvictionRequest per pod, named after the pod's UID, labelled as ours, owned by the pod
//! (garbage-collected with it) and annotated with the node. Every write is a server-side
//! apply of the fields we own (`spec.intent`, `spec.requester`, `spec.target`), so asking
//! again is idempotent and a restart converges. `spec.target` and `spec.requester` are
//! immutable (kubernetes/api `lifecycle/v1alpha1/types.go`): a request keeps the requester it
//! was created with, whatever `--eviction-requester` says now. `spec.intent: Withdrawn` takes
//! a request back; a new intent bumps the request's generation, and the
//! evictionrequest-controller resets its conditions for it ([`observe`] reads a `Failed`
//! condition only for the current generation).
//!
//! While a request of ours asks for a pod's eviction, the cluster's responders (in the end
//! kube-controller-manager's `imperative-eviction.k8s.io/evictor`, which calls the Eviction
//! API itself) evict it: [`in_progress`] lists those pods. When the controller asks, withdraws
//! and retries, and why it never evicts such a pod a second time, is
//! `crate::controller::eviction_requests`.
//!
//! The watches of a leadership term (our requests and the Evictions made of them) and what a
//! cached request says ([`observe`]) are read by the controller's planning pass and status.

use super::writes::MANAGER;
use crate::planner::PodRef;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::lifecycle::v1alpha1::{Eviction, EvictionRequest};
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;

/// API group and version of EvictionRequest.
pub const GROUP_VERSION: &str = "lifecycle.k8s.io/v1alpha1";
/// Default `spec.requester` (`--eviction-requester`, checked by
/// [`crate::api::requester::parse_requester`]). Not under our CRD's `nodemaintenance.k8s.io`:
/// the API refuses requesters under `*.k8s.io` and `*.kubernetes.io`. `x-k8s.io` is where
/// out-of-tree implementations of Kubernetes APIs name themselves (Cluster API, Gateway API,
/// Kueue) and is outside the reserved suffixes; `nodemaintenance` keeps the name operators
/// already see on our CRD, taint and annotations (docs/decisions.md).
pub const DEFAULT_REQUESTER: &str = "nodemaintenance.x-k8s.io/controller";
/// Label value of `app.kubernetes.io/managed-by` on our EvictionRequests (the watch selects
/// on it).
pub const MANAGED_BY: &str = "node-maintenance";
/// Annotation naming the node the target pod ran on, for withdrawing by node.
pub const NODE_ANNOTATION: &str = "nodemaintenance.k8s.io/node";
/// `spec.intent` asking for the eviction.
pub const INTENT_EVICTION: &str = "Eviction";
/// `spec.intent` taking the request back.
pub const INTENT_WITHDRAWN: &str = "Withdrawn";

/// Which API evictions go through (`--eviction-api`: `auto` or `eviction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EvictionApiChoice {
    /// EvictionRequest when discovery shows it, else the Eviction API.
    #[default]
    Auto,
    /// Always the Eviction API (`pods/eviction`).
    Eviction,
}

/// The watches of a leadership term where the cluster serves the API: our EvictionRequests
/// (labelled [`MANAGED_BY`]) and the Evictions the evictionrequest-controller made of them
/// (labelled with our requester; [`crate::cluster::responders`] reads their progress).
#[derive(Clone)]
pub struct Watches {
    /// Our EvictionRequests.
    pub requests: Store<EvictionRequest>,
    /// The Evictions that list `--eviction-requester` as a requester.
    pub evictions: Store<Eviction>,
}

/// Starts the watches of our EvictionRequests (by our `app.kubernetes.io/managed-by` label)
/// and of the Evictions that name `requester` (the evictionrequest-controller labels each
/// Eviction `<requester>: requester`). Returns their stores and the future that drives both,
/// which ends only when one of the streams does; watch errors are logged and retried with
/// backoff.
pub fn watch(client: &Client, requester: &str) -> (Watches, BoxFuture<'static, ()>) {
    fn driven<K>(api: Api<K>, config: watcher::Config, what: &'static str) -> (Store<K>, BoxFuture<'static, ()>)
    where
        K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync,
        K: 'static,
    {
        let (reader, writer) = reflector::store();
        let stream = reflector(writer, watcher(api, config)).default_backoff().for_each(move |event| {
            if let Err(e) = event {
                tracing::warn!(error = %e, "{what} watch failed; retrying");
            }
            async {}
        });
        (reader, stream.boxed())
    }
    let mine = watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={MANAGED_BY}"));
    let (requests, requests_driver) = driven(Api::all(client.clone()), mine, "EvictionRequest");
    let named = watcher::Config::default().labels(requester);
    let (evictions, evictions_driver) = driven(Api::all(client.clone()), named, "Eviction");
    let driver = futures::future::select(requests_driver, evictions_driver).map(|_| ()).boxed();
    (Watches { requests, evictions }, driver)
}

impl Watches {
    /// Waits until both watches have listed once.
    pub async fn wait_until_ready(&self) {
        // Errors only when the writer is dropped, which ends the driver (and the run) too.
        let _ = futures::join!(self.requests.wait_until_ready(), self.evictions.wait_until_ready());
    }

    /// Our cached requests whose `spec.intent` still asks for the eviction, as [`observe`]
    /// reads them (those that failed for their current generation too).
    pub fn asking(&self) -> impl Iterator<Item = Observed> {
        self.requests.state().into_iter().filter_map(|er| observe(&er)).filter(|o| o.asking)
    }

    /// Our cached request for `pod`, if any.
    pub fn request_for(&self, pod: &PodRef) -> Option<Arc<EvictionRequest>> {
        self.requests.get(&ObjectRef::new(&name_for(pod)).within(&pod.namespace))
    }
}

/// The name of our EvictionRequest for a pod: `nodemaintenance-` and the pod's UID.
pub fn name_for(pod: &PodRef) -> String {
    format!("nodemaintenance-{}", pod.uid)
}

/// Our EvictionRequest as the watch cache holds it.
pub struct Observed {
    /// The target pod.
    pub pod: PodRef,
    /// The node annotation.
    pub node: String,
    /// `spec.requester` (immutable: every later write of the request repeats it).
    pub requester: String,
    /// `spec.intent` is `Eviction`.
    pub asking: bool,
    /// The `Failed` condition is True for the request's current generation: with its
    /// message (else its reason).
    pub failed: Option<String>,
}

/// The `Failed` condition of `er` when it is True and was set for the current generation.
/// The evictionrequest-controller writes `status.observedGeneration` with its conditions
/// (kubernetes/kubernetes `pkg/controller/evictionrequest/evictionrequest_controller.go`),
/// and a new intent bumps `metadata.generation` (`pkg/registry/lifecycle/evictionrequest/
/// strategy.go`, `PrepareForUpdate`): until the controller has seen the new intent, the
/// `Failed` of the old one is stale and must not withdraw the new one.
fn failure(er: &EvictionRequest) -> Option<String> {
    let status = er.status.as_ref()?;
    let c = status.conditions.as_ref()?.iter().find(|c| c.type_ == "Failed" && c.status == "True")?;
    let observed = c.observed_generation.filter(|g| *g > 0).or(status.observed_generation);
    let current = er.metadata.generation.unwrap_or(0);
    if observed.unwrap_or(0) < current {
        return None;
    }
    Some(format!("EvictionRequest failed: {}", if c.message.is_empty() { &c.reason } else { &c.message }))
}

/// Reads one cached EvictionRequest; `None` for one without a pod target.
pub fn observe(er: &EvictionRequest) -> Option<Observed> {
    let target = er.spec.target.pod.as_ref()?;
    Some(Observed {
        pod: PodRef {
            namespace: er.metadata.namespace.as_deref().unwrap_or_default().into(),
            name: target.name.as_str().into(),
            uid: target.uid.as_str().into(),
        },
        node: er.metadata.annotations.as_ref().and_then(|a| a.get(NODE_ANNOTATION)).cloned().unwrap_or_default(),
        requester: er.spec.requester.clone(),
        asking: er.spec.intent == INTENT_EVICTION,
        failed: failure(er),
    })
}

/// The UIDs of pods whose EvictionRequest of ours asks for their eviction and has not failed:
/// their eviction is in progress (`activeEvictionRequests`), after a restart too, and the
/// controller sends them no eviction of its own.
pub fn in_progress(watches: &Watches) -> HashSet<Arc<str>> {
    watches.asking().filter(|o| o.failed.is_none()).map(|o| o.pod.uid).collect()
}
/// Whether the cluster serves `evictionrequests` and `evictions` in
/// `lifecycle.k8s.io/v1alpha1` (both are watched), by discovery. Any failure (404 when the
/// group is not served, or the apiserver unreachable) answers `false`: the Eviction API is
/// always there.
pub async fn served(client: &Client) -> bool {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) => ["evictionrequests", "evictions"].iter().all(|want| list.resources.iter().any(|r| r.name == *want)),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            tracing::warn!(error = %e, "EvictionRequest discovery failed; using the Eviction API");
            false
        }
    }
}

/// The server-side-apply body of our EvictionRequest for `pod` on `node` with `intent`.
pub fn apply_body(pod: &PodRef, node: &str, requester: &str, intent: &str) -> Value {
    json!({
        "apiVersion": GROUP_VERSION,
        "kind": "EvictionRequest",
        "metadata": {
            "name": name_for(pod),
            "namespace": &*pod.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "annotations": {NODE_ANNOTATION: node},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": &*pod.name, "uid": &*pod.uid}],
        },
        "spec": {
            "intent": intent,
            "requester": requester,
            "target": {"pod": {"name": &*pod.name, "uid": &*pod.uid}},
        },
    })
}

/// Server-side applies our EvictionRequest for `pod` on `node` with `intent` under `requester`
/// ([`apply_body`]).
///
/// # Errors
/// The API error.
pub async fn apply(client: &Client, pod: &PodRef, node: &str, requester: &str, intent: &str) -> kube::Result<()> {
    let api: Api<EvictionRequest> = Api::namespaced(client.clone(), &pod.namespace);
    let body = apply_body(pod, node, requester, intent);
    api.patch(&name_for(pod), &PatchParams::apply(MANAGER).force(), &Patch::Apply(&body)).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_targets_and_owns_by_the_pod() {
        let pod = PodRef { namespace: "apps".into(), name: "web-1".into(), uid: "u-1".into() };
        let body = apply_body(&pod, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION);
        assert_eq!(body["metadata"]["name"], "nodemaintenance-u-1");
        assert_eq!(body["metadata"]["namespace"], "apps");
        assert_eq!(body["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(body["metadata"]["annotations"][NODE_ANNOTATION], "worker-1");
        assert_eq!(
            body["spec"],
            json!({"intent": "Eviction", "requester": DEFAULT_REQUESTER,
            "target": {"pod": {"name": "web-1", "uid": "u-1"}}})
        );
        let er: EvictionRequest = serde_json::from_value(body).expect("a valid EvictionRequest");
        let seen = observe(&er).expect("a pod target");
        assert!(seen.asking && seen.failed.is_none() && seen.node == "worker-1" && seen.pod == pod);
        assert_eq!(seen.requester, DEFAULT_REQUESTER);
    }

    #[test]
    fn a_failure_counts_only_for_the_generation_it_was_set_for() {
        let pod = PodRef { namespace: "apps".into(), name: "web-1".into(), uid: "u-1".into() };
        let with = |generation: i64, observed: Option<i64>, on_condition: Option<i64>| {
            let mut body = apply_body(&pod, "worker-1", DEFAULT_REQUESTER, INTENT_EVICTION);
            body["metadata"]["generation"] = json!(generation);
            body["status"] = json!({"observedGeneration": observed, "conditions": [{"type": "Failed", "status": "True",
                "reason": "NoFurtherResponder", "message": "no responder evicted the pod", "observedGeneration": on_condition,
                "lastTransitionTime": "2026-11-23T00:00:00Z"}]});
            let er: EvictionRequest = serde_json::from_value(body).expect("a valid EvictionRequest");
            observe(&er).expect("a pod target").failed
        };
        assert_eq!(with(1, Some(1), None).as_deref(), Some("EvictionRequest failed: no responder evicted the pod"));
        assert_eq!(with(2, Some(2), Some(2)).as_deref(), Some("EvictionRequest failed: no responder evicted the pod"));
        assert_eq!(with(3, Some(1), None), None, "a new intent the controller has not seen yet");
        assert_eq!(with(3, Some(3), Some(1)), None, "the condition itself says it is older");
        assert_eq!(with(1, None, None), None, "not observed at all");
    }
}
