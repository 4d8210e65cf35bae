//! SPEC 4.6 "Pods that finish" (`spec.waitForCompletion`) through the public [`plan`]
//! function: pods left to finish are not evicted while they run, hold back no plan entry,
//! keep the node from being drained until they are terminal, and are evicted after the
//! wait's timeout (the last one, under several maintenances).

use super::tests::{D, e, evicted, input, m_plan, maint, message, pod};
use super::*;
use crate::api::PodType;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;
use std::time::Duration;

const ST: PodType = PodType::Static;

fn job(name: &str, node: &str, priority: i32) -> PodView {
    PodView { owned_by_job: true, ..pod(name, node, D, priority) }
}

fn annotated(p: PodView) -> PodView {
    PodView { wait_annotated: true, ..p }
}

fn waiting(m: MaintenanceInput, selector: Option<LabelSelector>, timeout: Option<Duration>) -> MaintenanceInput {
    MaintenanceInput { wait_for_completion: Some(CompletionWait { pod_selector: selector, timeout }), ..m }
}

fn app(value: &str) -> LabelSelector {
    LabelSelector { match_labels: Some(BTreeMap::from([("app".into(), value.into())])), ..Default::default() }
}

fn left(out: &DrainDecision, node: &str) -> Vec<String> {
    let n = out.node(node);
    n.map(|n| n.waiting_for_completion.iter().map(|p| p.name.to_string()).collect()).unwrap_or_default()
}

fn minutes(m: i64) -> SignedDuration {
    SignedDuration::from_mins(m)
}

/// Node `one`, whose drain started at `start`, planned at `now`.
fn at(mut inp: PlannerInput, start: Timestamp, now: Timestamp) -> PlannerInput {
    inp.nodes = vec![NodeInput { name: "one".into(), drain_start: Some(start), ..NodeInput::default() }];
    inp.now = now;
    inp
}

fn t0() -> Timestamp {
    "2026-11-26T12:00:00Z".parse().unwrap_or_default()
}

#[test]
fn a_job_pod_is_not_evicted_and_holds_back_no_later_entry() {
    // Without the wait, the Job's pod (priority 0) holds the cursor at the first entry.
    let plain = maint("a", 0, &[e(D, 100)], &["one"]);
    let pods = vec![job("job", "one", 0), pod("web", "one", D, 500)];
    let out = plan(&input(vec![plain.clone()], pods.clone()));
    assert_eq!((evicted(&out, "one"), m_plan(&out, "a").drain_plan_index), (vec!["job".to_string()], 0));

    let m = waiting(plain, None, None);
    let out = plan(&input(vec![m.clone()], pods.clone()));
    assert_eq!(evicted(&out, "one"), ["web"], "the next entry's pod goes: the Job's pod holds nothing back");
    assert_eq!(m_plan(&out, "a").drain_plan_index, 1);
    assert_eq!(left(&out, "one"), ["job"]);
    assert_eq!(message(&out, "one"), "Draining");
    assert_eq!(m_plan(&out, "a").reason, DrainReason::Draining { limited_by: vec![] });
    assert_eq!(out.node("one").map(|n| n.pods_pending_eviction_request), Some(1), "the Job's pod is not pending");

    // Once the other pod is gone, only the Job's pod remains: the node waits, it is not drained.
    let running = vec![job("job", "one", 0)];
    let out = plan(&input(vec![m.clone()], running));
    assert!(evicted(&out, "one").is_empty());
    assert_eq!(message(&out, "one"), WAITING_FOR_COMPLETION);
    let a = m_plan(&out, "a");
    assert_eq!(
        (a.reason.clone(), a.drained, a.pods_waiting_for_completion),
        (DrainReason::WaitingForCompletion, false, 1)
    );
    assert_eq!(a.drain_message, WAITING_FOR_COMPLETION);
    assert_eq!(out.wait_deadline, None, "no timeout: no deadline to wake at");

    // Terminal (Succeeded or Failed) counts as gone: the node is drained.
    let finished = vec![PodView { terminal: true, ..job("job", "one", 0) }];
    let out = plan(&input(vec![m], finished));
    assert_eq!((message(&out, "one").as_str(), m_plan(&out, "a").drained), (DRAINED, true));
    assert!(left(&out, "one").is_empty());
}

#[test]
fn the_selector_replaces_job_ownership_and_the_annotation_adds_any_pod() {
    let pods = vec![
        PodView { labels: [("app", "batch")].into_iter().collect(), ..pod("labelled", "one", D, 0) },
        job("job", "one", 0),
        annotated(pod("marked", "one", D, 0)),
        pod("web", "one", D, 0),
    ];
    let by_selector = waiting(maint("a", 0, &[], &["one"]), Some(app("batch")), None);
    let out = plan(&input(vec![by_selector], pods.clone()));
    assert_eq!(left(&out, "one"), ["labelled", "marked"]);
    assert_eq!(evicted(&out, "one"), ["job", "web"], "with a selector, Job ownership alone is not waited for");

    let jobs = waiting(maint("a", 0, &[], &["one"]), None, None);
    let out = plan(&input(vec![jobs], pods.clone()));
    assert_eq!(left(&out, "one"), ["job", "marked"]);

    let out = plan(&input(vec![maint("a", 0, &[], &["one"])], pods));
    assert!(left(&out, "one").is_empty(), "without waitForCompletion the annotation does nothing");
    assert_eq!(evicted(&out, "one").len(), 4);
}

#[test]
fn pods_that_are_never_waited_for_keep_their_own_rule() {
    let m = waiting(maint("a", 0, &[], &["one"]), Some(app("x")), None);
    let stat = PodView { labels: [("app", "x")].into_iter().collect(), ..pod("mirror", "one", ST, 0) };
    let opted = PodView { opted_out: true, ..job("opted", "one", 0) };
    let out = plan(&input(vec![m], vec![stat, annotated(opted)]));
    assert!(left(&out, "one").is_empty(), "a static pod never finishes; an opted-out pod stays opted out");
    let blocked = out.node("one").map(|n| n.blocked.iter().map(|b| b.cause).collect::<Vec<_>>());
    assert_eq!(blocked, Some(vec![BlockedCause::StaticPod, BlockedCause::OptedOut]), "sorted by pod");
}

#[test]
fn after_the_timeout_the_pod_is_evicted_like_any_other() {
    let m = waiting(maint("a", 0, &[], &["one"]), None, Some(Duration::from_secs(600)));
    let pods = vec![job("job", "one", 0)];
    let deadline = t0() + minutes(10);

    let before = plan(&at(input(vec![m.clone()], pods.clone()), t0(), t0() + minutes(5)));
    assert!(evicted(&before, "one").is_empty());
    assert_eq!(m_plan(&before, "a").reason, DrainReason::WaitingForCompletion);
    assert_eq!(before.node("one").and_then(|n| n.wait_deadline), Some(deadline));
    assert_eq!(before.wait_deadline, Some(deadline), "the pass is planned again at the deadline");

    let after = plan(&at(input(vec![m.clone()], pods.clone()), t0(), deadline));
    assert_eq!(evicted(&after, "one"), ["job"]);
    assert!(left(&after, "one").is_empty());
    assert_eq!((after.wait_deadline, m_plan(&after, "a").pods_pending_eviction_request), (None, 1));

    // A node whose drain has not started runs no timeout yet.
    let mut unstarted = at(input(vec![m], pods), t0(), deadline);
    unstarted.nodes[0].drain_start = None;
    let out = plan(&unstarted);
    assert_eq!((left(&out, "one"), out.wait_deadline), (vec!["job".to_string()], None));
}

#[test]
fn under_several_maintenances_a_pod_waits_if_any_says_so_until_the_last_deadline() {
    let pods = vec![job("job", "one", 0)];
    let short = waiting(maint("a", 0, &[], &["one"]), None, Some(Duration::from_secs(600)));
    let long = waiting(maint("b", 1, &[], &["one"]), None, Some(Duration::from_secs(3600)));
    let plain = maint("c", 2, &[], &["one"]);

    let one_says_so = plan(&input(vec![plain.clone(), long.clone()], pods.clone()));
    assert_eq!(left(&one_says_so, "one"), ["job"]);
    assert_eq!(m_plan(&one_says_so, "c").reason, DrainReason::WaitingForCompletion);

    let both = || input(vec![short.clone(), long.clone(), plain.clone()], pods.clone());
    let between = plan(&at(both(), t0(), t0() + minutes(30)));
    assert_eq!(left(&between, "one"), ["job"], "past the first deadline, the second still holds");
    assert_eq!(between.wait_deadline, Some(t0() + minutes(60)));
    let first = plan(&at(both(), t0(), t0() + minutes(5)));
    assert_eq!(first.wait_deadline, Some(t0() + minutes(10)), "the earliest deadline ahead wakes the controller");
    let past = plan(&at(both(), t0(), t0() + minutes(60)));
    assert_eq!(evicted(&past, "one"), ["job"]);
}

#[test]
fn an_invalid_wait_selector_selects_no_pod_and_warns() {
    let bad = LabelSelector {
        match_expressions: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
            key: "app".into(),
            operator: "Near".into(),
            values: None,
        }]),
        ..Default::default()
    };
    let m = waiting(maint("a", 0, &[], &["one"]), Some(bad), None);
    let out = plan(&input(vec![m], vec![job("job", "one", 0), annotated(pod("marked", "one", D, 0))]));
    assert_eq!((left(&out, "one"), evicted(&out, "one")), (vec!["marked".to_string()], vec!["job".to_string()]));
    assert_eq!(out.warnings.len(), 1, "{:?}", out.warnings);
}
