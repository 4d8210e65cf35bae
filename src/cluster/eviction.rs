//! Evictions through `pods/eviction` (policy/v1) with the pod UID as precondition, and what
//! their answers mean (SPEC 4.3): a PodDisruptionBudget refusal is told apart (the
//! controller's eviction memory retries and reports it); a 429 from an eviction interceptor
//! (KubeVirt, Strimzi drain-cleaner) is progress.

use super::writes::retry_after;
use crate::planner::PodRef;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use kube::api::PostParams;
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::time::Duration;

/// What happened to one eviction request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionOutcome {
    /// Accepted: the pod is being deleted.
    Accepted,
    /// An eviction the apiserver had accepted (the PodDisruptionBudget named here records it
    /// in `disruptedPods`) and not carried out, finished by deleting the pod
    /// ([`super::half_applied`]): the pod is being deleted.
    Completed(String),
    /// The pod (with that UID) no longer exists.
    Gone,
    /// Refused by a PodDisruptionBudget (its name when the answer names it).
    BlockedByPdb(String),
    /// Answered 429 by something that took over the eviction (an interceptor).
    Intercepted(String),
    /// Answered 429 with `Retry-After` by the apiserver's API Priority and Fairness: not an
    /// answer about the pod; asked again after that pause.
    Throttled(Duration),
    /// Any other failure, with the cause.
    Failed(String),
}

impl EvictionOutcome {
    /// Metric label (`node_maintenance_evictions_total{result}`).
    pub fn label(&self) -> &'static str {
        match self {
            EvictionOutcome::Accepted => "accepted",
            EvictionOutcome::Completed(_) => "completed",
            EvictionOutcome::Gone => "not_found",
            EvictionOutcome::BlockedByPdb(_) => "blocked_by_pdb",
            EvictionOutcome::Intercepted(_) => "intercepted",
            EvictionOutcome::Throttled(_) => "throttled",
            EvictionOutcome::Failed(_) => "error",
        }
    }

    /// Whether the pod is on its way out: the eviction was accepted (or finished by a
    /// delete) or taken over by an interceptor.
    pub fn in_progress(&self) -> bool {
        matches!(self, EvictionOutcome::Accepted | EvictionOutcome::Completed(_) | EvictionOutcome::Intercepted(_))
    }

    /// The pause a throttled answer asked for (`None` for every other outcome).
    pub fn throttle(&self) -> Option<Duration> {
        match self {
            EvictionOutcome::Throttled(pause) => Some(*pause),
            _ => None,
        }
    }
}

/// Classifies the apiserver's answer to an eviction.
pub fn classify(result: Result<(), kube::Error>) -> EvictionOutcome {
    if let Some(pause) = result.as_ref().err().and_then(retry_after) {
        return EvictionOutcome::Throttled(pause);
    }
    let status = match result {
        Ok(()) => return EvictionOutcome::Accepted,
        Err(kube::Error::Api(status)) => status,
        Err(e) => return EvictionOutcome::Failed(e.to_string()),
    };
    match status.code {
        404 | 409 => EvictionOutcome::Gone,
        429 => {
            let causes = status.details.as_ref().map(|d| d.causes.as_slice()).unwrap_or_default();
            let budget = causes.iter().find(|c| c.reason == "DisruptionBudget");
            match budget {
                Some(c) => EvictionOutcome::BlockedByPdb(pdb_name(&c.message).unwrap_or_else(|| "unnamed".into())),
                None if status.message.contains("disruption budget") => EvictionOutcome::BlockedByPdb("unnamed".into()),
                None => EvictionOutcome::Intercepted(status.message.clone()),
            }
        }
        _ => EvictionOutcome::Failed(format!("{} ({})", status.message, status.code)),
    }
}

/// `The disruption budget web needs 2 healthy pods ...` -> `web`.
fn pdb_name(message: &str) -> Option<String> {
    let rest = message.split("disruption budget ").nth(1)?;
    rest.split_whitespace().next().map(str::to_owned)
}

/// The policy/v1 Eviction of `pod`, with its UID as precondition (a pod re-created under the
/// same name is a different pod).
pub fn eviction(pod: &PodRef) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(pod.name.to_string()),
            namespace: Some(pod.namespace.to_string()),
            ..Default::default()
        },
        delete_options: Some(DeleteOptions {
            preconditions: Some(Preconditions { uid: Some(pod.uid.to_string()), resource_version: None }),
            ..Default::default()
        }),
    }
}

/// Evicts `pod` with its UID as precondition. (kube's `Api::evict` is not used: kube-core 5
/// sends its options as `delete_options`, which the apiserver drops as an unknown field, so
/// the precondition would be lost.)
pub async fn evict(client: &Client, pod: &PodRef) -> EvictionOutcome {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let result: Result<kube::core::Status, kube::Error> =
        api.create_subresource("eviction", &pod.name, &PostParams::default(), &eviction(pod)).await;
    classify(result.map(|_| ()))
}

/// How many causes a summary names.
const NAMED_CAUSES: usize = 5;

/// A bounded summary of pods counted by cause: `cause: 2 pods; other: 1 pod`, the first
/// five causes and how many more; `None` if there is none.
pub fn summary(groups: &BTreeMap<String, usize>) -> Option<String> {
    let parts: Vec<String> = groups
        .iter()
        .take(NAMED_CAUSES)
        .map(|(k, n)| format!("{k}: {n} pod{}", if *n == 1 { "" } else { "s" }))
        .collect();
    match (parts.is_empty(), groups.len().saturating_sub(NAMED_CAUSES)) {
        (true, _) => None,
        (false, 0) => Some(parts.join("; ")),
        (false, m) => Some(format!("{} and {m} more causes", parts.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::response::{StatusCause, StatusDetails};

    fn api_error(code: u16, message: &str, cause: Option<(&str, &str)>) -> kube::Error {
        let mut s = kube::core::Status::failure(message, "TooManyRequests");
        s.code = code;
        s.details = cause.map(|(reason, message)| StatusDetails {
            causes: vec![StatusCause { reason: reason.into(), message: message.into(), field: String::new() }],
            name: String::new(),
            group: "policy".into(),
            kind: "Eviction".into(),
            uid: String::new(),
            retry_after_seconds: 0,
        });
        kube::Error::Api(s.boxed())
    }

    #[test]
    fn the_eviction_carries_the_uid_precondition_in_api_field_names() {
        let pod = PodRef { namespace: "ns".into(), name: "p".into(), uid: "u-1".into() };
        let json = serde_json::to_value(eviction(&pod)).unwrap();
        assert_eq!(json["deleteOptions"]["preconditions"]["uid"], "u-1");
        assert_eq!(json["metadata"]["name"], "p");
        assert_eq!(json["apiVersion"], "policy/v1");
    }

    #[test]
    fn answers_are_classified() {
        assert_eq!(classify(Ok(())), EvictionOutcome::Accepted);
        assert_eq!(classify(Err(api_error(404, "not found", None))), EvictionOutcome::Gone);
        assert_eq!(classify(Err(api_error(409, "uid mismatch", None))), EvictionOutcome::Gone);
        let pdb = api_error(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            Some(("DisruptionBudget", "The disruption budget web needs 2 healthy pods and has 2 currently")),
        );
        assert_eq!(classify(Err(pdb)), EvictionOutcome::BlockedByPdb("web".into()));
        assert_eq!(
            classify(Err(api_error(429, "Eviction triggered live migration", None))),
            EvictionOutcome::Intercepted("Eviction triggered live migration".into())
        );
        assert!(matches!(classify(Err(api_error(500, "boom", None))), EvictionOutcome::Failed(_)));
        assert_eq!(
            classify(Err(crate::cluster::writes::tests::too_many(2, None))),
            EvictionOutcome::Throttled(Duration::from_secs(2)),
            "API Priority and Fairness throttling is neither progress nor a PDB"
        );
    }
}
