use super::*;
use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use std::sync::Arc;

fn node(name: &str, unschedulable: bool) -> Arc<Node> {
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"pool": "a"}},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap(),
    )
}

fn view(budget_max: Option<i32>) -> StaticView {
    let mut v = StaticView::new((1..=4).map(|i| node(&format!("n{i}"), i == 4)).collect(), vec![]);
    if let Some(max) = budget_max {
        v.budgets = vec![Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
                "metadata": {"name": "pool-a"},
                "spec": {"maxUnavailable": max, "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "pool", "operator": "In", "values": ["a"]}]}]}}
            }))
            .unwrap(),
        )];
    }
    v
}

fn names() -> Vec<String> {
    (1..=4).map(|i| format!("n{i}")).collect()
}

#[test]
fn a_rolling_maintenance_shows_its_waves_and_why_the_others_wait() {
    let selected = names();
    let one = IntOrString::Int(1);
    let reviewed = Rolled {
        name: "m",
        created: None,
        selected: &selected,
        max_unavailable: Some(&one),
        stored: None,
        paused: false,
    };
    let p = roll_preview(&reviewed, &view(None)).expect("rolling");
    assert_eq!(p.nodes_at_once, Some(1));
    assert_eq!(p.waves, [vec!["n4"], vec!["n1"], vec!["n2"], vec!["n3"]], "the cordoned node first");
    assert_eq!(p.waiting_now["Waiting for a place (1 of 1 nodes held)."], ["n1", "n2", "n3"]);
    let text = render_text(&p);
    assert!(text.starts_with("Roll preview (spec.maxUnavailable: 1 at a time):\n  wave 1: n4\n"), "{text}");
}

#[test]
fn a_group_maintenance_is_previewed_only_under_a_budget() {
    let selected = names();
    let group =
        Rolled { name: "m", created: None, selected: &selected, max_unavailable: None, stored: None, paused: false };
    assert_eq!(roll_preview(&group, &view(None)), None, "nothing limits it");
    // n4 is cordoned already: the budget of two has one place left.
    let p = roll_preview(&group, &view(Some(2))).expect("under a budget");
    assert_eq!(p.budgets, ["pool-a"]);
    assert_eq!(p.waves, [vec!["n1", "n4"], vec!["n2"], vec!["n3"]]);
    assert_eq!(p.waiting_now["Waiting for NodeDisruptionBudget pool-a (2 of 2 unavailable)."], ["n2", "n3"]);
    assert!(render_text(&p).contains("waiting now (n2, n3): Waiting for NodeDisruptionBudget pool-a"));
}

#[test]
fn the_preview_says_when_the_window_opens_and_that_alerts_are_not_read() {
    let mut v = view(Some(2));
    // A window of one minute a year: closed whenever this test runs (but for that minute).
    v.budgets = vec![Arc::new(
        serde_json::from_value(json!({
            "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
            "metadata": {"name": "new-year"},
            "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "pool", "operator": "In", "values": ["a"]}]}]},
                     "maintenanceWindows": [{"schedule": "0 0 1 1 *", "duration": "1m"}],
                     "healthGate": {"alerts": {"matchers": ["{severity=\"critical\"}"]}}}
        }))
        .unwrap(),
    )];
    let selected = names();
    let group =
        Rolled { name: "m", created: None, selected: &selected, max_unavailable: None, stored: None, paused: false };
    let p = roll_preview(&group, &v).expect("under a budget");
    let window = &p.windows["new-year"];
    assert!(!window.open && window.closes_at.is_none(), "{window:?}");
    let opens = window.next_opens_at.as_ref().expect("a next opening").0.to_string();
    assert!(opens.ends_with("-01-01T00:00:00Z"), "{opens}");
    assert_eq!(p.alerts_not_evaluated, ["new-year"]);
    assert!(p.waves.is_empty(), "nothing starts while the window is closed: {p:?}");
    let (why, waiting) = p.waiting_now.iter().next().expect("the nodes wait");
    assert!(why.starts_with("Waiting for the maintenance window of NodeDisruptionBudget new-year (opens "), "{why}");
    assert_eq!(waiting, &["n1", "n2", "n3", "n4"], "n4 too, though someone else cordoned it");
    let text = render_text(&p);
    assert!(text.contains(&format!("\n  maintenance window of new-year: closed, next opens {opens}\n")), "{text}");
    assert!(
        text.contains("\n  alert gates not evaluated (review reads no Prometheus; taken as open): new-year\n"),
        "{text}"
    );
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["windows"]["new-year"], json!({"open": false, "nextOpensAt": opens}));
    assert_eq!(json["alertsNotEvaluated"], json!(["new-year"]));
}
