//! Maintenance windows (`spec.maintenanceWindows[]`, SPEC 4.6): a 5-field cron schedule read
//! in an IANA zone, open for a duration after each firing.
//!
//! The schedule is croner's (Vixie/CronJob semantics: day-of-month and day-of-week ORed when
//! both are restricted) evaluated on jiff's zoned times, which places a firing that daylight
//! saving skips at the end of the gap and fires a fixed time in a repeated hour once (at its
//! first occurrence). A window is open at `t` when its schedule last fired at `f <= t` and
//! `t < f + duration` (Karpenter's rule).

use super::blackout::Blackouts;
use crate::api::{DrainTimeoutError, MaintenanceWindow, parse_drain_timeout};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

/// Zone of a window without `timeZone`.
pub const DEFAULT_ZONE: &str = "UTC";

/// How many edges the union of overlapping windows is followed through before giving up on
/// its end. Each step searches every window's schedule once; windows that never close (hourly
/// firings open for 2h) would otherwise be followed for ever. The controller then wakes at
/// the furthest end reached and looks again.
const MAX_UNION_STEPS: usize = 64;

/// How many blackouts and window firings the search for the next opening passes through.
const MAX_OPENING_STEPS: usize = 200;

const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Why a `schedule` was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Not exactly five fields.
    #[error("must have 5 fields (minute hour day-of-month month day-of-week), found {0}")]
    FieldCount(usize),
    /// A Quartz or nickname feature CronJob's standard parser does not have here.
    #[error("{0:?} is not supported (no seconds, L, W, #, ? or @ nicknames)")]
    Unsupported(String),
    /// The cron parser refused the pattern (a value out of range, a bad range or step).
    #[error("{0}")]
    Invalid(String),
    /// The pattern is valid but names no existing time (`0 0 30 2 *`).
    #[error("never fires")]
    NeverFires,
}

/// A parsed 5-field cron schedule.
#[derive(Clone, Debug)]
pub(super) struct Schedule(Cron);

impl Schedule {
    /// Parses `text`: minute hour day-of-month month day-of-week, each `*`, numbers, ranges,
    /// lists and steps; month and weekday names (`JAN`, `MON`) allowed.
    ///
    /// # Errors
    /// [`ScheduleError`]: not five fields, `L`/`W`/`#`/`?`/`@`, a value the parser refuses, or
    /// a schedule that never fires.
    pub fn parse(text: &str) -> Result<Self, ScheduleError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ScheduleError::FieldCount(fields.len()));
        }
        for (i, field) in fields.iter().enumerate() {
            let mut plain = field.to_ascii_uppercase();
            if i == 4 {
                for day in DAY_NAMES {
                    plain = plain.replace(day, "");
                }
            }
            let quartz = |c: char| matches!(c, '?' | '#' | '@') || ((i == 2 || i == 4) && c.is_ascii_alphabetic());
            if plain.chars().any(quartz) {
                return Err(ScheduleError::Unsupported((*field).to_owned()));
            }
        }
        // CronJob's parser (robfig/cron) takes a day field starting with `*` (`*/2`) as
        // unrestricted: then a day must match both fields. croner does that only for a bare `*`.
        let starred = |f: &str| f.starts_with('*') && f != "*";
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .dom_and_dow(starred(fields[2]) || starred(fields[4]))
            .build();
        let cron = parser.parse(text).map_err(|e| ScheduleError::Invalid(e.to_string()))?;
        // Every pattern that fires at all fires within eight years (29 February of a leap
        // year, which may also need a given weekday); one that does not, never fires.
        let start = Timestamp::UNIX_EPOCH.to_zoned(TimeZone::UTC);
        let first = cron.find_next_occurrence(&start, true).map_err(|_| ScheduleError::NeverFires)?;
        if first.year() > 1970 + 28 {
            return Err(ScheduleError::NeverFires);
        }
        Ok(Schedule(cron))
    }
}

/// Parses an IANA zone name (`Europe/Berlin`; `UTC`) with the system's time zone database.
///
/// # Errors
/// The reason, for a person, when the database does not know the name.
fn parse_time_zone(name: &str) -> Result<TimeZone, String> {
    jiff::tz::db().get(name).map_err(|_| format!("unknown IANA time zone {name:?}"))
}

/// Parses a window's `duration`: a Go duration greater than zero, as `drainTimeout`.
///
/// # Errors
/// [`DrainTimeoutError`] for text Go would not read and for zero.
pub(super) fn parse_window_duration(text: &str) -> Result<SignedDuration, DrainTimeoutError> {
    let d = parse_drain_timeout(text)?;
    SignedDuration::try_from(d).map_err(|_| DrainTimeoutError::Unreadable)
}

/// Which field of a window was refused, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// `schedule`.
    #[error("{0}")]
    Schedule(ScheduleError),
    /// `duration`.
    #[error("{0}")]
    Duration(DrainTimeoutError),
    /// `timeZone`.
    #[error("{0}")]
    TimeZone(String),
}

impl WindowError {
    /// The field's JSON name: `schedule`, `duration` or `timeZone`.
    pub fn field(&self) -> &'static str {
        match self {
            WindowError::Schedule(_) => "schedule",
            WindowError::Duration(_) => "duration",
            WindowError::TimeZone(_) => "timeZone",
        }
    }
}

/// One compiled maintenance window.
#[derive(Clone, Debug)]
pub struct Window {
    schedule: Schedule,
    duration: SignedDuration,
    zone: TimeZone,
}

impl Window {
    /// Compiles a window: schedule, duration and zone (default `UTC`).
    ///
    /// # Errors
    /// Every field that does not parse, in field order (`schedule`, `duration`, `timeZone`).
    pub fn compile(w: &MaintenanceWindow) -> Result<Self, Vec<WindowError>> {
        let schedule = Schedule::parse(&w.schedule).map_err(WindowError::Schedule);
        let duration = parse_window_duration(&w.duration).map_err(WindowError::Duration);
        let zone = parse_time_zone(w.time_zone.as_deref().unwrap_or(DEFAULT_ZONE)).map_err(WindowError::TimeZone);
        match (schedule, duration, zone) {
            (Ok(schedule), Ok(duration), Ok(zone)) => Ok(Window { schedule, duration, zone }),
            (s, d, z) => Err([s.err(), d.err(), z.err()].into_iter().flatten().collect()),
        }
    }

    fn zoned(&self, at: Timestamp) -> Zoned {
        at.to_zoned(self.zone.clone())
    }

    /// The last firing at or before `at`.
    fn last_fire(&self, at: Timestamp) -> Option<Timestamp> {
        self.schedule.0.find_previous_occurrence(&self.zoned(at), true).ok().map(|z| z.timestamp())
    }

    /// The first firing after `at`.
    fn next_fire(&self, at: Timestamp) -> Option<Timestamp> {
        self.schedule.0.find_next_occurrence(&self.zoned(at), false).ok().map(|z| z.timestamp())
    }

    fn end(&self, fired: Timestamp) -> Timestamp {
        fired.checked_add(self.duration).unwrap_or(Timestamp::MAX)
    }

    /// When the opening that covers `at` ends, if one does.
    fn open_until(&self, at: Timestamp) -> Option<Timestamp> {
        self.last_fire(at).map(|f| self.end(f)).filter(|end| *end > at)
    }

    /// `at` shown in the window's zone, RFC 3339 (`2026-11-28T22:00:00+01:00`).
    pub(super) fn show(&self, at: Timestamp) -> String {
        let z = self.zoned(at);
        z.timestamp().display_with_offset(z.offset()).to_string()
    }
}

/// The windows of a budget at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WindowState {
    /// Some window is open.
    pub open: bool,
    /// While open: the end of the union of the open windows, when found.
    pub closes_at: Option<Timestamp>,
    /// While closed: the next instant a window is open outside every blackout, and the index
    /// of that window.
    pub next_opens_at: Option<(Timestamp, usize)>,
    /// When the open/closed state next changes (blackouts aside).
    pub next_edge: Option<Timestamp>,
}

/// Evaluates `windows` (at least one) at `now`.
pub(super) fn evaluate(windows: &[Window], blackouts: &Blackouts, now: Timestamp) -> WindowState {
    let ends = windows.iter().filter_map(|w| w.open_until(now)).max();
    if let Some(mut end) = ends {
        for _ in 0..MAX_UNION_STEPS {
            // A window firing at or before `end` whose opening outlasts it continues the union.
            let Some(further) = windows.iter().filter_map(|w| w.open_until(end)).max() else {
                return WindowState { open: true, closes_at: Some(end), next_opens_at: None, next_edge: Some(end) };
            };
            end = further;
        }
        // No end found within the steps: wake at the furthest point reached and look again.
        return WindowState { open: true, closes_at: None, next_opens_at: None, next_edge: Some(end) };
    }
    let next_fire =
        |at: Timestamp| windows.iter().enumerate().filter_map(|(i, w)| w.next_fire(at).map(|t| (t, i))).min();
    let first = next_fire(now);
    let mut candidate = first;
    let mut opening = None;
    for _ in 0..MAX_OPENING_STEPS {
        let Some((at, i)) = candidate else { break };
        let Some(blackout_end) = blackouts.union_end(at) else {
            opening = Some((at, i));
            break;
        };
        let open_then = windows.iter().position(|w| w.open_until(blackout_end).is_some());
        if let Some(j) = open_then {
            opening = Some((blackout_end, j));
            break;
        }
        candidate = next_fire(blackout_end);
    }
    WindowState { open: false, closes_at: None, next_opens_at: opening, next_edge: first.map(|(t, _)| t) }
}
