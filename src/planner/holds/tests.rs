use super::*;
use crate::api::GateReason;
use crate::gates::GateClosure;

fn node(name: &str, holders: &[&str]) -> NodeView<'static> {
    NodeView {
        name: name.to_owned().into(),
        ready: true,
        unschedulable: !holders.is_empty(),
        holders: Cow::Owned(holders.iter().map(|h| h.to_string()).collect()),
    }
}

fn pool(n: usize) -> Vec<NodeView<'static>> {
    (1..=n).map(|i| node(&format!("n{i}"), &[])).collect()
}

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("n{i}")).collect()
}

fn rolling(name: &str, created: i64, max: i32) -> HoldRequest {
    HoldRequest {
        name: name.into(),
        created,
        selected: names(4),
        max_unavailable: Some(IntOrString::Int(max)),
        ..Default::default()
    }
}

fn budget(name: &str, max: Option<i32>, min: Option<&str>) -> BudgetView {
    BudgetView {
        name: name.into(),
        nodes: names(4),
        max_unavailable: max.map(IntOrString::Int),
        min_available: min.map(|m| IntOrString::String(m.into())),
        ..Default::default()
    }
}

fn held(a: &Allotment, m: &str) -> Vec<String> {
    a.maintenances[m].hold.iter().cloned().collect()
}

#[test]
fn a_rolling_maintenance_holds_max_unavailable_nodes_in_name_order() {
    let a = allot(&[rolling("m", 0, 1)], &pool(4), &[]);
    assert_eq!(held(&a, "m"), ["n1"]);
    assert_eq!(a.maintenances["m"].waiting["n2"], Wait::Turn { held: 1, limit: 1 });
    assert_eq!(a.maintenances["m"].waiting["n2"].to_string(), "Waiting for a place (1 of 1 nodes held).");
    let a = allot(&[rolling("m", 0, 2)], &pool(4), &[]);
    assert_eq!(held(&a, "m"), ["n1", "n2"]);
}

#[test]
fn held_nodes_stay_held_and_released_ones_make_room() {
    let mut nodes = pool(4);
    nodes[2] = node("n3", &["m"]);
    let a = allot(&[rolling("m", 0, 1)], &nodes, &[]);
    assert_eq!(held(&a, "m"), ["n3"], "the held node keeps the only place");
    assert!(a.maintenances["m"].granted.is_empty());
    let mut m = rolling("m", 0, 1);
    m.released = ["n1", "n3"].map(String::from).into();
    nodes[2] = node("n3", &[]);
    let a = allot(&[m], &nodes, &[]);
    assert_eq!(held(&a, "m"), ["n2"], "released nodes are skipped and do not count");
    assert_eq!(a.maintenances["m"].waiting.keys().collect::<Vec<_>>(), ["n4"]);
}

#[test]
fn a_group_maintenance_holds_every_node_a_budget_allows() {
    let group = HoldRequest { name: "g".into(), selected: names(4), ..Default::default() };
    let a = allot(std::slice::from_ref(&group), &pool(4), &[]);
    assert_eq!(held(&a, "g").len(), 4);
    let a = allot(&[group], &pool(4), &[budget("general", Some(1), None)]);
    assert_eq!(held(&a, "g"), ["n1"]);
    let wait = &a.maintenances["g"].waiting["n2"];
    assert_eq!(wait.to_string(), "Waiting for NodeDisruptionBudget general (1 of 1 unavailable).");
    assert_eq!(a.budget_waiting["general"], 3);
}

#[test]
fn two_maintenances_under_one_budget_never_hold_two_nodes_and_the_oldest_goes_first() {
    let b = [budget("general", Some(1), None)];
    let (old, young) = (rolling("old", 10, 1), rolling("young", 20, 1));
    let a = allot(&[young.clone(), old.clone()], &pool(4), &b);
    assert_eq!(held(&a, "old"), ["n1"], "the oldest is served first");
    assert_eq!(held(&a, "young"), ["n1"], "sharing the node the old one takes disrupts nothing more");
    // The old one released n1 and moves on: its next node waits while the young one holds n1.
    let mut nodes = pool(4);
    nodes[0] = node("n1", &["young"]);
    let mut old = old;
    old.released = ["n1".to_string()].into();
    let a = allot(&[young, old], &nodes, &b);
    assert_eq!(held(&a, "young"), ["n1"]);
    assert!(held(&a, "old").is_empty(), "no second node disrupted: {:?}", held(&a, "old"));
    let wait = a.maintenances["old"].waiting["n2"].to_string();
    assert_eq!(wait, "Waiting for NodeDisruptionBudget general (1 of 1 unavailable).");
}

#[test]
fn a_node_cordoned_by_someone_else_counts_against_the_budget() {
    let mut nodes = pool(4);
    nodes[3].unschedulable = true;
    let a = allot(&[rolling("m", 0, 1)], &nodes, &[budget("general", Some(1), None)]);
    assert_eq!(a.budgets["general"].unavailable, 1);
    assert_eq!(a.budgets["general"].allowed(), 0);
    assert_eq!(held(&a, "m"), ["n4"], "the node already unavailable goes first: it disrupts nothing more");
    let mut two = rolling("m", 0, 2);
    two.selected = names(3);
    let a = allot(&[two], &nodes, &[budget("general", Some(1), None)]);
    assert!(held(&a, "m").is_empty(), "no available node may be cordoned while n4 is down");
    nodes[3].unschedulable = false;
    nodes[1].ready = false;
    let a = allot(&[rolling("m", 0, 1)], &nodes, &[budget("general", Some(1), None)]);
    assert_eq!(held(&a, "m"), ["n2"], "an unavailable node can be held without a budget place");
}

#[test]
fn min_available_in_percent_and_unreadable_budgets() {
    let a = allot(&[rolling("m", 0, 4)], &pool(4), &[budget("b", None, Some("50%"))]);
    assert_eq!(held(&a, "m"), ["n1", "n2"]);
    assert_eq!(a.budgets["b"].desired_available, 2);
    let both = BudgetView { min_available: Some(IntOrString::Int(1)), ..budget("b", Some(1), None) };
    let a = allot(&[rolling("m", 0, 4)], &pool(4), &[both]);
    assert!(held(&a, "m").is_empty(), "a budget that cannot be read allows nothing");
    assert!(a.budgets["b"].invalid.is_some());
    let a = allot(&[rolling("m", 0, 4)], &pool(4), &[budget("b", None, None)]);
    assert_eq!(held(&a, "m"), ["n1", "n2", "n3", "n4"], "a budget without a count sets no count limit");
    assert_eq!((a.budgets["b"].max_unavailable, a.budgets["b"].desired_available), (4, 0));
    assert!(a.budgets["b"].invalid.is_none());
}

#[test]
fn release_needs_the_end_of_the_stage_and_a_signal_for_this_maintenance() {
    let end = ReleaseInput { at_end: true, ready: true, ..Default::default() };
    assert_eq!(release_cause("m", &ReleaseInput { done: Some("m"), ..end }), Some(ReleaseCause::DoneAnnotation));
    assert_eq!(release_cause("m", &ReleaseInput { done: Some("other"), ..end }), None);
    assert_eq!(release_cause("m", &ReleaseInput { done: Some("m"), at_end: false, ..end }), None);
    let rebooted = ReleaseInput { reboot_releases: true, recorded_boot_id: Some("a"), boot_id: Some("b"), ..end };
    assert_eq!(release_cause("m", &rebooted), Some(ReleaseCause::Reboot));
    assert_eq!(release_cause("m", &ReleaseInput { ready: false, ..rebooted }), None, "Ready again first");
    assert_eq!(release_cause("m", &ReleaseInput { reboot_releases: false, ..rebooted }), None);
    assert_eq!(release_cause("m", &ReleaseInput { boot_id: Some("a"), ..rebooted }), None);
}

fn waves(o: &RollOrder) -> Vec<Vec<&str>> {
    o.waves.iter().map(|w| w.iter().map(String::as_str).collect()).collect()
}

#[test]
fn a_roll_goes_wave_by_wave_in_allotment_order() {
    let o = roll_order(&rolling("m", 0, 2), &[], &pool(4), &[]);
    assert_eq!(waves(&o), [vec!["n1", "n2"], vec!["n3", "n4"]]);
    assert_eq!(o.waiting_now["n3"], Wait::Turn { held: 2, limit: 2 });
    assert!(o.never.is_empty());
    // A node someone cordoned goes first: holding it disrupts nothing more.
    let mut nodes = pool(4);
    nodes[3].unschedulable = true;
    let o = roll_order(&rolling("m", 0, 1), &[], &nodes, &[]);
    assert_eq!(waves(&o), [vec!["n4"], vec!["n1"], vec!["n2"], vec!["n3"]]);
    // Without maxUnavailable: one wave, the KEP's group maintenance.
    let group = HoldRequest { max_unavailable: None, ..rolling("m", 0, 1) };
    assert_eq!(waves(&roll_order(&group, &[], &pool(4), &[])), [vec!["n1", "n2", "n3", "n4"]]);
}

#[test]
fn a_roll_shows_budget_waits_and_nodes_it_never_reaches() {
    // An older maintenance holds n1 and keeps the budget of one at zero for the whole roll.
    let mut nodes = pool(4);
    nodes[0] = node("n1", &["old"]);
    let old = HoldRequest { selected: vec!["n1".into()], ..rolling("old", 0, 1) };
    let o = roll_order(&rolling("m", 1, 2), &[old], &nodes, &[budget("b", Some(1), None)]);
    assert_eq!(waves(&o), [vec!["n1"]], "n1 is down already: holding it needs no budget");
    let wait = Wait::Budget { name: "b".into(), unavailable: 1, max_unavailable: 1 };
    assert_eq!(o.never["n2"], wait);
    assert_eq!(o.waiting_now["n2"], wait);
    // A budget of two leaves one place while old holds n1: after the first wave (n1, down
    // already, and n2) the roll goes one node at a time.
    let o = roll_order(&rolling("m", 1, 2), &[], &nodes, &[budget("b", Some(2), None)]);
    assert_eq!(waves(&o), [vec!["n1", "n2"], vec!["n3"], vec!["n4"]]);
}

fn window_closed() -> GateVerdict {
    let message =
        "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2026-11-28T22:00:00+01:00)";
    let closed = vec![GateClosure { reason: GateReason::OutsideMaintenanceWindow, message: message.into() }];
    GateVerdict { closed, ..Default::default() }
}

#[test]
fn a_closed_gate_starts_no_node_not_even_a_cordoned_one_and_held_nodes_stay() {
    let mut nodes = pool(4);
    nodes[0] = node("n1", &["m"]);
    nodes[1].unschedulable = true;
    let gated = BudgetView { gates: window_closed(), ..budget("weekend", Some(4), None) };
    let group = HoldRequest { name: "m".into(), selected: names(4), ..Default::default() };
    let a = allot(&[group], &nodes, &[gated]);
    assert_eq!(held(&a, "m"), ["n1"], "the node held before the gate closed stays held");
    let wait = &a.maintenances["m"].waiting["n2"];
    assert!(wait.gates().is_some_and(Gates::for_window), "someone else's cordon does not let a node past a gate");
    assert_eq!(
        wait.to_string(),
        "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2026-11-28T22:00:00+01:00)."
    );
    assert_eq!(a.budget_waiting["weekend"], 3);
    assert_eq!(a.budgets["weekend"].allowed(), 0, "a closed gate allows no disruption, whatever the count");
}

#[test]
fn a_paused_maintenance_starts_nothing_and_keeps_what_it_holds() {
    let mut nodes = pool(4);
    nodes[0] = node("n1", &["m"]);
    let paused = HoldRequest { paused: true, ..rolling("m", 0, 2) };
    let a = allot(&[paused], &nodes, &[]);
    assert_eq!(held(&a, "m"), ["n1"]);
    let paused = Wait::Gated(Gates::default().with_paused("m"));
    assert_eq!(a.maintenances["m"].waiting["n2"], paused);
    assert!(!paused.gates().is_some_and(Gates::for_window));
}

mod composed {
    //! Property: for random budgets over one node, each with random closed gates and counts,
    //! and a maintenance that may be paused, the node starts iff every budget allows it; a
    //! pause anywhere stops its evictions, whatever order the budgets come in (a started
    //! node keeps only the pauses: `from_cluster`'s unit test).
    use super::*;
    use crate::planner::from_cluster::{Nodes, eviction_gates};
    use proptest::prelude::*;

    fn closed(reasons: &[bool; 5]) -> Vec<GateClosure> {
        GateReason::ALL
            .iter()
            .zip(reasons)
            .filter(|(_, closed)| **closed)
            .map(|(&reason, _)| GateClosure { reason, message: format!("{reason:?}") })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn a_node_starts_iff_every_budget_allows_and_a_pause_anywhere_stops_its_evictions(
            budgets in prop::collection::vec((prop::array::uniform5(prop::bool::weighted(0.2)), prop::option::of(0i32..3)), 0..5),
            paused in prop::bool::weighted(0.2),
            reversed in any::<bool>(),
        ) {
            let mut views: Vec<BudgetView> = budgets
                .iter()
                .enumerate()
                .map(|(i, (reasons, max))| BudgetView {
                    gates: GateVerdict { closed: closed(reasons), ..Default::default() },
                    ..budget(&format!("b{i}"), *max, None)
                })
                .collect();
            if reversed {
                views.reverse();
            }
            let request = HoldRequest { name: "m".into(), selected: vec!["n1".into()], paused, ..Default::default() };
            let a = allot(&[request], &pool(4), &views);
            let allows = views.iter().all(|b| b.gates.open() && b.max_unavailable.as_ref().is_none_or(|m| *m != IntOrString::Int(0)));
            prop_assert_eq!(a.maintenances["m"].granted.contains("n1"), allows && !paused);

            // Evictions, once it is held and before its drain started: every closed gate stops
            // them, and a pause on any budget (or the maintenance) is among them.
            let paused_anywhere = paused || budgets.iter().any(|(reasons, _)| reasons[0]);
            let list = [crate::planner::decide::fixtures::node("n1", Some(&["m"]), vec![])];


            let request = HoldRequest { name: "m".into(), selected: vec!["n1".into()], paused, ..Default::default() };
            let held = [node("n1", &["m"])];
            let a = allot(&[request], &held, &views);
            let gates = eviction_gates(&Nodes::new(&list), &a.node_gates);
            prop_assert_eq!(gates.get("n1").is_some_and(|g| g.is_paused()), paused_anywhere);
            let any_closed = views.iter().any(|b| !b.gates.open());
            prop_assert_eq!(gates.contains_key("n1"), paused || any_closed, "not started: every closed gate stops it");
            if let Some(g) = gates.get("n1") {
                let named: Vec<&str> = g.budgets.iter().map(|b| b.name.as_str()).collect();
                let mut want: Vec<String> = views.iter().filter(|b| !b.gates.open()).map(|b| b.name.clone()).collect();
                want.sort();
                prop_assert_eq!(named, want, "every closed budget is named, by name");
            }
        }
    }
}
