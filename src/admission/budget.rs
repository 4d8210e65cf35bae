//! The validating endpoint for NodeDisruptionBudget: `/validate-budget`.

use super::gates::Gates;
use super::object::{member, read_spec};
use super::review::Request;
use super::{Decision, Denial, expect_kind};
use crate::api::{Blackout, GROUP, HealthGate, MaintenanceWindow, PauseRequest, scaled_count, shown};
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
    #[serde(default)]
    maintenance_windows: Vec<MaintenanceWindow>,
    #[serde(default)]
    blackouts: Vec<Blackout>,
    #[serde(default)]
    pause_requests: Vec<PauseRequest>,
    health_gate: Option<HealthGate>,
}

/// The warning for a budget that can never hold anything back.
const LIMITS_NOTHING: &str = "this budget sets neither maxUnavailable, minAvailable nor any gate: it limits nothing";

/// Validates a NodeDisruptionBudget CREATE or UPDATE (DELETE and other operations are
/// allowed: a budget only restrains). Refused with 400 for an object that cannot be read
/// (wrong types, unknown fields) and 422 listing every field error: `spec.nodeSelector`
/// missing or invalid (the NodeMaintenance rules, SPEC 3.2), both `maxUnavailable` and
/// `minAvailable`, a count that is 0, negative, over 100% or not a percentage, and the gates
/// (SPEC 4.6): a window whose schedule, duration or zone does not parse, a blackout that does
/// not end after it starts, a pause request without a name, with a repeated one, or with one
/// that is not a DNS-1123 subdomain (unless already stored: on UPDATE such a name is kept, as
/// the schema's rule ratchets), a `maxUnhealthy` out of range, an alert gate without matchers
/// or with a selector that does not parse or that Prometheus refuses (every matcher matching
/// the empty string, in `matchers` or `ignore`), and lists or strings over their bounds. A
/// budget with neither a count nor a gate is allowed with a warning that it limits nothing.
pub fn validate_budget(req: &Request<'_>) -> Decision {
    if let Err(d) = expect_kind(req, GROUP, "NodeDisruptionBudget") {
        return Decision::deny(d);
    }
    if !matches!(req.operation, Operation::Create | Operation::Update) || req.sub_resource.is_some() {
        return Decision::allow();
    }
    let Some(object) = req.object.as_ref().filter(|o| o.is_object()) else {
        return Decision::deny(Denial::bad_request("request has no object"));
    };
    let input: BudgetInput = match read_spec(object, "NodeDisruptionBudget") {
        Ok(i) => i,
        Err(d) => return Decision::deny(d),
    };
    let spec = FieldPath::root("spec");
    let mut errs = Vec::new();
    match &input.node_selector {
        Some(sel) => errs.extend(validate_node_selector(sel, &|| spec.child("nodeSelector"))),
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
    if input.max_unavailable.is_some() && input.min_available.is_some() {
        errs.push(FieldError::forbidden(&spec.child("minAvailable"), "at most one of maxUnavailable and minAvailable"));
    }
    let stored_pause_names = stored_pause_names(req);
    let gates = Gates {
        windows: &input.maintenance_windows,
        blackouts: &input.blackouts,
        pause_requests: &input.pause_requests,
        stored_pause_names: &stored_pause_names,
        health_gate: input.health_gate.as_ref(),
    };
    errs.extend(gates.validate(&spec));
    let countless = input.max_unavailable.is_none() && input.min_available.is_none();
    if errs.is_empty() && countless && !gates.any() {
        Decision::allow_with_warnings(vec![LIMITS_NOTHING.to_owned()])
    } else if errs.is_empty() {
        Decision::allow()
    } else {
        Decision::deny(Denial::invalid_object("NodeDisruptionBudget", &req.name, errs))
    }
}

/// The names of the pause requests of the stored object (`oldObject`, on UPDATE); none when
/// there is none or it does not read. Only these keep a name stored before names had to be
/// DNS-1123 subdomains.
fn stored_pause_names(req: &Request<'_>) -> Vec<String> {
    let Some(spec) = req.old_object.as_ref().and_then(|o| member(o, "spec")) else {
        return Vec::new();
    };
    let pauses = spec.get("pauseRequests").and_then(serde_json::Value::as_array);
    pauses.into_iter().flatten().filter_map(|p| p.get("name")?.as_str().map(str::to_owned)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(spec: serde_json::Value) -> Request<'static> {
        review_of(spec, None)
    }

    /// A CREATE of a budget with `spec`, or with `old` an UPDATE of one stored with `old`
    /// (its body leaked: a request borrows from its body).
    fn review_of(spec: serde_json::Value, old: Option<serde_json::Value>) -> Request<'static> {
        let object = |spec| {
            json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
                   "metadata": {"name": "general"}, "spec": spec})
        };
        let mut body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u", "name": "general", "operation": "CREATE", "userInfo": {"username": "admin"},
                "kind": {"group": GROUP, "version": "v1alpha1", "kind": "NodeDisruptionBudget"},
                "resource": {"group": GROUP, "version": "v1alpha1", "resource": "nodedisruptionbudgets"},
                "object": object(spec),
            }
        });
        if let Some(old) = old {
            body["request"]["operation"] = json!("UPDATE");
            body["request"]["oldObject"] = object(old);
        }
        let bytes = serde_json::to_vec(&body).unwrap().leak();
        super::super::review::decode(bytes).unwrap().request
    }

    fn selector() -> serde_json::Value {
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["general"]}]}]})
    }

    fn causes(spec: serde_json::Value) -> Vec<String> {
        let d = validate_budget(&review(spec));
        d.denial.map(|d| d.causes.iter().map(ToString::to_string).collect()).unwrap_or_default()
    }

    #[test]
    fn a_budget_needs_a_selector_and_at_most_one_valid_count() {
        assert!(validate_budget(&review(json!({"nodeSelector": selector(), "maxUnavailable": 1}))).allowed);
        assert!(validate_budget(&review(json!({"nodeSelector": selector(), "minAvailable": "50%"}))).allowed);
        let both = causes(json!({"nodeSelector": selector(), "maxUnavailable": 1, "minAvailable": 1}));
        assert_eq!(both.len(), 1);
        assert!(both[0].starts_with("spec.minAvailable: Forbidden"), "{both:?}");
        let neither = validate_budget(&review(json!({"nodeSelector": selector()})));
        assert!(neither.allowed, "{neither:?}");
        assert_eq!(neither.warnings, [LIMITS_NOTHING]);
        assert!(LIMITS_NOTHING.len() <= 120);
        let paused = validate_budget(&review(json!({"nodeSelector": selector(), "pauseRequests": [{"name": "ops"}]})));
        assert!(paused.allowed && paused.warnings.is_empty(), "a gate without a count: {paused:?}");
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

    fn with(gates: serde_json::Value) -> serde_json::Value {
        let mut spec = json!({"nodeSelector": selector(), "maxUnavailable": 1});
        spec.as_object_mut().unwrap().extend(gates.as_object().unwrap().clone());
        spec
    }

    #[test]
    fn valid_gates_are_admitted() {
        let spec = with(json!({
            "maintenanceWindows": [{"schedule": "0 22 * * SAT", "duration": "10h", "timeZone": "Europe/Berlin"},
                                   {"schedule": "0 2 * * *", "duration": "90m"}],
            "blackouts": [{"start": "2026-12-20T00:00:00Z", "end": "2027-01-04T00:00:00Z", "reason": "year-end freeze"}],
            "pauseRequests": [{"name": "ops", "reason": "kernel regression"}, {"name": "team-b"}],
            "healthGate": {"maxUnhealthy": "10%", "alerts": {"matchers": ["{severity=\"critical\"}"],
                                                             "ignore": ["{alertname=~\"Watchdog|InfoInhibitor\"}"]}},
        }));
        let d = validate_budget(&review(spec));
        assert!(d.allowed && d.warnings.is_empty(), "{d:?}");
    }

    #[test]
    fn bad_gates_are_refused_with_their_field_paths() {
        let c = causes(with(json!({
            "maintenanceWindows": [{"schedule": "0 22 * * SAT", "duration": "10h"},
                                   {"schedule": "0 0 L * *", "duration": "0s", "timeZone": "Mars/Olympus"},
                                   {"schedule": "0 0 * *", "duration": "8 hours"}],
            "blackouts": [{"start": "2026-12-20T00:00:00Z", "end": "2026-12-20T00:00:00Z"},
                          {"start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z", "reason": "x".repeat(257)}],
            "pauseRequests": [{"name": "ops"}, {"name": ""}, {"name": "ops"}, {"name": "n".repeat(254)}],
            "healthGate": {"maxUnhealthy": "101%", "alerts": {"matchers": ["{a=\"1\"}", "{a=\"1\"}", "{a=1}"],
                                                              "ignore": ["{b=~\"(\"}"]}},
        })));
        let want = [
            "spec.maintenanceWindows[1].schedule: Invalid value: \"0 0 L * *\": \"L\" is not supported",
            "spec.maintenanceWindows[1].duration: Invalid value: \"0s\": must be greater than zero",
            "spec.maintenanceWindows[1].timeZone: Invalid value: \"Mars/Olympus\": unknown IANA time zone",
            "spec.maintenanceWindows[2].schedule: Invalid value: \"0 0 * *\": must have 5 fields",
            "spec.maintenanceWindows[2].duration: Invalid value: \"8 hours\": not a duration",
            "spec.blackouts[0].end: Invalid value: \"2026-12-20T00:00:00Z\": must be after start",
            "spec.blackouts[1].reason: Too long: may not be more than 256 characters",
            "spec.pauseRequests[1].name: Required value",
            "spec.pauseRequests[2].name: Duplicate value: \"ops\", as pauseRequests[0]",
            "spec.pauseRequests[3].name: Too long: may not be more than 253 characters",
            "spec.healthGate.maxUnhealthy: Invalid value: \"101%\"",
            "spec.healthGate.alerts.matchers[2]: Invalid value: \"{a=1}\": at character 4: expected a double-quoted value",
            "spec.healthGate.alerts.ignore[0]: Invalid value: \"{b=~\\\"(\\\"}\": at character 5: invalid regular expression",
        ];
        assert_eq!(c.len(), want.len(), "{c:#?}");
        for (got, want) in c.iter().zip(want) {
            assert!(got.starts_with(want), "{got}\n  does not start with\n{want}");
        }
        let d = validate_budget(&review(with(json!({"healthGate": {"maxUnhealthy": -1}}))));
        assert_eq!(d.denial.map(|d| d.code), Some(422));
        let empty = causes(with(json!({"healthGate": {"alerts": {"matchers": []}}})));
        assert_eq!(empty.len(), 1);
        assert!(empty[0].starts_with("spec.healthGate.alerts.matchers: Required value: at least one"), "{empty:?}");
    }

    #[test]
    fn selectors_prometheus_refuses_are_refused_with_their_field_paths() {
        let c = causes(with(json!({"healthGate": {"alerts": {
            "matchers": ["{severity=\"critical\"}", "{severity!=\"info\"}", "{team=\"\"}"],
            "ignore": ["{alertname=~\".*\"}", "{alertname=\"Watchdog\"}", "{a!~\"x\"}"],
        }}})));
        let why = "every matcher matches the empty string, so this selects every alert: a selector must contain \
                   at least one matcher that does not match the empty string (as Prometheus requires), such as \
                   severity=\"critical\"";
        assert_eq!(
            c,
            [
                format!(r#"spec.healthGate.alerts.matchers[1]: Invalid value: "{{severity!=\"info\"}}": {why}"#),
                format!(r#"spec.healthGate.alerts.matchers[2]: Invalid value: "{{team=\"\"}}": {why}"#),
                format!(r#"spec.healthGate.alerts.ignore[0]: Invalid value: "{{alertname=~\".*\"}}": {why}"#),
                format!(r#"spec.healthGate.alerts.ignore[2]: Invalid value: "{{a!~\"x\"}}": {why}"#),
            ]
        );
        // One matcher that needs a value is enough; regular expressions are Prometheus' RE2.
        let ok = with(json!({"healthGate": {"alerts": {
            "matchers": ["{severity!=\"info\",team=~\"db|storage\"}"], "ignore": ["{alertname!=\"\"}"]}}}));
        assert!(validate_budget(&review(ok)).allowed);
        let bad_regex = causes(with(json!({"healthGate": {"alerts": {"matchers": ["{a=~\"x)|(.*\"}"]}}})));
        assert_eq!(
            bad_regex,
            [
                r#"spec.healthGate.alerts.matchers[0]: Invalid value: "{a=~\"x)|(.*\"}": at character 5: invalid regular expression: unexpected )"#
            ]
        );
    }

    #[test]
    fn pause_request_names_are_dns_1123_subdomains() {
        let pauses = |names: &[&str]| {
            with(json!({"pauseRequests": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}))
        };
        let ok = ["oncall", "nhc.medik8s.io", "team-b", "0", &"a".repeat(253)];
        assert!(validate_budget(&review(pauses(&ok))).allowed);
        let c = causes(pauses(&["ops", "Ops Team", "a_b", "-x", "x.", "a..b", "Team"]));
        let why = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
                   must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation \
                   is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let want: Vec<String> = [(1, "Ops Team"), (2, "a_b"), (3, "-x"), (4, "x."), (5, "a..b"), (6, "Team")]
            .iter()
            .map(|(i, name)| format!("spec.pauseRequests[{i}].name: Invalid value: {name:?}: {why}"))
            .collect();
        assert_eq!(c, want);
        assert_eq!(
            c[0],
            "spec.pauseRequests[1].name: Invalid value: \"Ops Team\": a lowercase RFC 1123 subdomain must consist of \
             lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
             (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        // A name stored before the rule stays while another party applies its own entry (as the
        // schema's rule ratchets); a new one is refused, on UPDATE too.
        let stored = pauses(&["Ops Team"]);
        let d = validate_budget(&review_of(pauses(&["Ops Team", "oncall"]), Some(stored.clone())));
        assert!(d.allowed, "{d:?}");
        let d = validate_budget(&review_of(pauses(&["Ops Team", "Team B"]), Some(stored)));
        let c: Vec<String> = d.denial.map(|d| d.causes.iter().map(ToString::to_string).collect()).unwrap_or_default();
        assert_eq!(c, [format!("spec.pauseRequests[1].name: Invalid value: \"Team B\": {why}")]);
    }

    #[test]
    fn gate_lists_and_strings_are_bounded() {
        let window = json!({"schedule": "0 22 * * *", "duration": "1h"});
        let c = causes(with(json!({
            "maintenanceWindows": vec![window; 17],
            "blackouts": vec![json!({"start": "2026-12-20T00:00:00Z", "end": "2026-12-21T00:00:00Z"}); 33],
            "pauseRequests": (0..33).map(|i| json!({"name": format!("p{i}")})).collect::<Vec<_>>(),
            "healthGate": {"alerts": {"matchers": vec!["{a=\"1\"}"; 17], "ignore": ["{a=\"".to_owned() + &"x".repeat(1024) + "\"}"]}},
        })));
        assert_eq!(
            c,
            [
                "spec.maintenanceWindows: Too many: 17: must have at most 16 items",
                "spec.blackouts: Too many: 33: must have at most 32 items",
                "spec.pauseRequests: Too many: 33: must have at most 32 items",
                "spec.healthGate.alerts.matchers: Too many: 17: must have at most 16 items",
                "spec.healthGate.alerts.ignore[0]: Too long: may not be more than 1024 characters",
            ]
        );
        let long = causes(with(json!({"maintenanceWindows": [{"schedule": "0 ".repeat(65), "duration": "1h"}]})));
        assert_eq!(long, ["spec.maintenanceWindows[0].schedule: Too long: may not be more than 128 characters"]);
    }
}
