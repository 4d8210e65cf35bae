use super::*;
use serde_json::json;

fn maintenance(paused: bool) -> NodeMaintenance {
    let conditions = if paused {
        json!([{"type": "Paused", "status": "True", "reason": "Paused", "message": "spec.paused is true",
                "lastTransitionTime": "2026-11-26T10:00:00Z"}])
    } else {
        json!([])
    };
    serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": "m"},
        "spec": {"stage": "Drain", "paused": paused, "nodeSelector": {"nodeSelectorTerms": []}},
        "status": {
            "conditions": conditions,
            "nodeStatuses": [
                {"nodeRef": {"name": "w1"}, "phase": "Waiting",
                 "drainMessage": "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2026-11-28T22:00:00+01:00)."},
                {"nodeRef": {"name": "w2"}, "phase": "Draining", "drainMessage": "Evicting.",
                 "podsPendingEvictionRequest": 2}
            ]
        }
    }))
    .unwrap()
}

#[test]
fn a_waiting_node_shows_why_and_a_draining_one_its_counts() {
    let lines = node_lines(&maintenance(false));
    assert_eq!(
        lines["w1"],
        "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2026-11-28T22:00:00+01:00). [Waiting]"
    );
    assert_eq!(lines["w2"], "pending 2; evicting 0; targets none; Evicting. [Draining]");
}

#[test]
fn a_paused_maintenance_says_so_next_to_its_stage() {
    assert!(summary_line(&maintenance(true)).starts_with("m: stage Drain, paused (spec.paused); Drained=Unknown"));
    assert!(summary_line(&maintenance(false)).starts_with("m: stage Drain; Drained=Unknown"));
}
