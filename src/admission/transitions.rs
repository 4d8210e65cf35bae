//! Stage transitions, immutability and Cordon-before-Drain (SPEC 3.3).

use crate::api::Stage;
use crate::field::{FieldError, FieldPath};
use serde_json::Value;

const STAGES: &[&str] = &["Idle", "Cordon", "Drain", "Complete"];

/// Checks a spec UPDATE against the stored object (SPEC 3.3): the stage may stay or move
/// forward (skipping is fine), never back; `drainPlan` never changes; `nodeSelector` changes
/// only while the stored stage is Idle. `old_stage`/`new_stage` are the parsed stages; the
/// specs are compared as JSON. Returns every violation.
pub fn check_spec_update(old_spec: &Value, new_spec: &Value, old_stage: Stage, new_stage: Stage) -> Vec<FieldError> {
    let spec = FieldPath::root("spec");
    let mut errs = Vec::new();
    if new_stage < old_stage {
        errs.push(FieldError::forbidden(
            &spec.child("stage"),
            format!(
                "may not move backwards from {old_stage} to {new_stage}; stages only move forward \
                 (Idle, Cordon, Drain, Complete): create a new NodeMaintenance instead"
            ),
        ));
    }
    if old_spec.get("drainPlan") != new_spec.get("drainPlan") {
        errs.push(FieldError::forbidden(&spec.child("drainPlan"), "field is immutable after creation"));
    }
    if old_stage != Stage::Idle && old_spec.get("nodeSelector") != new_spec.get("nodeSelector") {
        errs.push(FieldError::forbidden(
            &spec.child("nodeSelector"),
            format!("may change only while the stage is Idle (it is {old_stage})"),
        ));
    }
    errs
}

/// Checks a status-subresource UPDATE of `status.stageStatuses` (SPEC 3.3): earlier entries
/// are neither removed nor rewritten, names are known stages in strictly increasing stage
/// order, and `Drain` is recorded only after `Cordon`. Takes the old and new `status`
/// objects (either may be absent). Returns every violation.
pub fn check_stage_statuses(old_status: Option<&Value>, new_status: Option<&Value>) -> Vec<FieldError> {
    let list = |s: Option<&Value>| -> Vec<Value> {
        s.and_then(|s| s.get("stageStatuses")).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    let (old, new) = (list(old_status), list(new_status));
    let path = FieldPath::root("status").child("stageStatuses");
    let mut errs = Vec::new();
    for (i, entry) in old.iter().enumerate() {
        if new.get(i) != Some(entry) {
            errs.push(FieldError::forbidden(
                &path.index(i),
                "recorded stages are append-only: an earlier entry may not be removed or rewritten",
            ));
        }
    }
    let mut previous: Option<Stage> = None;
    let mut cordoned = false;
    for (i, entry) in new.iter().enumerate() {
        let name_path = path.index(i).child("name");
        let name = entry.get("name").and_then(Value::as_str).unwrap_or_default();
        let Some(stage) = Stage::parse(name) else {
            errs.push(FieldError::not_supported(&name_path, name, STAGES));
            continue;
        };
        if previous.is_some_and(|p| stage <= p) {
            errs.push(FieldError::invalid(&name_path, name, "stages must be recorded once each, in stage order"));
        }
        if stage == Stage::Drain && !cordoned {
            errs.push(FieldError::forbidden(
                &name_path,
                "Drain may be recorded only after Cordon: the Cordon stage always runs before Drain",
            ));
        }
        cordoned |= stage == Stage::Cordon;
        previous = Some(stage);
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stages(names: &[&str]) -> Value {
        json!({"stageStatuses": names.iter().map(|n| json!({"name": n, "startTimestamp": "2026-11-21T23:40:00Z"})).collect::<Vec<_>>()})
    }

    #[test]
    fn stage_moves_forward_and_may_skip() {
        let s = json!({});
        assert!(check_spec_update(&s, &s, Stage::Idle, Stage::Drain).is_empty());
        assert!(check_spec_update(&s, &s, Stage::Cordon, Stage::Complete).is_empty());
        let errs = check_spec_update(&s, &s, Stage::Drain, Stage::Cordon);
        assert!(errs[0].to_string().contains("spec.stage: Forbidden: may not move backwards from Drain to Cordon"));
        assert_eq!(check_spec_update(&s, &s, Stage::Complete, Stage::Idle).len(), 1);
    }

    #[test]
    fn drain_plan_is_immutable_and_selector_only_changes_in_idle() {
        let old = json!({"drainPlan": [1], "nodeSelector": {"a": 1}});
        let new = json!({"drainPlan": [2], "nodeSelector": {"a": 2}});
        assert_eq!(check_spec_update(&old, &new, Stage::Idle, Stage::Idle).len(), 1);
        let errs = check_spec_update(&old, &new, Stage::Drain, Stage::Drain);
        assert_eq!(errs.len(), 2);
        assert!(errs[1].to_string().starts_with("spec.nodeSelector: Forbidden"));
        let old = json!({"paused": false});
        let new = json!({"paused": true, "waitForCompletion": {"timeout": "1h"}});
        for stage in [Stage::Cordon, Stage::Drain, Stage::Complete] {
            assert!(check_spec_update(&old, &new, stage, stage).is_empty(), "paused and waitForCompletion may change");
        }
    }

    #[test]
    fn stage_statuses_are_append_only_ordered_and_cordon_before_drain() {
        assert!(check_stage_statuses(None, Some(&stages(&["Cordon", "Drain"]))).is_empty());
        assert!(
            check_stage_statuses(Some(&stages(&["Cordon"])), Some(&stages(&["Cordon", "Drain", "Complete"])))
                .is_empty()
        );
        let e = check_stage_statuses(None, Some(&stages(&["Drain"])));
        assert!(e[0].to_string().contains("Drain may be recorded only after Cordon"), "{e:?}");
        let e = check_stage_statuses(Some(&stages(&["Cordon", "Drain"])), Some(&stages(&["Cordon"])));
        assert!(e[0].to_string().starts_with("status.stageStatuses[1]: Forbidden"));
        assert_eq!(check_stage_statuses(None, Some(&stages(&["Drain", "Cordon"]))).len(), 2);
        assert_eq!(check_stage_statuses(None, Some(&stages(&["Cordon", "Cordon"]))).len(), 1);
        assert_eq!(check_stage_statuses(None, Some(&stages(&["Paused"]))).len(), 1);
        assert!(check_stage_statuses(None, Some(&stages(&["Complete"]))).is_empty());
    }
}
