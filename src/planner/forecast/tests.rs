//! Worked examples of SPEC 4.7's forecast. The expected times are worked out by hand from the
//! windows' local times (Berlin: CET = UTC+1 until 2027-03-28 01:00 UTC, CEST = UTC+2 after).

use super::*;
use crate::api::{Blackout, MaintenanceWindow, NodeDisruptionBudgetSpec, PauseRequest};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::borrow::Cow;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("n{i:02}")).collect()
}

pub(super) fn pool(n: usize) -> Vec<NodeView<'static>> {
    names(n)
        .into_iter()
        .map(|name| NodeView {
            name: name.into(),
            ready: true,
            unschedulable: false,
            holders: Cow::Owned(BTreeSet::new()),
        })
        .collect()
}

pub(super) fn rolling(n: usize, max: Option<i32>) -> HoldRequest {
    HoldRequest {
        name: "kernel".into(),
        selected: names(n),
        max_unavailable: max.map(IntOrString::Int),
        ..Default::default()
    }
}

/// The worked example's weekend nights: Friday and Saturday 22:00 for 8 hours, Berlin time.
pub(super) fn weekend_nights() -> MaintenanceWindow {
    MaintenanceWindow {
        schedule: "0 22 * * 5,6".into(),
        duration: "8h".into(),
        time_zone: Some("Europe/Berlin".into()),
    }
}

pub(super) fn blackout(start: &str, end: &str, reason: &str) -> Blackout {
    Blackout { start: Time(ts(start)), end: Time(ts(end)), reason: Some(reason.into()) }
}

pub(super) fn budget(n: usize, spec: NodeDisruptionBudgetSpec) -> BudgetTimeline {
    let view = BudgetView {
        name: "general".into(),
        nodes: names(n),
        max_unavailable: spec.max_unavailable.clone(),
        min_available: spec.min_available.clone(),
        gates: Default::default(),
    };
    BudgetTimeline { gates: CompiledGates::compile("general", &spec), health_gate: spec.health_gate.is_some(), view }
}

fn input(request: HoldRequest, budgets: Vec<BudgetTimeline>, basis: Basis, now: &str) -> ForecastInput<'static> {
    let nodes = pool(request.selected.len());
    ForecastInput {
        request,
        facts: BTreeMap::new(),
        nodes,
        budgets: budgets.into_iter().map(Cow::Owned).collect(),
        basis,
        now: ts(now),
    }
}

fn hours(h: u64) -> Duration {
    Duration::from_secs(h * 3600)
}

/// (node, start, release) on the expected timeline, in UTC.
fn starts(f: &Forecast) -> Vec<(String, String, String)> {
    let show = |t: Option<Timestamp>| t.map_or("-".into(), |t| t.to_string());
    f.nodes.iter().map(|n| (n.node.clone(), show(n.start), show(n.release))).collect()
}

fn year_end() -> NodeDisruptionBudgetSpec {
    NodeDisruptionBudgetSpec {
        maintenance_windows: vec![weekend_nights()],
        blackouts: vec![blackout("2026-12-18T00:00:00Z", "2027-01-04T00:00:00Z", "year-end freeze")],
        ..Default::default()
    }
}

/// The example: the kernel upgrade of 30 nodes, two at a time, on Friday and
/// Saturday nights (22:00-06:00 Berlin, 21:00-05:00 UTC in winter), 3 hours a node, before
/// the year-end freeze from 2026-12-18. A night takes three pairs (21:00, 00:00, 03:00: the
/// last starts two hours before the window closes), so two weekends take 24 nodes; the
/// weekend of 2026-12-18 and the one of 2027-01-01 are frozen; the last six go on
/// 2027-01-08, the first Friday after the freeze.
#[test]
fn two_at_a_time_on_weekend_nights_before_the_year_end_freeze() {
    let i = input(
        rolling(30, Some(2)),
        vec![budget(30, year_end())],
        Basis::new(&[], Some(hours(3))),
        "2026-12-01T10:00:00Z",
    );
    let f = forecast(&i);
    let s = starts(&f);
    let at = |node: usize| (s[node - 1].1.as_str(), s[node - 1].2.as_str());
    assert_eq!(at(1), ("2026-12-04T21:00:00Z", "2026-12-05T00:00:00Z"));
    assert_eq!(at(2), at(1), "two at a time");
    assert_eq!(at(3), ("2026-12-05T00:00:00Z", "2026-12-05T03:00:00Z"));
    assert_eq!(at(5), ("2026-12-05T03:00:00Z", "2026-12-05T06:00:00Z"), "starts before the window closes, ends after");
    assert_eq!(at(7), ("2026-12-05T21:00:00Z", "2026-12-06T00:00:00Z"), "Saturday night");
    assert_eq!(at(13), ("2026-12-11T21:00:00Z", "2026-12-12T00:00:00Z"));
    assert_eq!(at(24), ("2026-12-13T03:00:00Z", "2026-12-13T06:00:00Z"));
    assert_eq!(at(25), ("2027-01-08T21:00:00Z", "2027-01-09T00:00:00Z"), "after the freeze");
    assert_eq!(at(30), ("2027-01-09T03:00:00Z", "2027-01-09T06:00:00Z"));
    assert_eq!(f.completion_time, Some(ts("2027-01-09T06:00:00Z")));
    assert_eq!(f.late_completion_time, f.completion_time, "a given duration has no late bound of its own");
    assert_eq!(f.nodes_at_once, Some(2));
    assert_eq!(f.never, None);
    assert_eq!(f.nodes[24].window_opened, Some(ts("2027-01-08T21:00:00Z")));
    assert_eq!(f.nodes[3].window_opened, Some(ts("2026-12-04T21:00:00Z")), "grouped by the window it starts in");

    let freeze: Vec<&GateEdge> = f.edges.iter().filter(|e| e.kind == EdgeKind::BlackoutStarts).collect();
    assert_eq!(freeze.len(), 1, "{:?}", f.edges);
    assert_eq!(
        (freeze[0].at, freeze[0].reasons.as_slice()),
        (ts("2026-12-18T00:00:00Z"), &["year-end freeze".to_owned()][..])
    );
    assert_eq!(freeze[0].local, "2026-12-18T01:00:00+01:00");
    let first = &f.edges[0];
    assert_eq!(
        (first.at, first.kind, first.local.as_str()),
        (ts("2026-12-04T21:00:00Z"), EdgeKind::WindowOpens, "2026-12-04T22:00:00+01:00")
    );
    let last = f.edges.last().unwrap();
    assert_eq!((last.at, last.kind), (ts("2027-01-09T05:00:00Z"), EdgeKind::WindowCloses), "up to the completion");
    assert_eq!(f.next_blackout.as_ref().map(|e| e.at), Some(ts("2026-12-18T00:00:00Z")));
    assert_eq!(f.assumptions, [Assumption::HealthGatesOpen { budgets: vec![] }]);
    assert_eq!(f.basis.to_string(), "given node duration 3h");
}

/// The late timeline takes the p90 of the finished nodes: 4 hours a node, two pairs a night
/// (21:00 and 01:00; at 05:00 the window has closed), eight nodes a weekend.
#[test]
fn the_late_completion_takes_the_p90_of_the_finished_nodes() {
    let basis = Basis::new(&[hours(2), hours(3), hours(4)], Some(hours(1)));
    assert_eq!(basis, Basis::FinishedNodes { nodes: 3, median_seconds: 3 * 3600, p90_seconds: 4 * 3600 });
    assert_eq!(basis.to_string(), "3 finished nodes (median 3h, p90 4h)");
    let f = forecast(&input(rolling(30, Some(2)), vec![budget(30, year_end())], basis, "2026-12-01T10:00:00Z"));
    assert_eq!(f.completion_time, Some(ts("2027-01-09T06:00:00Z")));
    // 8 on Dec 4/5, 8 on Dec 11/12, 8 on Jan 8/9, 4 on Jan 15, the last 2 on Saturday Jan 16.
    assert_eq!(f.late_completion_time, Some(ts("2027-01-17T01:00:00Z")));
    let last = f.nodes.last().unwrap();
    assert_eq!(
        (last.late_start, last.late_release),
        (Some(ts("2027-01-16T21:00:00Z")), Some(ts("2027-01-17T01:00:00Z")))
    );
}

/// Daylight saving: windows open at 22:00 Berlin time (21:00 UTC before 2027-03-28, 20:00
/// after) and stay open 8 elapsed hours, so the night of the change closes at 07:00 CEST
/// (05:00 UTC), not 06:00.
#[test]
fn windows_open_in_their_zone_across_the_spring_change() {
    let spec = NodeDisruptionBudgetSpec { maintenance_windows: vec![weekend_nights()], ..Default::default() };
    let f = forecast(&input(
        rolling(5, Some(1)),
        vec![budget(5, spec)],
        Basis::new(&[], Some(hours(7))),
        "2027-03-26T12:00:00Z",
    ));
    let s: Vec<(String, String)> = starts(&f).into_iter().map(|(_, a, b)| (a, b)).collect();
    let want = [
        ("2027-03-26T21:00:00Z", "2027-03-27T04:00:00Z"),
        ("2027-03-27T04:00:00Z", "2027-03-27T11:00:00Z"),
        ("2027-03-27T21:00:00Z", "2027-03-28T04:00:00Z"),
        ("2027-03-28T04:00:00Z", "2027-03-28T11:00:00Z"),
        ("2027-04-02T20:00:00Z", "2027-04-03T03:00:00Z"),
    ];
    assert_eq!(s, want.map(|(a, b)| (a.to_owned(), b.to_owned())));
}

/// Nodes already done, started and waiting: the started node finishes its duration from its
/// own start; the waiting ones take the places left.
#[test]
fn nodes_already_done_or_started_keep_their_place() {
    let mut i = input(rolling(4, Some(2)), vec![], Basis::new(&[], Some(hours(3))), "2026-12-01T10:00:00Z");
    i.request.released.insert("n01".into());
    i.facts.insert("n02".into(), NodeFact::Started(ts("2026-12-01T09:00:00Z")));
    i.nodes[1].holders.to_mut().insert("kernel".into());
    i.nodes[1].unschedulable = true;
    let f = forecast(&i);
    assert_eq!(
        starts(&f),
        [
            ("n01", "-", "-"),
            ("n02", "2026-12-01T09:00:00Z", "2026-12-01T12:00:00Z"),
            ("n03", "2026-12-01T10:00:00Z", "2026-12-01T13:00:00Z"),
            ("n04", "2026-12-01T12:00:00Z", "2026-12-01T15:00:00Z"),
        ]
        .map(|(a, b, c)| (a.to_owned(), b.to_owned(), c.to_owned()))
    );
    let states: Vec<NodeState> = f.nodes.iter().map(|n| n.state).collect();
    assert_eq!(states, [NodeState::Done, NodeState::Started, NodeState::Waiting, NodeState::Waiting]);
    assert_eq!(f.completion_time, Some(ts("2026-12-01T15:00:00Z")));
    let late = forecast(&ForecastInput {
        facts: BTreeMap::from([("n02".into(), NodeFact::Started(ts("2026-11-30T00:00:00Z")))]),
        ..i
    });
    assert_eq!(late.nodes[1].release, Some(ts("2026-12-01T10:00:00Z")), "overdue: expected now");
}

/// A group maintenance holds its nodes until Complete: a budget of 2 over 4 nodes lets two
/// start and the others never (nothing is given back).
#[test]
fn a_group_maintenance_under_a_budget_never_gets_past_its_count() {
    let spec = NodeDisruptionBudgetSpec { max_unavailable: Some(IntOrString::Int(2)), ..Default::default() };
    let f = forecast(&input(
        rolling(4, None),
        vec![budget(4, spec)],
        Basis::new(&[], Some(hours(1))),
        "2026-12-01T10:00:00Z",
    ));
    assert_eq!(f.nodes[1].release, Some(ts("2026-12-01T11:00:00Z")));
    assert_eq!(f.completion_time, None);
    let never = f.never.unwrap();
    assert_eq!((never.nodes, never.reason.as_str()), (2, "InsufficientNodes"));
    assert_eq!(never.message, "Waiting for NodeDisruptionBudget general (2 of 2 unavailable).");
    assert!(f.assumptions.contains(&Assumption::GroupReleasesAtComplete));
}

/// Without a basis: the first pair's start is known (the window's opening), nothing else.
#[test]
fn without_a_basis_only_starts_that_need_no_release_are_foreseen() {
    let spec = NodeDisruptionBudgetSpec { maintenance_windows: vec![weekend_nights()], ..Default::default() };
    let f = forecast(&input(rolling(4, Some(2)), vec![budget(4, spec)], Basis::None, "2026-12-01T10:00:00Z"));
    assert_eq!(f.basis.to_string(), "no basis: no node has finished yet");
    let s = starts(&f);
    assert_eq!(s[0].1, "2026-12-04T21:00:00Z");
    assert_eq!((s[1].1.as_str(), s[1].2.as_str()), ("2026-12-04T21:00:00Z", "-"));
    assert_eq!((s[2].1.as_str(), f.nodes[2].never.as_deref()), ("-", None), "not never: unknown");
    assert_eq!((f.completion_time, f.late_completion_time, f.never), (None, None, None));
}

/// Windows that never open within the horizon (29 February only), a pause that stays.
#[test]
fn windows_that_never_open_and_pauses_say_never() {
    let leap = NodeDisruptionBudgetSpec {
        maintenance_windows: vec![MaintenanceWindow {
            schedule: "0 0 29 2 *".into(),
            duration: "1h".into(),
            time_zone: None,
        }],
        health_gate: Some(Default::default()),
        ..Default::default()
    };
    for basis in [Basis::None, Basis::new(&[], Some(hours(1)))] {
        let f = forecast(&input(rolling(2, Some(1)), vec![budget(2, leap.clone())], basis, "2026-03-01T00:00:00Z"));
        let never = f.never.expect("never");
        assert_eq!((never.nodes, never.reason.as_str()), (2, "OutsideMaintenanceWindow"));
        assert!(never.message.contains("(opens 2028-02-29T00:00:00+00:00)"), "{}", never.message);
        assert_eq!(f.completion_time, None);
        assert_eq!(f.horizon, ts("2027-03-02T00:00:00Z"));
        assert_eq!(f.assumptions[0], Assumption::HealthGatesOpen { budgets: vec!["general".into()] });
    }
    let paused = NodeDisruptionBudgetSpec {
        pause_requests: vec![PauseRequest { name: "oncall".into(), reason: None }],
        ..Default::default()
    };
    let f = forecast(&input(
        rolling(2, Some(1)),
        vec![budget(2, paused)],
        Basis::new(&[], Some(hours(1))),
        "2026-03-01T00:00:00Z",
    ));
    assert_eq!(f.never.map(|n| n.reason), Some("Paused".into()));
    assert!(f.assumptions.contains(&Assumption::PausesStay));
}

/// A group maintenance held in Cordon waits for its window to start its drain.
#[test]
fn held_nodes_start_when_their_gates_open() {
    let spec = NodeDisruptionBudgetSpec { maintenance_windows: vec![weekend_nights()], ..Default::default() };
    let mut i = input(rolling(2, None), vec![budget(2, spec)], Basis::new(&[], Some(hours(2))), "2026-12-01T10:00:00Z");
    for (n, node) in i.nodes.iter_mut().enumerate() {
        node.holders.to_mut().insert("kernel".into());
        node.unschedulable = true;
        i.facts.insert(format!("n{:02}", n + 1), NodeFact::Held);
    }
    let f = forecast(&i);
    assert!(f.nodes.iter().all(|n| n.state == NodeState::Held && n.start == Some(ts("2026-12-04T21:00:00Z"))));
    assert_eq!(f.completion_time, Some(ts("2026-12-04T23:00:00Z")));
}

/// SPEC 4.7's basis from the recorded times: released nodes of a rolling maintenance, each
/// from its `heldTime`; a node without `finishedTime` does not count.
#[test]
fn the_basis_is_measured_from_the_recorded_times() {
    use crate::api::{NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceStatus, NodePhase, NodeRef, Stage};
    let entry = |name: &str, phase, held: &str, finished: Option<&str>| NodeMaintenanceNodeStatus {
        node_ref: NodeRef { name: name.into() },
        phase: Some(phase),
        held_time: Some(Time(ts(held))),
        finished_time: finished.map(|f| Time(ts(f))),
        ..Default::default()
    };
    let mut m = NodeMaintenance::new("kernel", Default::default());
    m.spec.stage = Stage::Drain;
    m.spec.max_unavailable = Some(IntOrString::Int(1));
    m.status = Some(NodeMaintenanceStatus {
        node_statuses: vec![
            entry("n01", NodePhase::Released, "2026-12-04T21:00:00Z", Some("2026-12-04T23:30:00Z")),
            entry("n02", NodePhase::Draining, "2026-12-04T23:30:00Z", None),
            entry("n03", NodePhase::Waiting, "2026-12-04T23:30:00Z", None),
        ],
        ..Default::default()
    });
    assert_eq!(from_cluster::finished_durations(&m, from_cluster::stored_statuses(&m)), [Duration::from_secs(9000)]);
    let facts = from_cluster::node_facts(&m, from_cluster::stored_statuses(&m), &names(3), ts("2026-12-05T00:00:00Z"));
    assert_eq!(facts["n01"], NodeFact::Done(Some(ts("2026-12-04T23:30:00Z"))));
    assert_eq!(facts["n02"], NodeFact::Started(ts("2026-12-04T23:30:00Z")));
    assert_eq!(facts["n03"], NodeFact::Waiting);
    let status = m.status.as_mut().unwrap();
    status.node_statuses[0].phase = Some(NodePhase::Drained);
    assert!(
        from_cluster::finished_durations(&m, from_cluster::stored_statuses(&m)).is_empty(),
        "drained, not released yet"
    );
    m.spec.max_unavailable = None;
    assert_eq!(
        from_cluster::finished_durations(&m, from_cluster::stored_statuses(&m)),
        [Duration::from_secs(9000)],
        "a group's nodes are done drained"
    );
}

/// Windows that open every 20 minutes inside a blackout of most of a year: while the node
/// waits, every firing is a gate edge. The simulation follows at most `MAX_EDGE_STEPS` of
/// them (found by fuzzing: 50,000 edges of cron searches took 20 s in one decision), says how
/// far it looked, and counts the node that had not started by then as never starting.
#[test]
fn edges_without_a_release_are_followed_a_bounded_number_of_times() {
    let spec = NodeDisruptionBudgetSpec {
        maintenance_windows: vec![MaintenanceWindow {
            schedule: "*/20 * * * *".into(),
            duration: "10m".into(),
            time_zone: None,
        }],
        blackouts: vec![blackout("2026-12-01T00:00:00Z", "2027-10-01T00:00:00Z", "long freeze")],
        ..Default::default()
    };
    let now = "2026-12-01T10:00:00Z";
    let f = forecast(&input(rolling(2, Some(1)), vec![budget(2, spec)], Basis::new(&[], Some(hours(1))), now));
    let looked = f.horizon.duration_since(ts(now));
    assert!(looked < HORIZON, "stopped by the step limit: {looked:#}");
    assert!(looked >= SignedDuration::from_mins(20 * MAX_EDGE_STEPS as i64 / 2), "{looked:#}");
    assert_eq!(f.never.as_ref().map(|n| (n.nodes, n.reason.as_str())), Some((2, "Blackout")), "{:?}", f.never);
    assert_eq!(f.completion_time, None);
}
