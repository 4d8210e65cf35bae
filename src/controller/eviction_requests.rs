//! The controller's use of EvictionRequests ([`crate::cluster::eviction_requests`], SPEC 4.3):
//! an eviction asked through one where the cluster serves them, failed requests withdrawn so
//! that the next ask after the backoff submits a new intent, and the requests on a released
//! node withdrawn.
//!
//! No double eviction: a pod whose request of ours asks for its eviction is being evicted by
//! the cluster's responders, so the controller never calls the Eviction API for it (it counts
//! as an eviction in progress), and a refused write to an existing request is a failing
//! eviction, not a reason to fall back to the Eviction API.

use super::context::Context;
use super::pacer::Pacer;
use crate::cluster::eviction::{EvictionOutcome, classify, evict};
use crate::cluster::eviction_requests::{INTENT_EVICTION, INTENT_WITHDRAWN, Observed, Watches, apply, observe};
use crate::planner::PodRef;
use kube::Client;
use std::time::Instant;

/// Asks for the eviction of `pod` on `node` with an EvictionRequest (intent `Eviction`),
/// under the requester of our existing request for it in `watches` if there is one (the
/// field is immutable), else `--eviction-requester`. Accepted means the request is stored; whether
/// and when the pod goes is up to the evictionrequest-controller and the pod's responders.
///
/// A refusal (400, 403, 404: the API went away, 422: e.g. a requester the cluster's own
/// admission does not take) falls back to the Eviction API only while no request of ours
/// asks for this pod: an alpha API must never stop a drain the Eviction API can carry out,
/// but where a request asks, the cluster's responders are evicting the pod and a second
/// eviction must not be sent; that refusal is a failing eviction, retried after the backoff.
pub async fn request(ctx: &Context, watches: &Watches, pod: &PodRef, node: &str) -> EvictionOutcome {
    let client = &ctx.client;
    let existing = watches.request_for(pod);
    let requester = existing.as_ref().map_or(ctx.options.eviction_requester.as_str(), |er| er.spec.requester.as_str());
    let asking = existing.as_deref().and_then(observe).is_some_and(|o| o.asking);
    match apply(client, pod, node, requester, INTENT_EVICTION).await {
        Err(kube::Error::Api(s)) if matches!(s.code, 400 | 403 | 404 | 422) => {
            let pod_name = format!("{}/{}", pod.namespace, pod.name);
            if asking {
                tracing::warn!(pod = %pod_name, code = s.code, error = %s.message,
                    "EvictionRequest refused while our request for the pod still asks; not evicting it twice");
                return EvictionOutcome::Failed(format!("EvictionRequest refused: {} ({})", s.message, s.code));
            }
            tracing::warn!(pod = %pod_name, code = s.code, error = %s.message,
                "EvictionRequest refused; evicting through the Eviction API");
            evict(client, pod).await
        }
        result => classify(result),
    }
}

/// Takes our request `o` back (intent `Withdrawn`) under the requester it was created with,
/// through `pacer` (the bound and the 429 pause of every write).
///
/// # Errors
/// The API error of the write.
async fn withdraw(client: &Client, pacer: &Pacer, o: &Observed) -> kube::Result<()> {
    pacer.run(apply(client, &o.pod, &o.node, &o.requester, INTENT_WITHDRAWN)).await
}

/// Our requests whose `Failed` condition is True and that still ask for the eviction are
/// withdrawn and remembered as failing evictions ([`super::eviction_memory::EvictionMemory`]): the
/// node message reports them (`eviction failing`), and after the backoff the planner's next
/// eviction of the pod submits a new intent. Best effort: a failed write is retried on the
/// next decision.
pub async fn retry_failed(ctx: &Context) {
    let Some(watches) = &ctx.eviction_requests else { return };
    let failed: Vec<Observed> =
        watches.asking().filter(|o| o.failed.is_some() && !ctx.evictions.failing(&o.pod.uid)).collect();
    for o in failed {
        match withdraw(&ctx.client, &ctx.pacer, &o).await {
            Ok(()) => {
                let why = o.failed.clone().unwrap_or_default();
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
    let Some(watches) = &ctx.eviction_requests else { return Ok(()) };
    let asking: Vec<Observed> = watches.asking().filter(|o| o.node == node).collect();
    let mut first_error = Ok(());
    for o in asking {
        if let Err(e) = withdraw(&ctx.client, &ctx.pacer, &o).await {
            first_error = first_error.and(Err(e));
        }
    }
    first_error
}
