//! Properties of SPEC 4.7's forecast over random pools, rolling limits, budget counts, node
//! durations, blackouts and instants over 2026-2027 (four daylight saving changes), with the
//! worked example's windows (Friday and Saturday 22:00 Berlin time) of random length:
//! - the completion is monotone in the node duration;
//! - no node starts outside an open window, so none before the next window opens;
//! - no node starts inside a blackout (a node that started before a blackout runs on
//!   through it: SPEC 4.6 lets a started node finish, and the forecast says so by listing
//!   the blackout's start among the edges its timeline crosses);
//! - never more nodes held than `maxUnavailable` and the budget's count allow.
//!
//! The window is checked against an oracle written from the schedule's meaning (the local
//! date's weekday and 22:00 on Berlin's clock, open for the duration's elapsed hours), not
//! with the gates' code the forecast runs.

use super::tests::{blackout, budget, pool, rolling, weekend_nights};
use super::*;
use crate::api::{MaintenanceWindow, NodeDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::civil::Weekday;
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{Span, ToSpan};
use proptest::prelude::*;

/// The Friday and Saturday 22:00 Berlin firings within two days before `t` and a week after.
fn firings(t: Timestamp) -> Vec<Timestamp> {
    let berlin = TimeZone::get("Europe/Berlin").unwrap();
    let today = t.to_zoned(berlin.clone()).date();
    (-2i64..=8)
        .filter_map(|k| today.checked_add(Span::new().days(k)).ok())
        .filter(|d| matches!(d.weekday(), Weekday::Friday | Weekday::Saturday))
        .map(|d| d.at(22, 0, 0, 0).to_zoned(berlin.clone()).unwrap().timestamp())
        .collect()
}

fn open(t: Timestamp, hours: i64) -> bool {
    firings(t).into_iter().any(|f| f <= t && t < f.checked_add(hours.hours()).unwrap())
}

fn next_opening(t: Timestamp) -> Timestamp {
    firings(t).into_iter().filter(|f| *f > t).min().unwrap()
}

#[derive(Clone, Debug)]
struct Case {
    nodes: usize,
    max: i32,
    count: Option<i32>,
    window_hours: i64,
    minutes: u64,
    more_minutes: u64,
    now: i64,
    blackouts: Vec<(i64, i64)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1usize..=8,
        1i32..=3,
        prop::option::of(1i32..=3),
        1i64..=12,
        10u64..1500,
        0u64..1500,
        // 2026-01-01 to 2027-12-31.
        1_767_225_600i64..1_830_211_200,
        prop::collection::vec((0i64..1500, 1i64..500), 0..=2),
    )
        .prop_map(|(nodes, max, count, window_hours, minutes, more_minutes, now, blackouts)| Case {
            nodes,
            max,
            count,
            window_hours,
            minutes,
            more_minutes,
            now,
            blackouts,
        })
}

impl Case {
    fn now(&self) -> Timestamp {
        Timestamp::from_second(self.now).unwrap()
    }

    /// The blackouts as (start, end).
    fn spans(&self) -> Vec<(Timestamp, Timestamp)> {
        let at = |h: i64| self.now().checked_add(h.hours()).unwrap();
        self.blackouts.iter().map(|&(from, len)| (at(from), at(from + len))).collect()
    }

    fn forecast(&self, minutes: u64) -> Forecast {
        let spec = NodeDisruptionBudgetSpec {
            max_unavailable: self.count.map(IntOrString::Int),
            maintenance_windows: vec![MaintenanceWindow {
                duration: format!("{}h", self.window_hours),
                ..weekend_nights()
            }],
            blackouts: self.spans().iter().map(|(s, e)| blackout(&s.to_string(), &e.to_string(), "freeze")).collect(),
            ..Default::default()
        };
        let input = ForecastInput {
            request: rolling(self.nodes, Some(self.max)),
            facts: BTreeMap::new(),
            nodes: pool(self.nodes),
            budgets: vec![Cow::Owned(budget(self.nodes, spec))],
            basis: Basis::new(&[], Some(Duration::from_secs(minutes * 60))),
            now: self.now(),
        };
        forecast(&input)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn forecasts_follow_windows_blackouts_and_counts(c in case()) {
        let shorter = c.forecast(c.minutes);
        let longer = c.forecast(c.minutes + c.more_minutes);
        let done = |f: &Forecast| f.completion_time.unwrap_or(Timestamp::MAX);
        prop_assert!(done(&shorter) <= done(&longer), "{:?} then {:?}", shorter.completion_time, longer.completion_time);
        let limit = usize::try_from(c.max.min(c.count.unwrap_or(i32::MAX))).unwrap();
        for f in [&shorter, &longer] {
            let timeline: Vec<(Timestamp, Timestamp)> =
                f.nodes.iter().filter_map(|n| Some((n.start?, n.release?))).collect();
            for &(start, _) in &timeline {
                prop_assert!(open(start, c.window_hours), "started at {start} outside the windows");
                if !open(c.now(), c.window_hours) {
                    prop_assert!(start >= next_opening(c.now()), "started at {start} before the next window");
                }
                for (b_start, b_end) in c.spans() {
                    prop_assert!(!(b_start <= start && start < b_end), "started at {start} in a blackout");
                }
                let held = timeline.iter().filter(|(s, r)| *s <= start && start < *r).count();
                prop_assert!(held <= limit, "{held} held at {start}, at most {limit}");
            }
        }
    }
}
