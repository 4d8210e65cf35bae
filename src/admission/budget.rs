//! The validating endpoint for NodeDisruptionBudget: `/validate-budget`.

use super::object::{is_object, read_spec};
use super::review::Request;
use super::{Decision, Denial, expect_kind};
use crate::api::{GROUP, scaled_count, shown};
use crate::field::{FieldError, FieldPath};
use crate::selector::validate_node_selector;
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::core::admission::Operation;
use serde::Deserialize;

/// The spec as sent.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BudgetInput {
    node_selector: Option<NodeSelector>,
    max_unavailable: Option<IntOrString>,
    min_available: Option<IntOrString>,
}

/// Validates a NodeDisruptionBudget CREATE or UPDATE (DELETE and other operations are
/// allowed: a budget only restrains). Refused with 400 for an object that cannot be read
/// (wrong types, unknown fields) and 422 listing every field error: `spec.nodeSelector`
/// missing or invalid (the NodeMaintenance rules, SPEC 3.2), both or neither of
/// `maxUnavailable` and `minAvailable`, and a value that is 0, negative, over 100% or not
/// a percentage.
pub fn validate_budget(req: &Request) -> Decision {
    if let Err(d) = expect_kind(req, GROUP, "NodeDisruptionBudget") {
        return Decision::deny(d);
    }
    if !matches!(req.operation, Operation::Create | Operation::Update) || req.sub_resource.is_some() {
        return Decision::allow();
    }
    let Some(object) = req.object.as_deref().filter(|o| is_object(o)) else {
        return Decision::deny(Denial::bad_request("request has no object"));
    };
    let input: BudgetInput = match read_spec(object, "NodeDisruptionBudget") {
        Ok(i) => i,
        Err(d) => return Decision::deny(d),
    };
    let spec = FieldPath::root("spec");
    let mut errs = Vec::new();
    match &input.node_selector {
        Some(sel) => errs.extend(validate_node_selector(sel, &spec.child("nodeSelector"))),
        None => {
            errs.push(FieldError::required(&spec.child("nodeSelector"), "a NodeDisruptionBudget must select nodes"))
        }
    }
    let fields = [("maxUnavailable", &input.max_unavailable), ("minAvailable", &input.min_available)];
    for (field, value) in fields {
        if let Some(v) = value
            && let Err(detail) = scaled_count(v, 0)
        {
            errs.push(FieldError::invalid(&spec.child(field), shown(v), detail));
        }
    }
    match (&input.max_unavailable, &input.min_available) {
        (Some(_), Some(_)) => errs
            .push(FieldError::forbidden(&spec.child("minAvailable"), "exactly one of maxUnavailable and minAvailable")),
        (None, None) => errs.push(FieldError::required(
            &spec.child("maxUnavailable"),
            "exactly one of maxUnavailable and minAvailable",
        )),
        _ => {}
    }
    if errs.is_empty() {
        Decision::allow()
    } else {
        Decision::deny(Denial::invalid_object("NodeDisruptionBudget", &req.name, errs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(spec: serde_json::Value) -> Request {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "name": "general", "operation": "CREATE", "userInfo": {"username": "admin"},
                "kind": {"group": GROUP, "version": "v1alpha1", "kind": "NodeDisruptionBudget"},
                "resource": {"group": GROUP, "version": "v1alpha1", "resource": "nodedisruptionbudgets"},
                "object": {"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
                           "metadata": {"name": "general"}, "spec": spec},
            }
        });
        let bytes = serde_json::to_vec(&body).unwrap();
        super::super::review::decode(&bytes).unwrap().request
    }

    fn selector() -> serde_json::Value {
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["general"]}]}]})
    }

    fn causes(spec: serde_json::Value) -> Vec<String> {
        let d = validate_budget(&review(spec));
        d.denial.map(|d| d.causes.iter().map(ToString::to_string).collect()).unwrap_or_default()
    }

    #[test]
    fn a_budget_needs_a_selector_and_exactly_one_valid_count() {
        assert!(validate_budget(&review(json!({"nodeSelector": selector(), "maxUnavailable": 1}))).allowed);
        assert!(validate_budget(&review(json!({"nodeSelector": selector(), "minAvailable": "50%"}))).allowed);
        let both = causes(json!({"nodeSelector": selector(), "maxUnavailable": 1, "minAvailable": 1}));
        assert_eq!(both.len(), 1);
        assert!(both[0].starts_with("spec.minAvailable: Forbidden"), "{both:?}");
        let neither = causes(json!({"nodeSelector": selector()}));
        assert!(neither[0].starts_with("spec.maxUnavailable: Required"), "{neither:?}");
        for bad in [json!(0), json!(-1), json!("101%"), json!("0%"), json!("lots")] {
            let c = causes(json!({"nodeSelector": selector(), "maxUnavailable": bad}));
            assert!(c.len() == 1 && c[0].starts_with("spec.maxUnavailable: Invalid value"), "{bad}: {c:?}");
        }
        let no_selector = causes(json!({"maxUnavailable": 1}));
        assert!(no_selector[0].starts_with("spec.nodeSelector: Required"), "{no_selector:?}");
        let bad_selector = causes(
            json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "Near"}]}]}, "maxUnavailable": 1}),
        );
        assert!(
            bad_selector[0].starts_with("spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0]"),
            "{bad_selector:?}"
        );
        let d = validate_budget(&review(json!({"nodeSelector": selector(), "maxUnavailable": 1, "extra": true})));
        assert_eq!(d.denial.map(|d| d.code), Some(400), "unknown fields are refused");
    }
}
