//! Defaulting on the mutating endpoint (SPEC 3.1).

use super::object::{members, read_plan};
use super::review::Request;
use super::{Decision, Denial, expect_kind};
use crate::api::{GROUP, Stage, default_plan};
use kube::core::admission::Operation;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The only members of `spec` that defaulting may change.
const DEFAULTED: [&str; 2] = ["drainPlan", "stage"];

/// Defaults a NodeMaintenance on CREATE and UPDATE (SPEC 3.1).
///
/// CREATE: `spec.stage` defaults to Idle; the 12 KEP drainPlan entries that are missing are
/// added and the plan is put in canonical order (a plan with an entry that does not read as
/// valid is left for validation to report). UPDATE: a drainPlan missing (or empty) in the new
/// object is carried over from the stored one; nothing else changes. Returns an allowed
/// decision with the RFC 6902 patch computed by `json_patch::diff` (none when nothing
/// changes; reinvocation-safe), or a 400 denial for a request that is not a NodeMaintenance
/// object.
pub fn mutate(req: &Request<'_>) -> Decision {
    if let Err(d) = expect_kind(req, GROUP, "NodeMaintenance") {
        return Decision::deny(d);
    }
    if req.sub_resource.is_some() || !matches!(req.operation, Operation::Create | Operation::Update) {
        return Decision::allow();
    }
    let Some(original) = req.object.as_ref() else {
        return Decision::deny(Denial::bad_request("request has no object"));
    };
    // Only the members of the spec that defaulting changes are decoded: every other member is
    // the same before and after, so the diff of these alone is the diff of the whole object.
    let Some(spec) = original.member("spec").and_then(members) else {
        // Nothing to default; validation reports the missing spec.
        return Decision::allow();
    };
    let before: Map<String, Value> =
        DEFAULTED.into_iter().filter_map(|k| Some((k.to_owned(), decoded(spec.get(k)?)?))).collect();
    let mut after = before.clone();
    if req.operation == Operation::Create {
        after.entry("stage").or_insert_with(|| Value::String(Stage::default().as_str().into()));
        if let Some(plan) =
            read_plan(before.get("drainPlan")).or_else(|| (!before.contains_key("drainPlan")).then(Vec::new))
        {
            let defaulted = default_plan(&plan);
            if defaulted != plan {
                after.insert("drainPlan".into(), serde_json::to_value(defaulted).unwrap_or_default());
            }
        }
    } else if plan_missing(after.get("drainPlan"))
        && let Some(stored) = req
            .old_object
            .as_ref()
            .and_then(|o| o.member("spec"))
            .and_then(members)
            .and_then(|s| decoded(s.get("drainPlan")?))
    {
        after.insert("drainPlan".into(), stored);
    }
    let in_spec = |m: Map<String, Value>| Value::Object(Map::from_iter([("spec".to_owned(), Value::Object(m))]));
    let patch = json_patch::diff(&in_spec(before), &in_spec(after));
    if patch.0.is_empty() {
        return Decision::allow();
    }
    Decision { patch: Some(patch), ..Decision::allow() }
}

/// A member's text decoded; it was checked as a `Value` when the request was decoded.
fn decoded(member: &RawValue) -> Option<Value> {
    serde_json::from_str(member.get()).ok()
}

fn plan_missing(plan: Option<&Value>) -> bool {
    match plan {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A review of `object` (and `old`), its text leaked: a request borrows from its text.
    fn request(op: &str, object: Value, old: Option<Value>) -> Request<'static> {
        let text = json!({
            "uid": "u", "kind": {"group": GROUP, "version": "v1alpha1", "kind": "NodeMaintenance"},
            "resource": {"group": GROUP, "version": "v1alpha1", "resource": "nodemaintenances"},
            "operation": op, "userInfo": {"username": "admin"}, "object": object, "oldObject": old
        });
        Request::parse(text.to_string().leak()).unwrap()
    }

    fn apply(object: &Value, d: &Decision) -> Value {
        let mut o = object.clone();
        if let Some(p) = &d.patch {
            json_patch::patch(&mut o, p).unwrap();
        }
        o
    }

    #[test]
    fn create_defaults_stage_and_plan_and_is_idempotent() {
        let obj = json!({"metadata": {"name": "m"}, "spec": {"nodeSelector": {"nodeSelectorTerms": []}}});
        let d = mutate(&request("CREATE", obj.clone(), None));
        let out = apply(&obj, &d);
        assert_eq!(out["spec"]["stage"], "Idle");
        assert_eq!(out["spec"]["drainPlan"].as_array().unwrap().len(), 12);
        let again = mutate(&request("CREATE", out.clone(), None));
        assert!(again.patch.is_none(), "second pass must not patch: {:?}", again.patch);
    }

    #[test]
    fn update_carries_over_a_missing_plan_and_nothing_else() {
        let old = json!({"spec": {"stage": "Cordon", "drainPlan": [{"podPriority": 1, "podType": "Default"}]}});
        let new = json!({"spec": {"stage": "Drain"}});
        let out = apply(&new, &mutate(&request("UPDATE", new.clone(), Some(old.clone()))));
        assert_eq!(out["spec"]["drainPlan"], old["spec"]["drainPlan"]);
        assert_eq!(out["spec"]["stage"], "Drain");
        let unchanged = json!({"spec": {"drainPlan": [{"podPriority": 2, "podType": "Default"}]}});
        assert!(mutate(&request("UPDATE", unchanged, Some(old))).patch.is_none());
    }

    #[test]
    fn an_invalid_plan_is_left_for_validation() {
        let obj = json!({"spec": {"stage": "Idle", "drainPlan": [{"podPriority": 1, "podType": "Job"}]}});
        assert!(mutate(&request("CREATE", obj, None)).patch.is_none());
    }

    #[test]
    fn other_kinds_are_refused() {
        let mut r = request("CREATE", json!({}), None);
        r.kind.kind = "Pod".into();
        r.kind.group = "".into();
        let d = mutate(&r);
        assert_eq!(d.denial.unwrap().code, 400);
    }
}
