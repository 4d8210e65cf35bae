//! The whole decision over one snapshot, without a network.
use super::fixtures::{budget, maintenance, node, t};
use super::*;
use crate::api::FINALIZER;

/// `nm` with the finalizer, as the cache holds it.
fn live(nm: Arc<NodeMaintenance>) -> Arc<NodeMaintenance> {
    let mut nm = (*nm).clone();
    nm.metadata.finalizers = Some(vec![FINALIZER.into()]);
    Arc::new(nm)
}

fn snapshot<'a>(
    nodes: &'a [Arc<k8s_openapi::api::core::v1::Node>],
    maintenances: &'a [Arc<NodeMaintenance>],
    budgets: &'a [Arc<NodeDisruptionBudget>],
    alerts: &'a AlertsView,
) -> Snapshot<'a> {
    Snapshot {
        nodes: Nodes::for_selectors(nodes, maintenances, budgets),
        maintenances,
        budgets,
        alerts,
        busy_requeue: Duration::from_secs(2),
        idle_requeue: Duration::from_secs(300),
        now: t("2026-11-26T12:00:00Z"),
    }
}

#[test]
fn one_snapshot_gives_a_budget_of_one_to_one_maintenance_and_tells_the_other_why_it_waits() {
    let nodes = [node("a", None, vec![]), node("b", None, vec![])];
    let maintenances = [live(maintenance("m1", "Cordon", &["a"])), live(maintenance("m2", "Cordon", &["b"]))];
    let budgets = [budget("one")];
    let alerts = AlertsView::Firing(Vec::new());
    let s = snapshot(&nodes, &maintenances, &budgets, &alerts);
    let scopes = scopes(&s, |_| true);
    assert!(scopes.gated.is_empty(), "nothing drains: the eviction gates are not read");
    let d = decide(&s, scopes, BTreeMap::new(), true);
    let holds: Vec<(String, String)> = d
        .maintenances
        .iter()
        .flat_map(|(m, d)| d.holds.iter().map(move |h| (m.name_any(), h.node.name_any())))
        .collect();
    assert_eq!(holds, [("m1".to_owned(), "a".to_owned())], "the budget's one place, given once");
    let waiting = d.maintenances[1].1.status.as_ref().unwrap();
    let b = &waiting.node_statuses[0];
    assert_eq!((b.node_ref.name.as_str(), b.phase), ("b", Some(crate::api::NodePhase::Waiting)));
    let cluster = d.cluster.expect("the cluster-wide decision was asked for");
    assert_eq!(cluster.budget_gauges["one"].waiting, 1);
    assert_eq!(cluster.budget_statuses.len(), 1, "the budget's first status");
    assert_eq!(d.now, t("2026-11-26T12:00:00Z"));
}

#[test]
fn only_the_maintenances_due_are_decided_and_the_cluster_only_when_asked() {
    let nodes = [node("a", None, vec![]), node("b", None, vec![])];
    let maintenances = [live(maintenance("m1", "Cordon", &["a"])), live(maintenance("m2", "Cordon", &["b"]))];
    let alerts = AlertsView::Firing(Vec::new());
    let s = snapshot(&nodes, &maintenances, &[], &alerts);
    let d = decide(&s, scopes(&s, |m| m == "m2"), BTreeMap::new(), false);
    let decided: Vec<String> = d.maintenances.iter().map(|(m, _)| m.name_any()).collect();
    assert_eq!(decided, ["m2"]);
    assert_eq!(d.maintenances[0].1.nodes().map(|n| n.name_any()).collect::<Vec<_>>(), ["b"]);
    assert!(d.cluster.is_none());
}
