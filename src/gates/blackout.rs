//! Blackouts (`spec.blackouts[]`, SPEC 4.6): spans `[start, end)` during which nothing
//! starts, windows or not.

use crate::api::Blackout;
use jiff::Timestamp;

/// One span, as read from the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Span {
    start: Timestamp,
    end: Timestamp,
    reason: Option<String>,
}

/// The blackouts of a budget. One whose end is not after its start (admission refuses it)
/// covers no instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Blackouts(Vec<Span>);

/// What the blackouts say at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct BlackoutState {
    /// The end of the union of the blackouts covering now and those overlapping them.
    pub until: Timestamp,
    /// The reasons of the blackouts covering now, in spec order (unset ones left out).
    pub reasons: Vec<String>,
}

impl Blackouts {
    /// Reads `spec.blackouts`.
    pub fn new(spec: &[Blackout]) -> Self {
        Blackouts(
            spec.iter()
                .filter(|b| b.end.0 > b.start.0)
                .map(|b| Span { start: b.start.0, end: b.end.0, reason: b.reason.clone() })
                .collect(),
        )
    }

    fn covering(&self, at: Timestamp) -> impl Iterator<Item = &Span> {
        self.0.iter().filter(move |s| s.start <= at && at < s.end)
    }

    /// The end of the union of blackouts that covers `at`; `None` when none covers it.
    pub fn union_end(&self, at: Timestamp) -> Option<Timestamp> {
        let mut end = self.covering(at).map(|s| s.end).max()?;
        // Each pass moves `end` to a later span's end, so this stops after at most one pass
        // per span.
        while let Some(later) = self.covering(end).map(|s| s.end).max() {
            end = later;
        }
        Some(end)
    }

    /// The state at `now`; `None` when no blackout covers it.
    pub fn at(&self, now: Timestamp) -> Option<BlackoutState> {
        let until = self.union_end(now)?;
        let reasons = self.covering(now).filter_map(|s| s.reason.clone()).collect();
        Some(BlackoutState { until, reasons })
    }

    /// When the set of blackouts covering the time next changes after `now`: the first end of
    /// one covering `now` or the first start after `now`.
    pub fn next_edge(&self, now: Timestamp) -> Option<Timestamp> {
        let ends = self.covering(now).map(|s| s.end);
        let starts = self.0.iter().map(|s| s.start).filter(|s| *s > now);
        ends.chain(starts).min()
    }

    /// The first instant after `after` at which a blackout begins while none covered the
    /// instant before (a blackout that starts inside another is part of its union), with the
    /// reasons of the blackouts starting then (spec order, unset ones left out).
    pub fn next_start(&self, after: Timestamp) -> Option<(Timestamp, Vec<String>)> {
        // A blackout ending exactly where another starts makes one span with it.
        let begins = |at: Timestamp| !self.0.iter().any(|s| s.start < at && at <= s.end);
        let start = self.0.iter().map(|s| s.start).filter(|&s| s > after && begins(s)).min()?;
        let reasons = self.0.iter().filter(|s| s.start == start).filter_map(|s| s.reason.clone()).collect();
        Some((start, reasons))
    }
}
