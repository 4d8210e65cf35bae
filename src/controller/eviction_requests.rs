//! Evictions through KEP-4563's `EvictionRequest` (`lifecycle.k8s.io/v1alpha1`, alpha in
//! Kubernetes 1.37 behind the `EvictionRequestAPI` feature gate) where the cluster serves it:
//! the API KEP-4212 names for its drain (issue 14). Where it is not served, the controller
//! calls the Eviction API as before ([`super::evict`]).
//!
//! One EvictionRequest per pod, named after the pod's UID, labelled as ours, owned by the pod
//! (garbage-collected with it) and annotated with the node. Every write is a server-side
//! apply of the fields we own (`spec.intent`, `spec.requester`, `spec.target`), so asking
//! again is idempotent and a restart converges. Withdrawing sets `spec.intent: Withdrawn`;
//! a request whose `Failed` condition is True is withdrawn too, so that asking again after the
//! backoff submits a new intent (the API resets its conditions then).

use super::context::Context;
use super::effects::MANAGER;
use super::evict::{EvictionOutcome, classify, evict};
use crate::planner::PodRef;
use k8s_openapi::api::lifecycle::v1alpha1::EvictionRequest;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

/// API group and version of EvictionRequest.
pub const GROUP_VERSION: &str = "lifecycle.k8s.io/v1alpha1";
/// Default `spec.requester` (`--eviction-requester`): the issue asks for
/// `nodemaintenance.k8s.io`, and the API wants a domain-prefixed name (`acme.io/foo`).
pub const DEFAULT_REQUESTER: &str = "nodemaintenance.k8s.io/controller";
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

/// Whether the cluster serves `evictionrequests` in `lifecycle.k8s.io/v1alpha1`, by
/// discovery. Any failure (404 when the group is not served, or the apiserver unreachable)
/// answers `false`: the Eviction API is always there.
pub async fn served(client: &Client) -> bool {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) => list.resources.iter().any(|r| r.name == "evictionrequests"),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            tracing::warn!(error = %e, "EvictionRequest discovery failed; using the Eviction API");
            false
        }
    }
}

/// The name of our EvictionRequest for a pod: `nodemaintenance-` and the pod's UID.
pub fn name_for(pod: &PodRef) -> String {
    format!("nodemaintenance-{}", pod.uid)
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

async fn apply(client: &Client, pod: &PodRef, node: &str, requester: &str, intent: &str) -> kube::Result<()> {
    let api: Api<EvictionRequest> = Api::namespaced(client.clone(), &pod.namespace);
    let body = apply_body(pod, node, requester, intent);
    api.patch(&name_for(pod), &PatchParams::apply(MANAGER).force(), &Patch::Apply(&body)).await.map(|_| ())
}

/// Asks for the eviction of `pod` on `node` with an EvictionRequest (intent `Eviction`).
/// Accepted means the request is stored; whether and when the pod goes is up to the
/// eviction-request controller and the pod's responders. A request the apiserver refuses as
/// such (400, 403, 404: the API went away, 422: e.g. a requester its admission does not take)
/// falls back to the Eviction API for this pod, with a warning: an alpha API must never stop
/// a drain the Eviction API can carry out.
pub async fn request(client: &Client, pod: &PodRef, node: &str, requester: &str) -> EvictionOutcome {
    match apply(client, pod, node, requester, INTENT_EVICTION).await {
        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 404 | 422) => {
            tracing::warn!(pod = %format!("{}/{}", pod.namespace, pod.name), code = s.code, error = %s.message,
                "EvictionRequest refused; evicting through the Eviction API");
            evict(client, pod).await
        }
        result => classify(result),
    }
}

/// Takes our request for `pod` back (intent `Withdrawn`).
///
/// # Errors
/// The API error of the write.
pub async fn withdraw(client: &Client, pod: &PodRef, node: &str, requester: &str) -> kube::Result<()> {
    apply(client, pod, node, requester, INTENT_WITHDRAWN).await
}

/// Our EvictionRequest as the watch cache holds it.
pub struct Observed {
    /// The target pod.
    pub pod: PodRef,
    /// The node annotation.
    pub node: String,
    /// `spec.intent` is `Eviction`.
    pub asking: bool,
    /// The `Failed` condition is True: with its message.
    pub failed: Option<String>,
}

/// Reads one cached EvictionRequest; `None` for one without a pod target.
pub fn observe(er: &EvictionRequest) -> Option<Observed> {
    let target = er.spec.target.pod.as_ref()?;
    let failed = er
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Failed" && c.status == "True"))
        .map(|c| format!("EvictionRequest failed: {}", if c.message.is_empty() { &c.reason } else { &c.message }));
    Some(Observed {
        pod: PodRef {
            namespace: er.metadata.namespace.as_deref().unwrap_or_default().into(),
            name: target.name.as_str().into(),
            uid: target.uid.as_str().into(),
        },
        node: er.metadata.annotations.as_ref().and_then(|a| a.get(NODE_ANNOTATION)).cloned().unwrap_or_default(),
        asking: er.spec.intent == INTENT_EVICTION,
        failed,
    })
}

/// The UIDs of pods whose EvictionRequest of ours asks for their eviction and has not failed:
/// their eviction is in progress (`activeEvictionRequests`), after a restart too.
pub fn in_progress(store: &Store<EvictionRequest>) -> HashSet<Arc<str>> {
    store
        .state()
        .iter()
        .filter_map(|er| observe(er))
        .filter(|o| o.asking && o.failed.is_none())
        .map(|o| o.pod.uid)
        .collect()
}

/// Our requests whose `Failed` condition is True and that still ask for the eviction are
/// withdrawn and remembered as failing evictions ([`super::evict::EvictionMemory`]): the
/// node message reports them (`eviction failing`), and after the backoff the planner's next
/// eviction of the pod submits a new intent. Best effort: a failed write is retried on the
/// next reconcile.
pub async fn retry_failed(ctx: &Context) {
    let Some(store) = &ctx.eviction_requests else { return };
    let failed: Vec<Observed> = store
        .state()
        .iter()
        .filter_map(|er| observe(er))
        .filter(|o| o.asking && o.failed.is_some() && !ctx.evictions.failing(&o.pod.uid))
        .collect();
    for o in failed {
        match withdraw(&ctx.client, &o.pod, &o.node, &ctx.options.eviction_requester).await {
            Ok(()) => {
                let why = o.failed.unwrap_or_default();
                ctx.evictions.record(&o.pod, &o.node, EvictionOutcome::Failed(why), Instant::now());
            }
            Err(e) => {
                tracing::warn!(pod = %format!("{}/{}", o.pod.namespace, o.pod.name), error = %e, "withdrawing a failed EvictionRequest")
            }
        }
    }
}

/// Withdraws our requests that still ask for the eviction of pods on `node` (the node is
/// released: no Drain maintenance drains it any more).
///
/// # Errors
/// The first API error; the other requests are still withdrawn.
pub async fn withdraw_on_node(ctx: &Context, node: &str) -> kube::Result<()> {
    let Some(store) = &ctx.eviction_requests else { return Ok(()) };
    let asking: Vec<Observed> =
        store.state().iter().filter_map(|er| observe(er)).filter(|o| o.asking && o.node == node).collect();
    let mut first_error = Ok(());
    for o in asking {
        if let Err(e) = withdraw(&ctx.client, &o.pod, &o.node, &ctx.options.eviction_requester).await {
            first_error = first_error.and(Err(e));
        }
    }
    first_error
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
    }
}
