//! Reading a NodeMaintenance spec from the request and validating it (SPEC 3.2).
//!
//! The spec is first read into a lenient shape (enum fields as text) so that an unknown
//! `stage` or `podType` becomes a field error listed with all the others rather than a
//! decoding failure; it is then converted into the typed [`NodeMaintenanceSpec`].
//!
//! Objects stay the JSON text the apiserver sent ([`Object`]); the members a decision reads
//! are looked up the way `serde_json::Value::get` finds them on the decoded object (the key
//! unescaped, the last value when a key repeats, as the apiserver's own decoding keeps it).

use super::Denial;
use super::review::Object;
use crate::api::{
    DrainPlanEntry, Evacuation, MAX_REASON_CHARS, NodeMaintenanceSpec, PodType, ReleaseTrigger, Stage,
    WaitForCompletion, first_out_of_order, parse_drain_timeout, scaled_count, shown,
};
use crate::field::{FieldError, FieldPath};
use crate::selector::{NodeMatcher, validate_label_selector, validate_node_selector};
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::{Borrow, Cow};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

const STAGES: &[&str] = &["Idle", "Cordon", "Drain", "Complete"];
const POD_TYPES: &[&str] = &["Default", "DaemonSet", "Static"];
const EVACUATIONS: &[&str] = &["Surge", "Annotated", "Evict"];

/// The spec as sent, enum fields kept as text.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SpecInput {
    node_selector: Option<NodeSelector>,
    stage: Option<String>,
    drain_plan: Option<Vec<EntryInput>>,
    max_unavailable: Option<IntOrString>,
    release_nodes_on: Option<ReleaseTrigger>,
    reason: Option<String>,
    drain_timeout: Option<String>,
    evacuation: Option<String>,
    paused: Option<bool>,
    wait_for_completion: Option<WaitForCompletion>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EntryInput {
    pod_priority: Option<i32>,
    pod_type: Option<String>,
    pod_selector: Option<LabelSelector>,
}

/// A spec that passed validation, with its node selector compiled.
#[derive(Clone, Debug)]
pub struct ParsedSpec {
    /// The typed spec.
    pub spec: NodeMaintenanceSpec,
    /// The compiled `spec.nodeSelector`.
    pub matcher: NodeMatcher,
}

/// Reads `object.spec` of a NodeMaintenance (the object's JSON text) and validates it (SPEC
/// 3.2).
///
/// Returns the typed spec with its compiled selector, or a [`Denial`]: 400 when `spec` is
/// missing or of the wrong JSON shape (wrong types, unknown fields), 422 listing every field
/// error (selector, drainPlan entries, order, duplicates, reason length, stage, a
/// `drainTimeout` or `waitForCompletion.timeout` that is not a Go duration greater than zero,
/// an invalid `waitForCompletion.podSelector`).
pub fn parse_spec(object: &RawValue, name: &str) -> Result<ParsedSpec, Denial> {
    parse_object_spec(&Object::new(object), name)
}

/// [`parse_spec`] of an object of a decoded request.
pub(super) fn parse_object_spec(object: &Object, name: &str) -> Result<ParsedSpec, Denial> {
    let input: SpecInput = read_spec(object, "NodeMaintenance")?;
    // Paths are made only to report an error: a valid spec formats none.
    let spec_path = || FieldPath::root("spec");
    let mut errs = Vec::new();

    let node_selector = match input.node_selector {
        Some(sel) => {
            errs.extend(validate_node_selector(&sel, &|| spec_path().child("nodeSelector")));
            sel
        }
        None => {
            errs.push(FieldError::required(&spec_path().child("nodeSelector"), "a NodeMaintenance must select nodes"));
            NodeSelector::default()
        }
    };

    let stage = match input.stage.as_deref() {
        None => Stage::default(),
        Some(s) => Stage::parse(s).unwrap_or_else(|| {
            errs.push(FieldError::not_supported(&spec_path().child("stage"), s, STAGES));
            Stage::default()
        }),
    };

    let plan_path = || spec_path().child("drainPlan");
    let mut plan = Vec::new();
    let mut plan_complete = true;
    // First index of each (podType, podPriority, podSelector): duplicates are found in linear
    // time, a plan may hold 100,000 entries within the body limit.
    let mut seen: HashMap<(PodType, i32, Option<String>), usize> = HashMap::new();
    for (i, e) in input.drain_plan.into_iter().flatten().enumerate() {
        match parse_entry(e, &|| plan_path().index(i), &mut errs) {
            Some(entry) => {
                // The selector's JSON is a faithful key: equal selectors serialize equally.
                let selector = entry.pod_selector.as_ref().map(|s| serde_json::to_string(s).unwrap_or_default());
                match seen.entry((entry.pod_type, entry.pod_priority, selector)) {
                    Entry::Occupied(first) => errs.push(FieldError::duplicate(
                        &plan_path().index(i),
                        format!("same podType, podPriority and podSelector as drainPlan[{}]", first.get()),
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(i);
                    }
                }
                plan.push(entry);
            }
            None => plan_complete = false,
        }
    }
    if plan_complete && let Some(i) = first_out_of_order(&plan) {
        errs.push(FieldError::invalid(
            &plan_path().index(i),
            format!("{}/{}", plan[i].pod_type, plan[i].pod_priority),
            "entries must be in canonical order: podType Default, DaemonSet, Static; podPriority ascending; \
             entries with a podSelector before the one without",
        ));
    }

    if let Some(value) = &input.max_unavailable
        && let Err(detail) = scaled_count(value, 0)
    {
        errs.push(FieldError::invalid(&spec_path().child("maxUnavailable"), shown(value), detail));
    }

    if input.reason.as_ref().is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        errs.push(FieldError::too_long(&spec_path().child("reason"), MAX_REASON_CHARS));
    }
    if let Some(text) = input.drain_timeout.as_deref()
        && let Err(e) = parse_drain_timeout(text)
    {
        errs.push(FieldError::invalid(&spec_path().child("drainTimeout"), text, e.to_string()));
    }
    if let Some(wait) = &input.wait_for_completion {
        let path = || spec_path().child("waitForCompletion");
        if let Some(sel) = &wait.pod_selector {
            errs.extend(validate_label_selector(sel, &|| path().child("podSelector")));
        }
        if let Some(text) = wait.timeout.as_deref()
            && let Err(e) = parse_drain_timeout(text)
        {
            errs.push(FieldError::invalid(&path().child("timeout"), text, e.to_string()));
        }
    }
    let evacuation = input.evacuation.as_deref().and_then(|text| {
        let parsed = Evacuation::parse(text);
        if parsed.is_none() {
            errs.push(FieldError::not_supported(&spec_path().child("evacuation"), text, EVACUATIONS));
        }
        parsed
    });

    let matcher = NodeMatcher::compile(&node_selector);
    match matcher {
        Some(matcher) if errs.is_empty() => Ok(ParsedSpec {
            spec: NodeMaintenanceSpec {
                node_selector,
                stage,
                drain_plan: plan,
                max_unavailable: input.max_unavailable,
                release_nodes_on: input.release_nodes_on,
                reason: input.reason,
                drain_timeout: input.drain_timeout,
                evacuation,
                paused: input.paused,
                wait_for_completion: input.wait_for_completion,
            },
            matcher,
        }),
        _ => Err(Denial::invalid(name, errs)),
    }
}

fn parse_entry(e: EntryInput, path: &dyn Fn() -> FieldPath, errs: &mut Vec<FieldError>) -> Option<DrainPlanEntry> {
    let before = errs.len();
    let pod_type = match e.pod_type.as_deref() {
        None => {
            errs.push(FieldError::required(&path().child("podType"), ""));
            None
        }
        Some(t) => PodType::parse(t).or_else(|| {
            errs.push(FieldError::not_supported(&path().child("podType"), t, POD_TYPES));
            None
        }),
    };
    if e.pod_priority.is_none() {
        errs.push(FieldError::required(&path().child("podPriority"), ""));
    }
    if let Some(sel) = &e.pod_selector {
        errs.extend(validate_label_selector(sel, &|| path().child("podSelector")));
    }
    (errs.len() == before).then(|| DrainPlanEntry {
        pod_priority: e.pod_priority.unwrap_or_default(),
        pod_type: pod_type.unwrap_or(PodType::Default),
        pod_selector: e.pod_selector,
    })
}

/// Reads `object.spec` into the lenient input shape `T` of a `kind`; 400 when it is missing
/// or of the wrong JSON shape (wrong types, unknown fields), naming the field.
pub(super) fn read_spec<T: for<'de> Deserialize<'de>>(object: &Object, kind: &str) -> Result<T, Denial> {
    let spec = object.member("spec").ok_or_else(|| Denial::bad_request("object has no spec"))?;
    // Straight from the text when it reads: the input shapes either refuse a repeated key
    // (serde's derive) or keep its last value (k8s-openapi's types, maps), so a text that
    // reads gives what its `Value` gives. Otherwise as a `Value` first, which is what the
    // apiserver stores (a repeated key keeps its last value), then into the lenient shape; the
    // path of a wrong field is tracked only to explain a failure.
    serde_json::from_str(spec).or_else(|_| read_value(spec, kind))
}

/// [`read_spec`] by way of a `Value`: the reading that defines the outcome.
fn read_value<T: for<'de> Deserialize<'de>>(spec: &str, kind: &str) -> Result<T, Denial> {
    let spec: Value = serde_json::from_str(spec).map_err(|e| Denial::bad_request(format!("spec: {e}")))?;
    T::deserialize(&spec).map_err(|_| match serde_path_to_error::deserialize::<_, T>(&spec) {
        Err(e) => Denial::bad_request(format!("spec.{}: {}", e.path(), e.inner())),
        Ok(_) => Denial::bad_request(format!("spec: not a valid {kind} spec")),
    })
}

/// The drainPlan entries of a spec (its `drainPlan` member, decoded), if every entry reads as
/// a valid entry; `None` when the plan is absent, not an array, or holds an entry that does
/// not (validation then reports it). Used by defaulting, which leaves invalid plans alone.
pub(super) fn read_plan(plan: Option<&Value>) -> Option<Vec<DrainPlanEntry>> {
    plan?.as_array()?.iter().map(|e| DrainPlanEntry::deserialize(e).ok()).collect()
}

/// A key of a JSON object, unescaped; borrowed from the text unless it holds escapes.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

impl Borrow<str> for Key<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// The members of a JSON object given as text (valid JSON), by unescaped key, the last one
/// when a key repeats; `None` when the text is not a JSON object.
pub(super) fn members(object: &str) -> Option<BTreeMap<Key<'_>, &RawValue>> {
    serde_json::from_str(object).ok()
}

/// Member `key` of an object kept as text, decoded (`Value::get(key).cloned()`). The text was
/// checked as a `Value` when the request was decoded, so decoding a member cannot fail.
pub(super) fn member(object: &Object, key: &str) -> Option<Value> {
    object.member(key).and_then(|m| serde_json::from_str(m).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> Box<RawValue> {
        raw(json!({"spec": v}))
    }

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    fn message(r: Result<ParsedSpec, Denial>) -> (u16, String) {
        let d = r.expect_err("denied");
        (d.code, d.message)
    }

    #[test]
    fn valid_spec_parses() {
        let v = spec(
            json!({"nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"pool","operator":"In","values":["gpu"]}]}]},"stage":"Drain"}),
        );
        let p = parse_spec(&v, "x").unwrap();
        assert_eq!(p.spec.stage, Stage::Drain);
        assert!(p.spec.drain_plan.is_empty());
    }

    #[test]
    fn every_error_is_reported_at_once_with_its_path() {
        let v = spec(json!({
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key":"metadata.name","operator":"In","values":["w"]}]}]},
            "stage": "Rebooting",
            "drainPlan": [
                {"podPriority": 1000, "podType": "Default"},
                {"podPriority": 1000, "podType": "Default"},
                {"podPriority": 2000, "podType": "Job"},
                {"podPriority": 500, "podType": "Default", "podSelector": {"matchExpressions":[{"key":"app","operator":"Equals","values":["x"]}]}}
            ],
            "reason": "x".repeat(1025)
        }));
        let (code, msg) = message(parse_spec(&v, "bad-plan"));
        assert_eq!(code, 422);
        for want in [
            "NodeMaintenance.nodemaintenance.k8s.io \"bad-plan\" is invalid: [",
            "spec.stage: Unsupported value: \"Rebooting\"",
            "spec.drainPlan[1]: Duplicate value: same podType, podPriority and podSelector as drainPlan[0]",
            "spec.drainPlan[2].podType: Unsupported value: \"Job\"",
            "spec.drainPlan[3].podSelector.matchExpressions[0].operator: Unsupported value: \"Equals\"",
            "spec.reason: Too long",
        ] {
            assert!(msg.contains(want), "missing {want:?} in {msg}");
        }
    }

    #[test]
    fn evacuation_is_one_of_three_values() {
        let with = |e: &str| {
            spec(
                json!({"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w"]}]}]}, "evacuation": e}),
            )
        };
        assert_eq!(parse_spec(&with("Surge"), "x").unwrap().spec.evacuation, Some(Evacuation::Surge));
        let (code, msg) = message(parse_spec(&with("surge"), "x"));
        assert_eq!(code, 422);
        assert!(msg.contains("spec.evacuation: Unsupported value: \"surge\""), "{msg}");
    }

    #[test]
    fn drain_timeout_is_a_go_duration_greater_than_zero() {
        let with = |t: Value| {
            spec(
                json!({"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w"]}]}]}, "drainTimeout": t}),
            )
        };
        assert_eq!(parse_spec(&with(json!("1h30m")), "x").unwrap().spec.drain_timeout.as_deref(), Some("1h30m"));
        for (text, detail) in [
            ("30M", "not a duration such as 30m"),
            ("-5m", "not a duration such as 30m"),
            ("0s", "must be greater than zero"),
        ] {
            let (code, msg) = message(parse_spec(&with(json!(text)), "x"));
            assert_eq!(code, 422);
            let want = format!("spec.drainTimeout: Invalid value: {text:?}: {detail}");
            assert!(msg.contains(&want), "{want} in {msg}");
        }
        let (code, msg) = message(parse_spec(&with(json!(1800)), "x"));
        assert_eq!(code, 400, "a number is the wrong JSON type");
        assert!(msg.contains("spec.drainTimeout"), "{msg}");
    }

    #[test]
    fn out_of_order_plan_is_invalid() {
        let v = spec(
            json!({"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["w"]}]}]},
            "drainPlan":[{"podPriority":3000,"podType":"DaemonSet"},{"podPriority":5000,"podType":"Default"}]}),
        );
        let (code, msg) = message(parse_spec(&v, "x"));
        assert_eq!(code, 422);
        assert!(
            msg.contains("spec.drainPlan[1]: Invalid value: \"Default/5000\": entries must be in canonical order"),
            "{msg}"
        );
    }

    #[test]
    fn missing_selector_is_required_and_wrong_types_are_bad_requests() {
        let (code, msg) = message(parse_spec(&spec(json!({})), "x"));
        assert_eq!(code, 422);
        assert!(msg.contains("spec.nodeSelector: Required value"));
        let (code, msg) = message(parse_spec(
            &spec(json!({"nodeSelector": {"nodeSelectorTerms": []}, "drainPlan": [{"podPriority": "high"}]})),
            "x",
        ));
        assert_eq!(code, 400);
        assert!(msg.contains("spec.drainPlan[0].podPriority"), "{msg}");
        let (code, msg) =
            message(parse_spec(&spec(json!({"nodeSelector": {"nodeSelectorTerms": []}, "drainplan": []})), "x"));
        assert_eq!(code, 400);
        assert!(msg.contains("unknown field `drainplan`"), "{msg}");
        assert_eq!(message(parse_spec(&raw(json!({})), "x")).0, 400);
    }
}

#[cfg(test)]
mod member_tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn members_read_like_value_get() {
        let texts = [
            r#"{"metadata":{"name":"x","managedFields":[{"a":1}]},"spec":{"stage":"Idle"}}"#,
            r#"{"spec":1,"spec":{"stage":"Drain"}}"#,
            r#"{"sp\u0065c":{"a":"\"}"}}"#,
            r#"{"spec":null}"#,
            r#"{}"#,
            r#"[{"spec":1}]"#,
            r#""spec""#,
            r#"null"#,
        ];
        for t in texts {
            let v: Value = serde_json::from_str(t).unwrap();
            let r = raw(t);
            let o = Object::new(&r);
            assert_eq!(member(&o, "spec"), v.get("spec").cloned(), "{t}");
            assert_eq!(o.is_object(), v.is_object(), "{t}");
        }
        assert_eq!(Object::new(&raw(texts[0])).member("spec"), Some(r#"{"stage":"Idle"}"#));
    }

    #[test]
    fn a_spec_read_straight_from_the_text_is_what_its_value_gives() {
        let selector = r#"{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"In","values":["x"]}]}]}"#;
        let texts = [
            format!(r#"{{"nodeSelector":{selector},"stage":"Drain"}}"#),
            format!(r#"{{"nodeSelector":{selector},"stage":"Idle","stage":"Drain"}}"#),
            r#"{"nodeSelector":{"nodeSelectorTerms":[],"nodeSelectorTerms":[{"matchFields":[]}]}}"#.into(),
            r#"{"nodeSelector":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","key":"b","operator":"Exists"}]}]}}"#.into(),
            r#"{"drainPlan":[{"podPriority":1,"podType":"Default","podSelector":{"matchLabels":{"a":"1","a":"2"}}}]}"#.into(),
            r#"{"drainPlan":[{"podPriority":1.0,"podType":"Default"}]}"#.into(),
            r#"{"maxUnavailable":2,"maxUnavailable":"25%","reason":"ré"}"#.into(),
            r#"{"drainTimeout":null,"evacuation":"Surge","releaseNodesOn":"Reboot"}"#.into(),
        ];
        let mut straight = 0;
        for t in &texts {
            let by_value = read_value::<SpecInput>(t, "NodeMaintenance").ok();
            if let Ok(direct) = serde_json::from_str::<SpecInput>(t) {
                straight += 1;
                assert_eq!(Some(direct), by_value, "{t}");
            }
            assert_eq!(
                read_spec::<SpecInput>(&Object::new(&raw(&format!(r#"{{"spec":{t}}}"#))), "NodeMaintenance").ok(),
                by_value,
                "{t}"
            );
        }
        assert!(straight >= 4, "the common shapes read straight from the text: {straight}");
    }
}
