//! Evictions the apiserver accepted and did not carry out. The eviction handler
//! (kubernetes `pkg/registry/core/pod/storage/eviction.go`) first records the eviction in the
//! pod's PodDisruptionBudget (`status.disruptedPods[pod] = now`, `disruptionsAllowed - 1`,
//! one status update) and only then deletes the pod. A request cut in between (the evicting
//! replica killed, its connection dropped) leaves the pod running and listed. The disruption
//! controller (`pkg/controller/disruption`) leaves a listed pod out of `currentHealthy` until
//! its entry is `DeletionTimeout` (2 minutes) old, so the budget allows no other disruption
//! meanwhile and refuses every new eviction of that very pod: the drain would stand still for
//! two minutes.
//!
//! The disruption the budget already paid for is carried out instead, as the accepted
//! eviction would have done: the pod is deleted with its UID and resourceVersion as
//! preconditions, only while its entry is young enough that the budget still counts it as
//! gone (docs/decisions.md, "Half-applied evictions").

use super::eviction::{EvictionOutcome, classify};
use crate::planner::PodRef;
use crate::selector::PodSelector;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long the disruption controller keeps a pod listed in `disruptedPods` out of
/// `currentHealthy` (kube-controller-manager's `DeletionTimeout`, not configurable).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// How much of [`DELETION_TIMEOUT`] is left unused: the entry's time is the apiserver's
/// clock, the expiry the controller-manager's, and our PodDisruptionBudget cache lags. Past
/// `DELETION_TIMEOUT - SAFETY_MARGIN` the pod is evicted again instead (refused until the
/// entry is dropped, then through the budget as usual).
pub const SAFETY_MARGIN: Duration = Duration::from_secs(30);

/// An accepted eviction a PodDisruptionBudget records: the budget's name and when.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The PodDisruptionBudget (in the pod's namespace).
    pub budget: String,
    /// `status.disruptedPods[pod]`: when the apiserver accepted the eviction.
    pub at: Timestamp,
    /// The budget's selector, which must match the pod (an empty one matches nothing, as in
    /// the eviction handler).
    selector: Option<PodSelector>,
}

/// Every `disruptedPods` entry of `budgets`, by (namespace, pod name). Built once per round
/// of evictions; most budgets list nobody.
pub fn recorded(budgets: &[Arc<PodDisruptionBudget>]) -> HashMap<(String, String), Recorded> {
    let mut out = HashMap::new();
    for b in budgets {
        let Some(listed) = b.status.as_ref().and_then(|s| s.disrupted_pods.as_ref()) else { continue };
        let namespace = b.namespace().unwrap_or_default();
        let selector = b
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .filter(|s| {
                s.match_labels.as_ref().is_some_and(|l| !l.is_empty())
                    || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
            })
            .and_then(PodSelector::compile);
        for (pod, at) in listed {
            let entry = Recorded { budget: b.name_any(), at: at.0, selector: selector.clone() };
            out.insert((namespace.clone(), pod.clone()), entry);
        }
    }
    out
}

/// Why a recorded eviction is not finished by a delete (the pod is evicted as usual).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotFinished {
    /// The entry is too old to rely on ([`SAFETY_MARGIN`]).
    Stale,
    /// The entry is older than the pod: it was about an earlier pod of the same name.
    EarlierPod,
    /// The budget that lists it does not select the pod.
    NotSelected,
    /// The pod is Pending, Succeeded or Failed: the eviction handler deletes those without
    /// asking a budget, so an eviction goes through at once.
    NoBudgetNeeded,
}

/// Whether `pod`, as just read, may be deleted to finish the eviction `recorded` says was
/// accepted, at `now`. A pod already being deleted is not asked about (the caller sees it
/// terminating).
///
/// # Errors
/// [`NotFinished`]: why the pod is evicted as usual instead.
pub fn may_finish(recorded: &Recorded, pod: &Pod, now: Timestamp) -> Result<(), NotFinished> {
    let age = now.duration_since(recorded.at);
    if age.is_negative() && age.unsigned_abs() > SAFETY_MARGIN {
        // Stamped far in our future: the clocks disagree too much to judge the expiry.
        return Err(NotFinished::Stale);
    }
    if !age.is_negative() && age.unsigned_abs() >= DELETION_TIMEOUT.saturating_sub(SAFETY_MARGIN) {
        return Err(NotFinished::Stale);
    }
    // Both are whole seconds: an eviction in the second the pod was created counts as its own.
    let created = pod.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if created.is_none_or(|c| c > recorded.at) {
        return Err(NotFinished::EarlierPod);
    }
    let labels = pod.metadata.labels.as_ref();
    let selected =
        recorded.selector.as_ref().is_some_and(|s| s.matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str)));
    if !selected {
        return Err(NotFinished::NotSelected);
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Pending" | "Succeeded" | "Failed")) {
        return Err(NotFinished::NoBudgetNeeded);
    }
    Ok(())
}

/// Finishes the accepted eviction of `pod` that `recorded` lists, if it may be finished: reads
/// the pod, checks [`may_finish`], and deletes it with its UID and resourceVersion as
/// preconditions (what the eviction handler would have done; a pod changed since the read is
/// not deleted). Returns the outcome ([`EvictionOutcome::Completed`] when deleted), or `None`
/// when the pod is to be evicted as usual: not finishable, changed since the read (409), or
/// not ours to read or delete (403: the ClusterRole lacks `get` or `delete` on pods).
pub async fn finish(client: &Client, pod: &PodRef, recorded: &Recorded) -> Option<EvictionOutcome> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let current = match api.get(&pod.name).await {
        Ok(p) => p,
        Err(kube::Error::Api(s)) if s.code == 403 => return None,
        Err(e) => return Some(classify(Err(e))),
    };
    if current.metadata.uid.as_deref() != Some(&*pod.uid) {
        return Some(EvictionOutcome::Gone);
    }
    if current.metadata.deletion_timestamp.is_some() {
        // Being deleted already: the eviction was carried out after all.
        return Some(EvictionOutcome::Accepted);
    }
    if let Err(why) = may_finish(recorded, &current, Timestamp::now()) {
        tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), ?why, "accepted eviction not finished");
        return None;
    }
    let params = delete_params(&pod.uid, current.metadata.resource_version.clone());
    match api.delete(&pod.name, &params).await {
        Ok(_) => Some(EvictionOutcome::Completed(recorded.budget.clone())),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => {
            tracing::debug!(pod = %format!("{}/{}", pod.namespace, pod.name), code = s.code, "accepted eviction not finished");
            None
        }
        Err(e) => Some(classify(Err(e))),
    }
}

/// The delete of the pod with that UID at that resourceVersion (no resourceVersion: the UID
/// alone), with the pod's own grace period, as the eviction handler deletes.
fn delete_params(uid: &str, resource_version: Option<String>) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions { uid: Some(uid.to_owned()), resource_version }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn budget(selector: serde_json::Value, listed: serde_json::Value) -> Arc<PodDisruptionBudget> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "web", "namespace": "apps"},
                "spec": {"minAvailable": 2, "selector": selector},
                "status": {"disruptedPods": listed, "currentHealthy": 2, "desiredHealthy": 2,
                           "disruptionsAllowed": 0, "expectedPods": 3},
            }))
            .unwrap(),
        )
    }

    fn pod(created: &str, phase: &str, app: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "apps", "uid": "u-1", "resourceVersion": "7",
                         "creationTimestamp": created, "labels": {"app": app}},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_delete_carries_both_preconditions_in_api_field_names() {
        let body = serde_json::to_value(delete_params("u-1", Some("7".into()))).unwrap();
        assert_eq!(body, json!({"preconditions": {"uid": "u-1", "resourceVersion": "7"}}));
    }

    #[test]
    fn entries_are_indexed_by_namespace_and_pod_with_their_budget() {
        let b = budget(json!({"matchLabels": {"app": "web"}}), json!({"web-1": "2026-01-01T10:00:00Z"}));
        let index = recorded(&[b, budget(json!({"matchLabels": {"app": "web"}}), json!({}))]);
        let r = index.get(&("apps".into(), "web-1".into())).expect("listed");
        assert_eq!((r.budget.as_str(), r.at), ("web", at("2026-01-01T10:00:00Z")));
        assert_eq!(index.len(), 1);
    }

    #[test]
    fn a_young_entry_about_this_pod_under_its_budget_is_finished() {
        let b = budget(json!({"matchLabels": {"app": "web"}}), json!({"web-1": "2026-01-01T10:00:00Z"}));
        let r = recorded(&[b]).remove(&("apps".into(), "web-1".into())).unwrap();
        let p = pod("2026-01-01T09:00:00Z", "Running", "web");
        assert_eq!(may_finish(&r, &p, at("2026-01-01T10:00:05Z")), Ok(()));
        assert_eq!(may_finish(&r, &p, at("2026-01-01T10:01:29Z")), Ok(()), "inside timeout - margin");
        assert_eq!(may_finish(&r, &p, at("2026-01-01T10:01:30Z")), Err(NotFinished::Stale));
        assert_eq!(may_finish(&r, &p, at("2026-01-01T10:05:00Z")), Err(NotFinished::Stale));
        assert_eq!(may_finish(&r, &p, at("2026-01-01T09:59:50Z")), Ok(()), "small skew either way");
        assert_eq!(may_finish(&r, &p, at("2026-01-01T09:59:00Z")), Err(NotFinished::Stale), "large skew");
    }

    #[test]
    fn an_entry_about_an_earlier_pod_or_another_budget_or_phase_is_not_finished() {
        let b = budget(json!({"matchLabels": {"app": "web"}}), json!({"web-1": "2026-01-01T10:00:00Z"}));
        let r = recorded(&[b]).remove(&("apps".into(), "web-1".into())).unwrap();
        let now = at("2026-01-01T10:00:05Z");
        let newer = pod("2026-01-01T10:00:01Z", "Running", "web");
        assert_eq!(may_finish(&r, &newer, now), Err(NotFinished::EarlierPod));
        assert_eq!(may_finish(&r, &pod("2026-01-01T10:00:00Z", "Running", "web"), now), Ok(()));
        let other = pod("2026-01-01T09:00:00Z", "Running", "db");
        assert_eq!(may_finish(&r, &other, now), Err(NotFinished::NotSelected));
        let pending = pod("2026-01-01T09:00:00Z", "Pending", "web");
        assert_eq!(may_finish(&r, &pending, now), Err(NotFinished::NoBudgetNeeded));
        let empty = budget(json!({}), json!({"web-1": "2026-01-01T10:00:00Z"}));
        let r = recorded(&[empty]).remove(&("apps".into(), "web-1".into())).unwrap();
        let p = pod("2026-01-01T09:00:00Z", "Running", "web");
        assert_eq!(may_finish(&r, &p, now), Err(NotFinished::NotSelected), "an empty selector selects nothing");
    }
}
