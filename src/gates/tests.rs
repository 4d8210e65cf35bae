use super::window::{Schedule, parse_window_duration};
use super::*;
use crate::api::{Blackout, HealthGate, MaintenanceWindow};
use k8s_openapi::api::core::v1::NodeSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn window(schedule: &str, duration: &str, zone: Option<&str>) -> MaintenanceWindow {
    MaintenanceWindow { schedule: schedule.into(), duration: duration.into(), time_zone: zone.map(str::to_owned) }
}

fn spec(windows: Vec<MaintenanceWindow>) -> NodeDisruptionBudgetSpec {
    NodeDisruptionBudgetSpec {
        node_selector: NodeSelector::default(),
        max_unavailable: None,
        min_available: None,
        maintenance_windows: windows,
        blackouts: vec![],
        pause_requests: vec![],
        health_gate: None,
    }
}

fn blackout(start: &str, end: &str, reason: Option<&str>) -> Blackout {
    Blackout { start: Time(ts(start)), end: Time(ts(end)), reason: reason.map(str::to_owned) }
}

fn at(spec: &NodeDisruptionBudgetSpec, now: &str) -> GateVerdict {
    CompiledGates::compile("weekend", spec).evaluate(&[], &AlertsView::Firing(vec![]), ts(now))
}

/// (open, closesAt, nextOpensAt) in UTC.
fn state(v: &GateVerdict) -> (bool, Option<String>, Option<String>) {
    let w = v.maintenance_window.clone().expect("windows");
    (w.open, w.closes_at.map(|t| t.0.to_string()), w.next_opens_at.map(|t| t.0.to_string()))
}

fn s(text: &str) -> Option<String> {
    Some(text.to_owned())
}

#[test]
fn a_weekend_window_in_berlin_opens_in_its_zone_and_crosses_midnight() {
    let weekend = spec(vec![window("0 22 * * SAT", "10h", Some("Europe/Berlin"))]);
    let v = at(&weekend, "2026-11-26T12:00:00Z");
    assert_eq!(state(&v), (false, None, s("2026-11-28T21:00:00Z")));
    assert_eq!(v.closed.len(), 1);
    assert_eq!(v.closed[0].reason, GateReason::OutsideMaintenanceWindow);
    assert_eq!(
        v.closed[0].message,
        "Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2026-11-28T22:00:00+01:00)"
    );
    assert_eq!(v.next_instant, Some(ts("2026-11-28T21:00:00Z")));
    // Sunday 06:00 in Berlin: opened Saturday 22:00, open past midnight until 08:00.
    let v = at(&weekend, "2026-11-29T05:00:00Z");
    assert!(v.open());
    assert_eq!(state(&v), (true, s("2026-11-29T07:00:00Z"), None));
    assert_eq!(v.next_instant, Some(ts("2026-11-29T07:00:00Z")));
    let v = at(&weekend, "2026-11-29T07:00:00Z");
    assert_eq!(state(&v), (false, None, s("2026-12-05T21:00:00Z")), "the end is exclusive");
    let v = at(&weekend, "2026-11-28T21:00:00Z");
    assert_eq!(state(&v), (true, s("2026-11-29T07:00:00Z"), None), "the start is inclusive");
}

#[test]
fn a_time_daylight_saving_skips_fires_at_the_end_of_the_gap() {
    // 2026-03-29: Berlin's clocks go from 02:00 CET to 03:00 CEST; 02:30 does not exist.
    let w = spec(vec![window("30 2 * * *", "1h", Some("Europe/Berlin"))]);
    let v = at(&w, "2026-03-29T00:30:00Z");
    assert_eq!(state(&v), (false, None, s("2026-03-29T01:00:00Z")));
    assert!(v.closed[0].message.ends_with("(opens 2026-03-29T03:00:00+02:00)"), "{}", v.closed[0].message);
    assert_eq!(state(&at(&w, "2026-03-29T01:10:00Z")), (true, s("2026-03-29T02:00:00Z"), None));
    // The days around it fire at 02:30 local time.
    assert_eq!(state(&at(&w, "2026-03-28T01:45:00Z")), (true, s("2026-03-28T02:30:00Z"), None));
    assert_eq!(state(&at(&w, "2026-03-29T02:00:00Z")), (false, None, s("2026-03-30T00:30:00Z")));
}

#[test]
fn a_time_in_the_repeated_hour_fires_once() {
    // 2026-10-25: Berlin's clocks go from 03:00 CEST back to 02:00 CET; 02:30 happens twice.
    let w = spec(vec![window("30 2 * * *", "30m", Some("Europe/Berlin"))]);
    assert_eq!(state(&at(&w, "2026-10-25T00:40:00Z")), (true, s("2026-10-25T01:00:00Z"), None));
    // 02:40 CET, the second 02:30 past: no second opening.
    assert_eq!(state(&at(&w, "2026-10-25T01:40:00Z")), (false, None, s("2026-10-26T01:30:00Z")));
    assert_eq!(state(&at(&w, "2026-10-25T00:10:00Z")), (false, None, s("2026-10-25T00:30:00Z")));
}

#[test]
fn schedules_with_several_times_follow_the_daylight_saving_rule_too() {
    // Spring, Berlin: 02:00 and 02:30 do not exist; both fire once at 03:00 CEST (01:00 UTC).
    let w = spec(vec![window("0,30 2 * * *", "1h", Some("Europe/Berlin"))]);
    assert_eq!(state(&at(&w, "2026-03-29T00:30:00Z")), (false, None, s("2026-03-29T01:00:00Z")));
    assert_eq!(state(&at(&w, "2026-03-29T01:40:00Z")), (true, s("2026-03-29T02:00:00Z"), None));
    assert_eq!(state(&at(&w, "2026-03-29T02:00:00Z")), (false, None, s("2026-03-30T00:00:00Z")));
    // Autumn, Berlin: the second pass through 02:00-03:00 (01:00-02:00 UTC) fires nothing.
    let w = spec(vec![window("*/15 * * * *", "10m", Some("Europe/Berlin"))]);
    assert_eq!(state(&at(&w, "2026-10-25T00:50:00Z")), (true, s("2026-10-25T00:55:00Z"), None));
    let v = at(&w, "2026-10-25T01:20:00Z");
    assert_eq!(state(&v), (false, None, s("2026-10-25T02:00:00Z")));
    assert_eq!(v.next_instant, Some(ts("2026-10-25T02:00:00Z")));
}

#[test]
fn overlapping_windows_close_at_the_end_of_their_union() {
    let w = spec(vec![
        window("0 1 * * *", "2h", None),
        window("0 2 * * *", "2h", None),
        window("0 4 * * *", "1h", None),
        window("0 12 * * *", "1h", None),
    ]);
    // 01:00-03:00, 02:00-04:00 and 04:00-05:00 touch: one opening until 05:00.
    assert_eq!(state(&at(&w, "2026-11-26T01:30:00Z")), (true, s("2026-11-26T05:00:00Z"), None));
    assert_eq!(state(&at(&w, "2026-11-26T04:30:00Z")), (true, s("2026-11-26T05:00:00Z"), None));
    assert_eq!(state(&at(&w, "2026-11-26T05:00:00Z")), (false, None, s("2026-11-26T12:00:00Z")));
    // A window that never closes reports no end, and the controller looks again later.
    let always = CompiledGates::compile("b", &spec(vec![window("* * * * *", "1h", None)]));
    let v = always.evaluate(&[], &AlertsView::NotConfigured, ts("2026-11-26T00:00:00Z"));
    assert_eq!(state(&v), (true, None, None));
    assert!(v.next_instant.is_some_and(|t| t > ts("2026-11-26T00:00:00Z")));
}

#[test]
fn blackouts_close_the_gate_and_push_the_next_opening() {
    let mut w = spec(vec![window("0 22 * * *", "4h", None)]);
    w.blackouts = vec![
        blackout("2026-12-20T00:00:00Z", "2026-12-27T23:00:00Z", Some("year-end freeze")),
        blackout("2026-12-24T00:00:00Z", "2026-12-24T12:00:00Z", None),
    ];
    let v = at(&w, "2026-12-21T12:00:00Z");
    let reasons: Vec<GateReason> = v.closed.iter().map(|c| c.reason).collect();
    assert_eq!(reasons, [GateReason::Blackout, GateReason::OutsideMaintenanceWindow]);
    assert_eq!(
        v.closed[0].message,
        "NodeDisruptionBudget weekend is in a blackout until 2026-12-27T23:00:00Z (year-end freeze)"
    );
    // The window opened at 22:00 on the 27th is still open when the blackout ends at 23:00.
    assert_eq!(state(&v), (false, None, s("2026-12-27T23:00:00Z")));
    assert!(v.closed[1].message.ends_with("(opens 2026-12-27T23:00:00+00:00)"), "{}", v.closed[1].message);
    assert_eq!(v.next_instant, Some(ts("2026-12-21T22:00:00Z")), "the window edge comes first");
    // Inside the blackout the window is open, but nothing starts.
    let v = at(&w, "2026-12-21T23:00:00Z");
    assert_eq!(state(&v), (true, s("2026-12-22T02:00:00Z"), None));
    assert_eq!(v.closed.len(), 1);
    assert_eq!(v.closed[0].reason, GateReason::Blackout);
    // A blackout ending after the window closes pushes the opening to the next firing.
    w.blackouts = vec![blackout("2026-12-20T00:00:00Z", "2026-12-28T03:00:00Z", None)];
    let v = at(&w, "2026-12-21T12:00:00Z");
    assert_eq!(state(&v), (false, None, s("2026-12-28T22:00:00Z")));
    assert_eq!(v.closed[0].message, "NodeDisruptionBudget weekend is in a blackout until 2026-12-28T03:00:00Z");
    // The next blackout edge wakes the controller too.
    let mut no_windows = spec(vec![]);
    no_windows.blackouts = vec![blackout("2026-12-20T00:00:00Z", "2026-12-28T03:00:00Z", None)];
    let v = at(&no_windows, "2026-12-01T00:00:00Z");
    assert!(v.open() && v.maintenance_window.is_none());
    assert_eq!(v.next_instant, Some(ts("2026-12-20T00:00:00Z")));
    assert_eq!(at(&no_windows, "2026-12-21T00:00:00Z").next_instant, Some(ts("2026-12-28T03:00:00Z")));
    assert_eq!(at(&no_windows, "2026-12-29T00:00:00Z").next_instant, None);
}

#[test]
fn schedules_are_five_field_cron_as_a_cronjob_reads_them() {
    for ok in ["0 22 * * SAT", "*/15 1-5 * JAN-MAR mon-fri", "0 0 1,15 * *", "0 22 * JUL SUN", "0 0 29 2 *"] {
        assert!(Schedule::parse(ok).is_ok(), "{ok}");
    }
    let err = |text: &str| Schedule::parse(text).unwrap_err().to_string();
    assert_eq!(err("0 0 * *"), "must have 5 fields (minute hour day-of-month month day-of-week), found 4");
    assert_eq!(err("0 0 0 * * *"), "must have 5 fields (minute hour day-of-month month day-of-week), found 6");
    for quartz in ["0 0 L * *", "0 0 15W * *", "0 0 * * 5#3", "0 0 ? * *", "0 0 * * 5L", "@daily a b c d"] {
        assert!(err(quartz).contains("is not supported"), "{quartz}: {}", err(quartz));
    }
    assert!(matches!(Schedule::parse("61 * * * *"), Err(ScheduleError::Invalid(_))));
    assert_eq!(Schedule::parse("0 0 30 2 *").unwrap_err(), ScheduleError::NeverFires);
    // Found by the window_schedule fuzz target: a field of only commas matched nothing and the
    // search for its first firing took seconds.
    for empty in [", * * * *", "0 , * * *", "0 0 1, * *", "0 0 * ,1 *", "0 0 * * 1,,2"] {
        let started = std::time::Instant::now();
        assert!(
            matches!(Schedule::parse(empty), Err(ScheduleError::Invalid(e)) if e.contains("empty list element")),
            "{empty}"
        );
        assert!(started.elapsed() < std::time::Duration::from_millis(100), "{empty}");
    }
    // Day-of-month and day-of-week restricted together: either one (CronJob's OR).
    let w = spec(vec![window("0 0 13 * FRI", "1h", None)]);
    assert_eq!(state(&at(&w, "2026-11-26T12:00:00Z")).2, s("2026-11-27T00:00:00Z"), "Friday the 27th");
    assert_eq!(state(&at(&w, "2026-12-12T12:00:00Z")).2, s("2026-12-13T00:00:00Z"), "Sunday the 13th");
    // A day field starting with `*` counts as unrestricted: both must match (Monday, odd day).
    let w = spec(vec![window("0 0 */2 * MON", "1h", None)]);
    assert_eq!(state(&at(&w, "2026-11-26T12:00:00Z")).2, s("2026-12-07T00:00:00Z"));
    let w = spec(vec![window("0 0 * * MON", "1h", None)]);
    assert_eq!(state(&at(&w, "2026-11-26T12:00:00Z")).2, s("2026-11-30T00:00:00Z"));
}

#[test]
fn windows_that_do_not_parse_close_the_gate_naming_the_field() {
    let errs = Window::compile(&window("0 0 L * *", "0s", Some("Mars/Olympus"))).unwrap_err();
    let fields: Vec<&str> = errs.iter().map(WindowError::field).collect();
    assert_eq!(fields, ["schedule", "duration", "timeZone"]);
    assert_eq!(errs[2].to_string(), "unknown IANA time zone \"Mars/Olympus\"");
    let w = spec(vec![window("0 22 * * *", "4h", None), window("0 22 * * *", "4h", Some("Mars/Olympus"))]);
    let v = at(&w, "2026-11-26T23:00:00Z");
    assert_eq!(v.closed[0].reason, GateReason::OutsideMaintenanceWindow);
    assert_eq!(
        v.closed[0].message,
        "The maintenance windows of NodeDisruptionBudget weekend cannot be read \
         (spec.maintenanceWindows[1].timeZone: unknown IANA time zone \"Mars/Olympus\")"
    );
    assert_eq!(v.maintenance_window, Some(MaintenanceWindowStatus::default()));
    assert_eq!(parse_window_duration("90m").map(|d| d.as_secs()), Ok(5400));
}

fn alert(name: &str, severity: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("alertname".to_owned(), name.to_owned()), ("severity".to_owned(), severity.to_owned())])
}

fn gated(max_unhealthy: Option<IntOrString>, matchers: &[&str], ignore: &[&str]) -> CompiledGates {
    let mut s = spec(vec![]);
    s.health_gate = Some(HealthGate {
        max_unhealthy,
        alerts: (!matchers.is_empty()).then(|| AlertGate {
            matchers: matchers.iter().map(|m| (*m).to_owned()).collect(),
            ignore: ignore.iter().map(|m| (*m).to_owned()).collect(),
        }),
    });
    CompiledGates::compile("general", &s)
}

#[test]
fn matching_firing_alerts_close_the_gate_and_an_unread_prometheus_too() {
    let g = gated(None, &[r#"{severity="critical"}"#], &[r#"{alertname="Watchdog"}"#]);
    let now = ts("2026-11-26T12:00:00Z");
    let firing = |alerts: Vec<BTreeMap<String, String>>| g.evaluate(&[], &AlertsView::Firing(alerts), now);
    assert!(firing(vec![alert("Watchdog", "critical"), alert("CPUThrottling", "info")]).open());
    let v = firing(vec![alert("NodeDown", "critical"), alert("Watchdog", "critical"), alert("DiskFull", "critical")]);
    assert_eq!(v.closed.len(), 1);
    assert_eq!(v.closed[0].reason, GateReason::AlertsFiring);
    assert_eq!(v.closed[0].message, "NodeDisruptionBudget general holds while alerts fire: DiskFull and NodeDown");
    let many = (0..8).map(|i| alert(&format!("A{i}"), "critical")).collect();
    assert!(firing(many).closed[0].message.ends_with("alerts fire: A0, A1, A2, A3, A4 and 3 more"));
    let v = g.evaluate(&[], &AlertsView::NotConfigured, now);
    assert_eq!(
        v.closed[0].message,
        "NodeDisruptionBudget general holds while alerts cannot be read: the controller has no --prometheus-url"
    );
    let v = g.evaluate(&[], &AlertsView::Failed("timed out after 5s".into()), now);
    assert_eq!(
        v.closed[0].message,
        "NodeDisruptionBudget general holds while alerts cannot be read: timed out after 5s"
    );
    assert!(gated(Some(IntOrString::Int(1)), &[], &[]).evaluate(&[], &AlertsView::NotConfigured, now).open());
    let bad = gated(None, &[r#"{severity="critical"}"#, "{severity=critical}"], &[]);
    let v = bad.evaluate(&[], &AlertsView::Firing(vec![]), now);
    assert_eq!(
        v.closed[0].message,
        "NodeDisruptionBudget general holds while its alert matchers cannot be read \
         (spec.healthGate.alerts.matchers[1]: at character 11: expected a double-quoted value, found 'c')"
    );
    let errs = alert_gate_errors(&AlertGate { matchers: vec![], ignore: vec!["{".into()] });
    assert_eq!(errs.len(), 2);
    assert_eq!(errs[0], AlertGateError::NoMatchers);
    assert!(matches!(&errs[1], AlertGateError::Entry { list: AlertList::Ignore, index: 0, .. }));
}

#[test]
fn too_many_unhealthy_nodes_close_the_gate() {
    let node = |ready: bool, held: bool| GateNode { ready, held };
    let nodes = [node(true, false), node(false, false), node(false, true), node(false, false), node(true, false)];
    let now = ts("2026-11-26T12:00:00Z");
    let quiet = AlertsView::NotConfigured;
    assert!(gated(Some(IntOrString::Int(2)), &[], &[]).evaluate(&nodes, &quiet, now).open(), "2 of 5 unhealthy");
    let v = gated(Some(IntOrString::Int(1)), &[], &[]).evaluate(&nodes, &quiet, now);
    assert_eq!(v.closed[0].reason, GateReason::TooManyUnhealthyNodes);
    assert_eq!(
        v.closed[0].message,
        "NodeDisruptionBudget general holds while 2 of 5 selected nodes are unhealthy (maxUnhealthy allows 1)"
    );
    let percent = |p: &str| gated(Some(IntOrString::String(p.into())), &[], &[]).evaluate(&nodes, &quiet, now);
    assert!(!percent("39%").open(), "39% of 5 is 1");
    assert!(percent("40%").open());
    let bad = gated(Some(IntOrString::Int(-1)), &[], &[]).evaluate(&[], &quiet, now);
    assert!(bad.closed[0].message.contains("its maxUnhealthy cannot be read (spec.healthGate.maxUnhealthy: -1"));
}

#[test]
fn every_closed_gate_is_reported_in_order() {
    let mut b = spec(vec![window("0 22 * * SAT", "10h", Some("Europe/Berlin"))]);
    b.blackouts = vec![blackout("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", Some("migration"))];
    b.pause_requests = vec![
        PauseRequest { name: "ops".into(), reason: Some("kernel regression".into()) },
        PauseRequest { name: "team-b".into(), reason: None },
    ];
    b.health_gate = Some(HealthGate {
        max_unhealthy: Some(IntOrString::Int(0)),
        alerts: Some(AlertGate { matchers: vec![r#"{severity=~"critical|page"}"#.into()], ignore: vec![] }),
    });
    let g = CompiledGates::compile("weekend", &b);
    let nodes = [GateNode { ready: false, held: false }];
    let v = g.evaluate(&nodes, &AlertsView::Firing(vec![alert("NodeDown", "page")]), ts("2026-11-26T12:00:00Z"));
    let reasons: Vec<GateReason> = v.closed.iter().map(|c| c.reason).collect();
    assert_eq!(reasons, GateReason::ALL);
    assert_eq!(v.closed[0].message, "NodeDisruptionBudget weekend is paused by ops (kernel regression) and team-b");
    assert_eq!(state(&v), (false, None, s("2026-12-05T21:00:00Z")), "the next opening outside the blackout");
    assert_eq!(v.next_instant, Some(ts("2026-11-28T21:00:00Z")), "the window edge, before the blackout's end");
}

#[test]
fn a_budget_that_starts_reading_alerts_is_closed_until_a_read_made_after() {
    let mut s = spec(vec![]);
    let gate = AlertGate { matchers: vec![r#"{severity="critical"}"#.to_owned()], ignore: vec![] };
    s.health_gate = Some(HealthGate { max_unhealthy: None, alerts: Some(gate.clone()) });
    let now = ts("2026-11-26T12:00:00Z");
    let quiet = AlertsView::Firing(vec![]);
    let evaluate = |read_for: BTreeMap<String, AlertGate>| {
        let read = AlertsRead { view: quiet.clone(), read_for: Some(read_for) };
        CompiledGates::compile("general", &s).unread_alerts(&s, &read).evaluate(&[], &read.view, now)
    };
    let before = evaluate(BTreeMap::new());
    assert_eq!(before.closed[0].reason, GateReason::AlertsFiring, "new: closed until read");
    assert!(before.closed[0].message.contains("not read yet"), "{:?}", before.closed);
    let changed = AlertGate { matchers: vec![r#"{severity="page"}"#.to_owned()], ignore: vec![] };
    assert!(!evaluate(BTreeMap::from([("general".to_owned(), changed)])).open(), "changed matchers: closed");
    assert!(evaluate(BTreeMap::from([("general".to_owned(), gate)])).open(), "read after it was set: open");
}

/// SPEC 4.7: the edges a forecast's timeline crosses, in the windows' zone across the
/// autumn change (Berlin leaves CEST on 2026-10-25 at 01:00 UTC): Saturday 22:00 is 20:00
/// UTC before it and 21:00 UTC after; an 8h window is 8 elapsed hours either way. Blackouts
/// that touch are one span, and a window opening inside a blackout is still an edge.
#[test]
fn edges_follow_the_windows_in_their_zone_and_the_blackouts() {
    let mut weekend = spec(vec![window("0 22 * * 5,6", "8h", Some("Europe/Berlin"))]);
    weekend.blackouts = vec![
        blackout("2026-10-31T00:00:00Z", "2026-10-31T12:00:00Z", Some("audit")),
        blackout("2026-10-31T12:00:00Z", "2026-11-01T00:00:00Z", None),
    ];
    let gates = CompiledGates::compile("weekend", &weekend);
    let edges = gates.edges(ts("2026-10-23T00:00:00Z"), ts("2026-11-01T00:00:00Z"), 100);
    let got: Vec<(String, &str, EdgeKind)> =
        edges.iter().map(|e| (e.at.to_string(), e.local.as_str(), e.kind)).collect();
    use EdgeKind::*;
    #[rustfmt::skip]
    let want = [
        ("2026-10-23T20:00:00Z", "2026-10-23T22:00:00+02:00", WindowOpens),
        ("2026-10-24T04:00:00Z", "2026-10-24T06:00:00+02:00", WindowCloses),
        ("2026-10-24T20:00:00Z", "2026-10-24T22:00:00+02:00", WindowOpens),
        ("2026-10-25T04:00:00Z", "2026-10-25T05:00:00+01:00", WindowCloses),
        ("2026-10-30T21:00:00Z", "2026-10-30T22:00:00+01:00", WindowOpens),
        ("2026-10-31T00:00:00Z", "2026-10-31T01:00:00+01:00", BlackoutStarts),
        ("2026-10-31T05:00:00Z", "2026-10-31T06:00:00+01:00", WindowCloses),
        ("2026-10-31T21:00:00Z", "2026-10-31T22:00:00+01:00", WindowOpens),
        ("2026-11-01T00:00:00Z", "2026-11-01T01:00:00+01:00", BlackoutEnds),
    ];
    let want: Vec<(String, &str, EdgeKind)> = want.iter().map(|(a, l, k)| (a.to_string(), *l, *k)).collect();
    assert_eq!(got, want);
    assert_eq!(edges[5].reasons, ["audit"]);
    let inside: Vec<bool> = edges.iter().map(|e| e.in_blackout).collect();
    assert_eq!(
        inside,
        [false, false, false, false, false, false, true, true, false],
        "closes and opens in the blackout"
    );
    assert_eq!(gates.edges(ts("2026-10-23T00:00:00Z"), ts("2026-11-01T00:00:00Z"), 2).len(), 2, "at most the limit");
    let next = gates.next_blackout_start(ts("2026-10-23T00:00:00Z")).unwrap();
    assert_eq!((next.at, next.reasons.as_slice()), (ts("2026-10-31T00:00:00Z"), &["audit".to_owned()][..]));
    assert_eq!(gates.next_blackout_start(ts("2026-10-31T00:00:00Z")), None, "the touching one is the same span");
}
