//! The progress of our EvictionRequests as the API reports it. In KEP-4563 the
//! progress of an eviction is not on the EvictionRequest but on the `Eviction` the
//! evictionrequest-controller makes of it (kubernetes/api `lifecycle/v1alpha1/types.go`):
//! `status.targetResponders` says which responder is `Active`, and that responder's entry in
//! `status.responders` carries its `message` — for kube-controller-manager's default
//! `imperative-eviction.k8s.io/evictor`, why its Eviction API call did not succeed yet (a
//! PodDisruptionBudget, with backoff). The Eviction is labelled with each requester's name
//! (`<requester>: requester`, `pkg/controller/evictionrequest/evictionrequest_controller.go`),
//! which is how the controller watches only the Evictions of its own requests.
//!
//! The node's drain message names these, grouped by responder and message, so that an
//! eviction held up inside the cluster's responders shows where refused Eviction API calls
//! show.

use super::eviction::summary;
use super::eviction_requests::Watches;
use k8s_openapi::api::lifecycle::v1alpha1::Eviction;
use std::collections::{BTreeMap, HashMap};

/// `TargetResponder.state` of the one responder working on an Eviction.
const ACTIVE: &str = "Active";
/// Longest responder message quoted (the API allows 4000 characters).
const MESSAGE_MAX: usize = 120;

/// The active responder of `eviction` and its message, when it reported one.
pub fn active_message(eviction: &Eviction) -> Option<(String, String)> {
    let status = eviction.status.as_ref()?;
    let active = status.target_responders.as_ref()?.iter().find(|r| r.state == ACTIVE)?;
    let reported = status.responders.as_ref()?.iter().find(|r| r.name == active.name)?;
    let message = reported.message.as_deref().map(str::trim).filter(|m| !m.is_empty())?;
    let quoted = match message.char_indices().nth(MESSAGE_MAX) {
        Some((cut, _)) => format!("{}...", &message[..cut]),
        None => message.to_owned(),
    };
    Some((active.name.clone(), quoted))
}

/// A bounded summary of what the active responders report for the pods on `node` whose
/// request of ours asks for their eviction (`evicting (imperative-eviction.k8s.io/evictor:
/// Cannot evict pod ...): 2 pods`); `None` when none reports anything.
pub fn progress(watches: &Watches, node: &str) -> Option<String> {
    let evictions = watches.evictions.state();
    let by_uid: HashMap<&str, &Eviction> =
        evictions.iter().filter_map(|e| e.spec.target.pod.as_ref().map(|p| (p.uid.as_str(), e.as_ref()))).collect();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    for o in watches.asking().filter(|o| o.failed.is_none() && o.node == node) {
        let Some((responder, message)) = by_uid.get(&*o.pod.uid).and_then(|e| active_message(e)) else { continue };
        *groups.entry(format!("evicting ({responder}: {message})")).or_default() += 1;
    }
    summary(&groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eviction(states: &[(&str, &str)], messages: &[(&str, &str)]) -> Eviction {
        serde_json::from_value(json!({
            "metadata": {"name": "e", "namespace": "apps"},
            "spec": {"target": {"pod": {"name": "web-1", "uid": "5477c2ff-f59f-4eb9-a0be-e54232323faa"}}},
            "status": {
                "targetResponders": states.iter().map(|(n, s)| json!({"name": n, "priority": 100, "state": s})).collect::<Vec<_>>(),
                "responders": messages.iter().map(|(n, m)| json!({"name": n, "message": m})).collect::<Vec<_>>(),
            },
        }))
        .expect("an Eviction")
    }

    #[test]
    fn only_the_active_responder_speaks() {
        let evictor = "imperative-eviction.k8s.io/evictor";
        let e = eviction(
            &[("acme.io/migrator", "Interrupted"), (evictor, ACTIVE)],
            &[
                ("acme.io/migrator", "gave up"),
                (evictor, "Cannot evict pod as it would violate the pod's disruption budget."),
            ],
        );
        assert_eq!(
            active_message(&e),
            Some((evictor.to_owned(), "Cannot evict pod as it would violate the pod's disruption budget.".to_owned()))
        );
        assert_eq!(active_message(&eviction(&[(evictor, "Inactive")], &[(evictor, "x")])), None);
        assert_eq!(active_message(&eviction(&[(evictor, ACTIVE)], &[(evictor, " ")])), None, "nothing reported");
        let long = "é".repeat(200);
        let (_, quoted) = active_message(&eviction(&[(evictor, ACTIVE)], &[(evictor, &long)])).expect("quoted");
        assert_eq!(quoted.chars().count(), MESSAGE_MAX + 3);
    }
}
