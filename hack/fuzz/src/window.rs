//! The properties of a compiled maintenance window at one instant, shared by the
//! `window_schedule` and `window_zone` targets.

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use node_maintenance::api::{GateReason, MaintenanceWindow, NodeDisruptionBudgetSpec, parse_drain_timeout};
use node_maintenance::gates::{AlertsView, CompiledGates, Window};

/// Zones with the transitions that make clock readings hard: none (UTC), one hour at 02:00
/// (Berlin, New York), at midnight (Santiago, Havana), half an hour (Lord Howe), two hours
/// (Troll), 45-minute offsets (Chatham, Kathmandu), a skipped day (Apia, 2011), a zone
/// whose DST pauses every Ramadan (Casablanca).
pub const ZONES: [&str; 12] = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "America/Santiago",
    "America/Havana",
    "Australia/Lord_Howe",
    "Antarctica/Troll",
    "Pacific/Chatham",
    "Asia/Kathmandu",
    "Pacific/Apia",
    "Africa/Casablanca",
    "America/St_Johns",
];

/// Durations of a window: a minute to more than a week.
pub const DURATIONS: [&str; 6] = ["1m", "30m", "1h", "90m", "8h", "200h"];

/// An instant to evaluate at, within 1971-2099 (cron searches run on years there, and
/// `jiff` ends in 9999): a plain second, or one near a transition of the window's zone.
#[derive(Debug, Clone, Copy)]
pub enum At {
    /// Seconds since 1971, modulo the span to 2099.
    Plain(u32),
    /// The `nth` (0-7) transition of the zone after 1 January of 2000 + `year` (0-99), moved
    /// by `delta` seconds (-32768 to 32767).
    NearTransition { year: u8, nth: u8, delta: i16 },
}

impl At {
    /// Reads 6 bytes: the first's lowest bit picks the kind.
    pub fn from_bytes(b: &[u8]) -> At {
        let byte = |i: usize| b.get(i).copied().unwrap_or(0);
        if byte(0) & 1 == 0 {
            At::Plain(u32::from_le_bytes([byte(1), byte(2), byte(3), byte(4)]))
        } else {
            At::NearTransition { year: byte(1), nth: byte(2), delta: i16::from_le_bytes([byte(3), byte(4)]) }
        }
    }

    /// The instant in `zone`.
    pub fn instant(self, zone: &TimeZone) -> Timestamp {
        let from = Timestamp::from_second(31_536_000).expect("1971");
        let span = 4_070_908_800 - 31_536_000; // to 2099-01-01
        match self {
            At::Plain(s) => from.checked_add(SignedDuration::from_secs(i64::from(s) % span)).expect("in range"),
            At::NearTransition { year, nth, delta } => {
                let start =
                    jiff::civil::date(2000 + i16::from(year % 100), 1, 1).to_zoned(TimeZone::UTC).expect("a date");
                let t = zone
                    .following(start.timestamp())
                    .nth(usize::from(nth % 8))
                    .map_or(start.timestamp(), |t| t.timestamp());
                t.checked_add(SignedDuration::from_secs(i64::from(delta))).expect("in range")
            }
        }
    }
}

/// The gates of a budget whose only window is `spec`, compiled once for [`check`].
pub fn gates(spec: &MaintenanceWindow) -> CompiledGates {
    let budget = NodeDisruptionBudgetSpec { maintenance_windows: vec![spec.clone()], ..Default::default() };
    CompiledGates::compile("b", &budget)
}

/// Checks `w` (compiled from `spec`'s only window) and the `gates` of a budget with it at
/// `at`:
/// - the next firing after `at` exists and is after it; the last firing at or before it, if
///   any, is not after it;
/// - no firing is skipped: the next firing after the last one is the next one after `at`,
///   and the last firing at or before the next one is that one;
/// - the budget's verdict at `at` is consistent: an open window closes after `at`, a closed
///   one opens after `at`, and the next instant at which the verdict changes is after `at`.
pub fn check(w: &Window, spec: &MaintenanceWindow, gates: &CompiledGates, at: Timestamp) {
    let what = || format!("{spec:?} at {at}");
    let next = w.next_fire(at).unwrap_or_else(|| panic!("no firing after: {}", what()));
    assert!(next > at, "next firing {next} not after: {}", what());
    assert_eq!(w.last_fire(next), Some(next), "the next firing {next} is not its own last firing: {}", what());
    if let Some(last) = w.last_fire(at) {
        assert!(last <= at, "last firing {last} after: {}", what());
        assert_eq!(w.next_fire(last), Some(next), "a firing between {last} and {next}: {}", what());
    }
    if let Ok(before_next) = next.checked_sub(SignedDuration::from_nanos(1)) {
        assert_eq!(w.last_fire(before_next), w.last_fire(at), "a firing before {next}: {}", what());
    }

    let v = gates.evaluate(&[], &AlertsView::NotConfigured, at);
    let status = v.maintenance_window.clone().expect("a budget with a window reports it");
    let closed = v.closed.iter().any(|c| c.reason == GateReason::OutsideMaintenanceWindow);
    assert_eq!(status.open, !closed, "{}", what());
    if let Some(t) = &status.closes_at {
        assert!(status.open && t.0 > at, "closes at {}: {}", t.0, what());
    }
    if let Some(t) = &status.next_opens_at {
        assert!(!status.open && t.0 > at, "opens at {}: {}", t.0, what());
    }
    if let Some(t) = v.next_instant {
        assert!(t > at, "next instant {t}: {}", what());
    }
    // Open exactly when the last firing is less than a duration ago.
    let duration = parse_drain_timeout(&spec.duration).ok().and_then(|d| SignedDuration::try_from(d).ok());
    let duration = duration.expect("a compiled window's duration reads");
    let open = w.last_fire(at).is_some_and(|last| last.checked_add(duration).is_ok_and(|end| at < end));
    assert_eq!(status.open, open, "{}", what());
}
