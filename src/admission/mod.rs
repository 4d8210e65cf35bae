//! Admission decisions as pure functions over plain data (SPEC 3): a decoded request, a view
//! of the cluster's Nodes and NodeMaintenances, and an [`Authorizer`] in; a [`Decision`] out.
//! Nothing here does I/O except through the `Authorizer`.

mod authz;
mod budget;
mod forecast;
mod gates;
mod mutate;
mod node;
mod object;
pub mod review;
mod transitions;
mod validate;
mod wait;
mod warnings;

pub use authz::{Authorizer, AuthzOutcome, StandaloneAuthorizer, denied_message};
pub use budget::validate_budget;
pub use mutate::mutate;
pub use node::validate_node;
pub use object::{ParsedSpec, parse_spec};
pub use validate::validate;

use crate::api::{NodeDisruptionBudget, NodeMaintenance};
use crate::field::FieldError;
use crate::selector::NodeIndex;
use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;

/// What the decisions read of the cluster: the Nodes and NodeMaintenances of a watch cache
/// (cluster mode) or of a file (standalone). Called only when a decision needs it.
pub trait ClusterView: Send + Sync {
    /// The names and labels of every Node currently known, indexed for selector matching
    /// (SPEC 3.4, 3.5). A view builds it once per change of the Nodes' names or labels and
    /// shares it until the next, so a selection over thousands of Nodes reads compact columns
    /// instead of every Node's labels (docs/benchmarks.md, "Node selection").
    fn node_index(&self) -> Arc<NodeIndex>;
    /// Every NodeMaintenance currently known.
    fn maintenances(&self) -> Vec<Arc<NodeMaintenance>>;
    /// Every Node currently known, whole (Ready condition, cordon, holders): what the
    /// forecast warnings simulate over (SPEC 4.7). None by default: no forecast warning.
    fn nodes(&self) -> Vec<Arc<Node>> {
        Vec::new()
    }
    /// Every NodeDisruptionBudget currently known (none by default).
    fn budgets(&self) -> Vec<Arc<NodeDisruptionBudget>> {
        Vec::new()
    }
    /// Whether the view reflects the cluster: a watch cache before its initial list is empty,
    /// and "selects no node" would then let anyone through (SPEC 3.4 fails closed). A file is
    /// always complete.
    fn synced(&self) -> bool {
        true
    }
}

/// How many field errors a 422 denial lists (message and causes) before `and N more errors`.
pub const MAX_LISTED_ERRORS: usize = 100;

/// Why a request is refused: a metav1.Status `code`, `reason` and `message`, plus field
/// causes for validation errors.
#[derive(Clone, Debug, PartialEq)]
pub struct Denial {
    /// HTTP-style code: 400 bad object, 403 not authorized, 422 invalid, 500/503 internal or
    /// dependency failure (SPEC 3).
    pub code: u16,
    /// metav1.StatusReason (`BadRequest`, `Forbidden`, `Invalid`, `InternalError`,
    /// `ServiceUnavailable`).
    pub reason: &'static str,
    /// What a person should read.
    pub message: String,
    /// Field errors behind an `Invalid` denial.
    pub causes: Vec<FieldError>,
}

impl Denial {
    /// 400: the object cannot be read.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Denial { code: 400, reason: "BadRequest", message: message.into(), causes: vec![] }
    }

    /// 403: the user may not do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Denial { code: 403, reason: "Forbidden", message: message.into(), causes: vec![] }
    }

    /// 503: a dependency (the apiserver's authorizer) did not answer; fail closed.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Denial { code: 503, reason: "ServiceUnavailable", message: message.into(), causes: vec![] }
    }

    /// 422: the object named `name` is invalid; the message lists every error, formatted as
    /// the apiserver formats its own (`NodeMaintenance.nodemaintenance.k8s.io "x" is invalid:
    /// [a, b]`). Past [`MAX_LISTED_ERRORS`] the message and the causes stop with `and N more
    /// errors`, so that a hostile object (100,000 duplicate drainPlan entries fit the body
    /// limit) cannot make the answer several times larger than the request.
    pub fn invalid(name: &str, errors: Vec<FieldError>) -> Self {
        Self::invalid_object("NodeMaintenance", name, errors)
    }

    /// 422 as [`Denial::invalid`], for an object of `kind` in the API group.
    pub fn invalid_object(kind: &str, name: &str, mut errors: Vec<FieldError>) -> Self {
        let more = errors.len().saturating_sub(MAX_LISTED_ERRORS);
        errors.truncate(MAX_LISTED_ERRORS);
        let mut list: Vec<String> = errors.iter().map(ToString::to_string).collect();
        if more > 0 {
            list.push(format!("and {more} more errors"));
        }
        let joined = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
        Denial {
            code: 422,
            reason: "Invalid",
            message: format!("{kind}.{} {name:?} is invalid: {joined}", crate::api::GROUP),
            causes: errors,
        }
    }
}

/// The outcome of one admission review.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    /// Whether the request may proceed.
    pub allowed: bool,
    /// Why not, when `allowed` is false.
    pub denial: Option<Denial>,
    /// Non-blocking warnings, one short sentence each (<= 120 characters, SPEC 3.5).
    pub warnings: Vec<String>,
    /// The RFC 6902 patch of the mutating endpoint (SPEC 3.1); `None` when nothing changes.
    pub patch: Option<json_patch::Patch>,
}

impl Decision {
    /// Allowed, with nothing else.
    pub fn allow() -> Self {
        Decision { allowed: true, ..Default::default() }
    }

    /// Allowed with these warnings.
    pub fn allow_with_warnings(warnings: Vec<String>) -> Self {
        Decision { allowed: true, warnings, ..Default::default() }
    }

    /// Denied.
    pub fn deny(denial: Denial) -> Self {
        Decision { allowed: false, denial: Some(denial), ..Default::default() }
    }

    /// Short label for metrics and logs: `allowed`, `denied` or `error` (codes 5xx).
    pub fn result_label(&self) -> &'static str {
        match &self.denial {
            None => "allowed",
            Some(d) if d.code >= 500 => "error",
            Some(_) => "denied",
        }
    }
}

/// Checks that a request is about the resource an endpoint serves: `group`/`kind`.
fn expect_kind(req: &review::Request<'_>, group: &str, kind: &str) -> Result<(), Denial> {
    if req.kind.group == group && req.kind.kind == kind {
        Ok(())
    } else {
        let got = if req.kind.group.is_empty() {
            req.kind.kind.to_string()
        } else {
            format!("{}.{}", req.kind.kind, req.kind.group)
        };
        let want = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        Err(Denial::bad_request(format!("this endpoint reviews {want} objects, not {got}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::FieldPath;

    #[test]
    fn invalid_lists_at_most_max_listed_errors() {
        let errs = |n: usize| -> Vec<FieldError> {
            (0..n).map(|i| FieldError::required(&FieldPath::root("spec").index(i), "")).collect()
        };
        let d = Denial::invalid("m", errs(MAX_LISTED_ERRORS));
        assert_eq!(d.causes.len(), MAX_LISTED_ERRORS);
        assert!(!d.message.contains("more errors"));
        let d = Denial::invalid("m", errs(100_000));
        assert_eq!(d.causes.len(), MAX_LISTED_ERRORS);
        assert!(d.message.ends_with(", and 99900 more errors]"), "{}", &d.message[d.message.len() - 60..]);
        assert!(d.message.len() < 10_000);
        assert_eq!(Denial::invalid("m", errs(1)).message.matches('[').count(), 1, "one error: not bracketed");
    }
}
