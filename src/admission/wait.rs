//! Warnings about a NodeMaintenance's `spec.waitForCompletion` (SPEC 4.6): pods left to
//! finish keep the drain going while `drainTimeout` counts, so a wait that may outlast the
//! deadline makes the maintenance report a timeout while it is only waiting.

use crate::api::{NodeMaintenanceSpec, parse_drain_timeout};

/// The warning when the wait may outlast `drainTimeout`: its timeout is not below it, or it
/// has none while a `drainTimeout` is set. Nothing without both fields set, nor when either
/// does not parse (validation reports that). One sentence of at most 120 characters.
pub fn wait_warnings(spec: &NodeMaintenanceSpec) -> Vec<String> {
    let (Some(wait), Some(drain_text)) = (&spec.wait_for_completion, spec.drain_timeout.as_deref()) else {
        return Vec::new();
    };
    let Ok(drain) = parse_drain_timeout(drain_text) else { return Vec::new() };
    let warning = match wait.timeout.as_deref().map(parse_drain_timeout) {
        None => Some(format!(
            "waitForCompletion has no timeout: the drain may pass drainTimeout {} while pods still run",
            shorten(drain_text)
        )),
        Some(Ok(wait_for)) if wait_for >= drain => Some(format!(
            "waitForCompletion.timeout {} is not below drainTimeout {}: the drain may time out while pods run",
            shorten(wait.timeout.as_deref().unwrap_or_default()),
            shorten(drain_text)
        )),
        _ => None,
    };
    warning.into_iter().collect()
}

/// A duration as written, cut so that the warning stays within 120 characters.
fn shorten(text: &str) -> &str {
    text.char_indices().nth(12).map_or(text, |(i, _)| &text[..i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::parse_spec;
    use serde_json::{Value, json};

    fn spec(wait: Value, drain_timeout: Option<&str>) -> Value {
        let mut spec = json!({
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w"]}]}]},
            "waitForCompletion": wait,
        });
        if let Some(t) = drain_timeout {
            spec["drainTimeout"] = json!(t);
        }
        json!({ "spec": spec })
    }

    fn parsed(v: &Value) -> Result<NodeMaintenanceSpec, String> {
        let raw = serde_json::value::to_raw_value(v).unwrap();
        parse_spec(&raw, "m").map(|p| p.spec).map_err(|d| d.causes.iter().map(ToString::to_string).collect())
    }

    #[test]
    fn the_wait_timeout_and_pod_selector_are_validated() {
        let ok = parsed(&spec(json!({"timeout": "30m", "podSelector": {"matchLabels": {"app": "batch"}}}), None));
        assert_eq!(ok.unwrap().wait_for_completion.unwrap().timeout.as_deref(), Some("30m"));
        assert!(parsed(&spec(json!({}), None)).is_ok(), "unset selector and timeout: Job pods, no limit");
        for (timeout, detail) in [("0s", "must be greater than zero"), ("2d", "not a duration such as 30m")] {
            let err = parsed(&spec(json!({ "timeout": timeout }), None)).unwrap_err();
            let want = format!("spec.waitForCompletion.timeout: Invalid value: {timeout:?}: {detail}");
            assert!(err.starts_with(&want), "{err}");
        }
        let bad = json!({"podSelector": {"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]}});
        let err = parsed(&spec(bad, None)).unwrap_err();
        assert!(
            err.starts_with("spec.waitForCompletion.podSelector.matchExpressions[0].operator: Unsupported value"),
            "{err}"
        );
    }

    #[test]
    fn a_wait_that_may_outlast_the_drain_timeout_is_warned_about() {
        let warn = |wait: Value, drain: Option<&str>| wait_warnings(&parsed(&spec(wait, drain)).unwrap());
        assert!(warn(json!({"timeout": "30m"}), Some("1h")).is_empty());
        assert!(warn(json!({"timeout": "2h"}), None).is_empty(), "no drain deadline");
        assert_eq!(
            warn(json!({"timeout": "1h"}), Some("60m")),
            ["waitForCompletion.timeout 1h is not below drainTimeout 60m: the drain may time out while pods run"]
        );
        assert_eq!(
            warn(json!({}), Some("1h")),
            ["waitForCompletion has no timeout: the drain may pass drainTimeout 1h while pods still run"]
        );
        let long = warn(json!({"timeout": "1h0m0s0ms0us0ns"}), Some("59m59s999ms999us"));
        assert!(long.len() == 1 && long[0].len() <= 120, "{long:?}");
    }
}
