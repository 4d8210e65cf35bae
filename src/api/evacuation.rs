//! Evacuation by rollout: the `spec.evacuation` choice, the annotations that opt
//! a Deployment in or out and record the rollout the controller started, and the
//! `status.evacuations` entries that report each rollout.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Deployment annotation: `surge` opts the Deployment in under `Annotated`, `evict` opts it
/// out under `Surge`. Any other value counts as absent.
pub const EVACUATION_ANNOTATION: &str = "nodemaintenance.k8s.io/evacuation";
/// Pod-template annotation set to start a rollout (as `kubectl.kubernetes.io/restartedAt`
/// does for `kubectl rollout restart`): the time it was started, RFC 3339.
pub const EVACUATED_AT_ANNOTATION: &str = "nodemaintenance.k8s.io/evacuated-at";
/// Pod-template annotation naming the maintenance that started the rollout, as
/// `<name>/<uid>`: the fact "this maintenance rolled this Deployment" survives a restart of
/// the controller, so a maintenance never starts a second rollout of the same Deployment.
pub const EVACUATED_FOR_ANNOTATION: &str = "nodemaintenance.k8s.io/evacuated-for";

/// Which pods of Deployments a maintenance moves by a rollout instead of the Eviction API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Evacuation {
    /// Every Deployment that can surge (RollingUpdate with maxSurge above 0 and
    /// maxUnavailable 0), unless annotated `nodemaintenance.k8s.io/evacuation: evict`.
    Surge,
    /// Only Deployments annotated `nodemaintenance.k8s.io/evacuation: surge` (and able to
    /// surge).
    Annotated,
    /// None: every pod goes through the Eviction API.
    Evict,
}

impl Evacuation {
    /// Every value, in declaration order.
    pub const ALL: [Evacuation; 3] = [Evacuation::Surge, Evacuation::Annotated, Evacuation::Evict];

    /// The name as it appears in the API (`"Surge"`, `"Annotated"`, `"Evict"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Evacuation::Surge => "Surge",
            Evacuation::Annotated => "Annotated",
            Evacuation::Evict => "Evict",
        }
    }

    /// Parses the API name; `None` for anything else (admission reports it with a field path).
    pub fn parse(name: &str) -> Option<Evacuation> {
        Evacuation::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether a Deployment whose `nodemaintenance.k8s.io/evacuation` annotation has the value
    /// `annotation` (`None`: absent) is evacuated by rollout under this choice.
    pub fn applies_to(self, annotation: Option<&str>) -> bool {
        match self {
            Evacuation::Surge => annotation != Some("evict"),
            Evacuation::Annotated => annotation == Some("surge"),
            Evacuation::Evict => false,
        }
    }
}

/// Where a rollout started for a maintenance stands (`status.evacuations[].reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum RolloutState {
    /// The Deployment is rolling out: new pods surge onto schedulable nodes first.
    RollingOut,
    /// The rollout finished: every replica is updated and available, the old pods are gone.
    EvacuatedByRollout,
    /// The rollout exceeded its `progressDeadlineSeconds` (the Deployment's `Progressing`
    /// condition says `ProgressDeadlineExceeded`); the drain waits, nothing is forced.
    RolloutFailed,
}

/// One Deployment a maintenance evacuated by rollout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EvacuationStatus {
    /// Namespace of the Deployment.
    pub namespace: String,
    /// Name of the Deployment.
    pub name: String,
    /// `RollingOut`, `EvacuatedByRollout` or `RolloutFailed`.
    pub reason: RolloutState,
    /// The rollout's progress or cause of failure, in the words of `kubectl rollout status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the controller started the rollout (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_and_the_deployment_annotation_combine() {
        assert!(Evacuation::Surge.applies_to(None));
        assert!(Evacuation::Surge.applies_to(Some("surge")));
        assert!(!Evacuation::Surge.applies_to(Some("evict")), "a Deployment may opt out");
        assert!(Evacuation::Annotated.applies_to(Some("surge")));
        assert!(!Evacuation::Annotated.applies_to(None));
        assert!(!Evacuation::Annotated.applies_to(Some("Surge")), "values are exact");
        assert!(!Evacuation::Evict.applies_to(Some("surge")), "a maintenance may opt out");
        for e in Evacuation::ALL {
            assert_eq!(Evacuation::parse(e.as_str()), Some(e));
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
        }
        assert_eq!(Evacuation::parse("surge"), None);
    }
}
