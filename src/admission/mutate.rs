//! Defaulting on the mutating endpoint (SPEC 3.1).

use super::object::read_plan;
use super::rawjson::member;
use super::review::Request;
use super::{Decision, Denial, expect_kind};
use crate::api::{GROUP, Stage, default_plan};
use kube::core::admission::Operation;
use serde_json::Value;

/// Defaults a NodeMaintenance on CREATE and UPDATE (SPEC 3.1).
///
/// CREATE: `spec.stage` defaults to Idle; the 12 KEP drainPlan entries that are missing are
/// added and the plan is put in canonical order (a plan with an entry that does not read as
/// valid is left for validation to report). UPDATE: a drainPlan missing (or empty) in the new
/// object is carried over from the stored one; nothing else changes. Returns an allowed
/// decision with the RFC 6902 patch (none when nothing changes; reinvocation-safe), or a
/// 400 denial for a request that is not a NodeMaintenance object.
pub fn mutate(req: &Request) -> Decision {
    if let Err(d) = expect_kind(req, GROUP, "NodeMaintenance") {
        return Decision::deny(d);
    }
    if req.sub_resource.is_some() || !matches!(req.operation, Operation::Create | Operation::Update) {
        return Decision::allow();
    }
    let Some(original) = req.object.as_ref() else {
        return Decision::deny(Denial::bad_request("request has no object"));
    };
    // Only the spec is decoded: nothing else is defaulted.
    let Some(before) = member(original, "spec").filter(Value::is_object) else {
        // Nothing to default; validation reports the missing spec.
        return Decision::allow();
    };
    let mut spec = before.as_object().cloned().unwrap_or_default();
    if req.operation == Operation::Create {
        spec.entry("stage").or_insert_with(|| Value::String(Stage::default().as_str().into()));
        if let Some(plan) = read_plan(&before).or_else(|| (!spec.contains_key("drainPlan")).then(Vec::new)) {
            let defaulted = default_plan(&plan);
            if defaulted != plan {
                spec.insert("drainPlan".into(), serde_json::to_value(defaulted).unwrap_or_default());
            }
        }
    } else if plan_missing(&spec)
        && let Some(stored) =
            req.old_object.as_ref().and_then(|o| member(o, "spec")).and_then(|s| s.get("drainPlan").cloned())
    {
        spec.insert("drainPlan".into(), stored);
    }
    let after = Value::Object(spec);
    let mut patch = json_patch::diff(&before, &after);
    if patch.0.is_empty() {
        return Decision::allow();
    }
    prefix_paths(&mut patch, "/spec");
    Decision { patch: Some(patch), ..Decision::allow() }
}

fn plan_missing(spec: &serde_json::Map<String, Value>) -> bool {
    match spec.get("drainPlan") {
        None | Some(Value::Null) => true,
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    }
}

/// Rebases a patch computed on the spec onto the whole object (diffing only the spec keeps
/// the cost independent of metadata size).
fn prefix_paths(patch: &mut json_patch::Patch, prefix: &str) {
    use json_patch::PatchOperation as Op;
    use json_patch::jsonptr::PointerBuf;
    let rebase = |p: &mut PointerBuf| {
        let joined = format!("{prefix}{p}");
        if let Ok(new) = PointerBuf::parse(joined) {
            *p = new;
        }
    };
    for op in &mut patch.0 {
        match op {
            Op::Add(o) => rebase(&mut o.path),
            Op::Remove(o) => rebase(&mut o.path),
            Op::Replace(o) => rebase(&mut o.path),
            Op::Test(o) => rebase(&mut o.path),
            Op::Move(o) => {
                rebase(&mut o.path);
                rebase(&mut o.from);
            }
            Op::Copy(o) => {
                rebase(&mut o.path);
                rebase(&mut o.from);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(op: &str, object: Value, old: Option<Value>) -> Request {
        serde_json::from_value(json!({
            "uid": "u", "kind": {"group": GROUP, "version": "v1alpha1", "kind": "NodeMaintenance"},
            "resource": {"group": GROUP, "version": "v1alpha1", "resource": "nodemaintenances"},
            "operation": op, "userInfo": {"username": "admin"}, "object": object, "oldObject": old
        }))
        .unwrap()
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
        r.kind.group = String::new();
        let d = mutate(&r);
        assert_eq!(d.denial.unwrap().code, 400);
    }
}
