//! Maintenance windows (`spec.maintenanceWindows[]`, SPEC 4.6): a 5-field cron schedule read
//! in an IANA zone, open for a duration after each firing.
//!
//! The schedule is croner's (Vixie/CronJob semantics: day-of-month and day-of-week ORed when
//! both are restricted), but croner only finds the zone's *clock readings* that match: it runs
//! on jiff's civil times, where daylight saving does not exist. Turning a reading into an
//! instant is done here, with SPEC 4.6's rule for every schedule: a reading in an hour that
//! daylight saving skips fires at the end of the gap (02:00 and 02:30 both at 03:00, once),
//! and a reading in a repeated hour fires once, at its first occurrence. croner's own zoned
//! search applies that rule only to schedules with one minute and one hour value; with
//! several (`0,30 2 * * *`, `*/15 * * * *`) it skips readings in the gap and fires twice in
//! the repeated hour, and it cannot be told otherwise.
//!
//! A window is open at `t` when its schedule last fired at `f <= t` and `t < f + duration`
//! (Karpenter's rule).

use super::blackout::Blackouts;
use crate::api::{DrainTimeoutError, MaintenanceWindow, parse_drain_timeout};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
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
            // CronJob's parser refuses an empty list element (`,`, `1,,2`); croner skips it,
            // so that `,` matched nothing and its search walked 31 million steps before
            // giving up (seconds of CPU per window in admission).
            if field.split(',').any(str::is_empty) {
                return Err(ScheduleError::Invalid(format!("{field:?} has an empty list element")));
            }
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

    /// The last firing at or before `at` (an instant; SPEC 4.6's daylight saving rule),
    /// `None` when the schedule has none the cron search reaches. Public for the fuzz targets
    /// (`hack/fuzz`), which check it against [`Window::next_fire`].
    pub fn last_fire(&self, at: Timestamp) -> Option<Timestamp> {
        let found = match self.clock_position(at) {
            ClockPosition::At(reading) => self.schedule.0.find_previous_occurrence(&reading, true),
            ClockPosition::BeforeRepeatEnd(end) => self.schedule.0.find_previous_occurrence(&end, false),
        };
        found.ok().and_then(|reading| self.instant_of(reading))
    }

    /// The first firing strictly after `at` (an instant; SPEC 4.6's daylight saving rule),
    /// `None` when the schedule has none the cron search reaches. Public for the fuzz targets
    /// (`hack/fuzz`), which check it against [`Window::last_fire`].
    pub fn next_fire(&self, at: Timestamp) -> Option<Timestamp> {
        let found = match self.clock_position(at) {
            ClockPosition::At(reading) => self.schedule.0.find_next_occurrence(&reading, false),
            ClockPosition::BeforeRepeatEnd(end) => self.schedule.0.find_next_occurrence(&end, true),
        };
        found.ok().and_then(|reading| self.instant_of(reading))
    }

    /// Where `at` sits on the zone's clock, for the cron search over clock readings.
    ///
    /// Readings map to instants in clock order ([`Window::instant_of`]), so the firings up to
    /// `at` are the readings up to `at`'s own, except during the second pass through a
    /// repeated range: every reading of that range has already fired (at its first pass), and
    /// none after it has; the search then starts from the end of the range.
    fn clock_position(&self, at: Timestamp) -> ClockPosition {
        let zoned = self.zoned(at);
        let reading = zoned.datetime();
        if let AmbiguousOffset::Fold { before, after } = self.zone.to_ambiguous_timestamp(reading).offset()
            && zoned.offset() == after
        {
            // The transition that started the second pass is the last one at or before `at`;
            // the repeated range ends at the reading it shows under the offset before it
            // (03:00 when Berlin's clocks go from 03:00 back to 02:00).
            let transition = at
                .checked_add(SignedDuration::from_nanos(1))
                .ok()
                .and_then(|after_at| self.zone.preceding(after_at).next());
            if let Some(t) = transition {
                return ClockPosition::BeforeRepeatEnd(before.to_datetime(t.timestamp()));
            }
        }
        ClockPosition::At(reading)
    }

    /// The instant at which the clock reading `reading` fires in the zone (SPEC 4.6): the one
    /// instant showing it; in a repeated range the first; in a gap that daylight saving skips
    /// the end of the gap.
    ///
    /// Later readings never map to earlier instants, and every reading of a gap maps to the
    /// instant of the reading that ends it. A search that starts after `at`'s own reading
    /// therefore finds each firing instant once: after the gap's end, the clock shows a
    /// reading past every reading of the gap.
    ///
    /// `None` only past jiff's range of instants.
    fn instant_of(&self, reading: DateTime) -> Option<Timestamp> {
        match self.zone.to_ambiguous_timestamp(reading).offset() {
            AmbiguousOffset::Unambiguous { offset } => offset.to_timestamp(reading).ok(),
            AmbiguousOffset::Fold { before, .. } => before.to_timestamp(reading).ok(),
            AmbiguousOffset::Gap { after, .. } => {
                // Read with the offset after the gap, the reading is an instant before the
                // transition that opened the gap (jiff's "compatible" choice would instead
                // shift it by the gap's length: 02:30 to 03:30, not the gap's end).
                let before_gap = after.to_timestamp(reading).ok()?;
                self.zone.following(before_gap).next().map(|t| t.timestamp())
            }
        }
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

/// Where an instant sits on its zone's clock ([`Window::clock_position`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClockPosition {
    /// At this reading, the only one or the first pass of a repeated range.
    At(DateTime),
    /// In the second pass of a repeated range that ends (exclusive) at this reading.
    BeforeRepeatEnd(DateTime),
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

#[cfg(test)]
mod tests {
    //! SPEC 4.6's daylight saving rule for every schedule, around both 2026 transitions of
    //! two zones: Berlin (CET/CEST; 2026-03-29 02:00 -> 03:00, 2026-10-25 03:00 -> 02:00,
    //! both at 01:00 UTC) and New York (EST/EDT; 2026-03-08 02:00 -> 03:00 at 07:00 UTC,
    //! 2026-11-01 02:00 -> 01:00 at 06:00 UTC).

    use super::*;

    const BERLIN: &str = "Europe/Berlin";
    const NEW_YORK: &str = "America/New_York";

    fn window(schedule: &str, zone: &str) -> Window {
        let w = MaintenanceWindow { schedule: schedule.into(), duration: "1m".into(), time_zone: Some(zone.into()) };
        Window::compile(&w).unwrap()
    }

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// `next_fire` iterated from `from`: every firing, in order, each once.
    #[test]
    fn next_fire_lists_each_firing_once_around_the_transitions() {
        #[rustfmt::skip]
        let table: &[(&str, &str, &str, &[&str])] = &[
            // Spring, Berlin: 02:00-02:59 do not exist; they fire at 03:00 CEST (01:00 UTC).
            (BERLIN, "0,30 2 * * *", "2026-03-28T00:00:00Z",
             &["2026-03-28T01:00:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z", "2026-03-30T00:30:00Z"]),
            (BERLIN, "30 2 * * *", "2026-03-28T00:00:00Z",
             &["2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"]),
            (BERLIN, "*/15 * * * *", "2026-03-29T00:30:00Z",
             &["2026-03-29T00:45:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z", "2026-03-29T01:30:00Z"]),
            (BERLIN, "0 * * * *", "2026-03-28T23:30:00Z",
             &["2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z", "2026-03-29T03:00:00Z"]),
            // Spring, New York: 02:00-02:59 do not exist; they fire at 03:00 EDT (07:00 UTC).
            (NEW_YORK, "0,30 2 * * *", "2026-03-07T00:00:00Z",
             &["2026-03-07T07:00:00Z", "2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z", "2026-03-09T06:30:00Z"]),
            (NEW_YORK, "30 2 * * *", "2026-03-07T00:00:00Z",
             &["2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
            (NEW_YORK, "*/15 * * * *", "2026-03-08T06:30:00Z",
             &["2026-03-08T06:45:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:15:00Z", "2026-03-08T07:30:00Z"]),
            (NEW_YORK, "0 * * * *", "2026-03-08T05:30:00Z",
             &["2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"]),
            // Autumn, Berlin: 02:00-02:59 happen twice; they fire on the first pass (CEST).
            (BERLIN, "0,30 2 * * *", "2026-10-23T23:59:00Z",
             &["2026-10-24T00:00:00Z", "2026-10-24T00:30:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:00:00Z", "2026-10-26T01:30:00Z"]),
            (BERLIN, "30 2 * * *", "2026-10-24T00:00:00Z",
             &["2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"]),
            (BERLIN, "*/15 * * * *", "2026-10-24T23:30:00Z",
             &["2026-10-24T23:45:00Z", "2026-10-25T00:00:00Z", "2026-10-25T00:15:00Z", "2026-10-25T00:30:00Z", "2026-10-25T00:45:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:15:00Z"]),
            (BERLIN, "0 * * * *", "2026-10-24T22:30:00Z",
             &["2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"]),
            // Autumn, New York: 01:00-01:59 happen twice; they fire on the first pass (EDT).
            (NEW_YORK, "0,30 2 * * *", "2026-10-31T00:00:00Z",
             &["2026-10-31T06:00:00Z", "2026-10-31T06:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:00:00Z"]),
            (NEW_YORK, "30 2 * * *", "2026-10-31T00:00:00Z",
             &["2026-10-31T06:30:00Z", "2026-11-01T07:30:00Z", "2026-11-02T07:30:00Z"]),
            (NEW_YORK, "*/15 * * * *", "2026-11-01T04:30:00Z",
             &["2026-11-01T04:45:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:15:00Z", "2026-11-01T05:30:00Z", "2026-11-01T05:45:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:15:00Z"]),
            (NEW_YORK, "0 * * * *", "2026-11-01T03:30:00Z",
             &["2026-11-01T04:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"]),
            // From inside the second pass: the repeated readings have fired already.
            (BERLIN, "*/15 * * * *", "2026-10-25T01:00:00Z", &["2026-10-25T02:00:00Z"]),
            (BERLIN, "*/15 * * * *", "2026-10-25T01:20:00Z", &["2026-10-25T02:00:00Z"]),
            (BERLIN, "0,30 2 * * *", "2026-10-25T01:00:00Z", &["2026-10-26T01:00:00Z"]),
            (NEW_YORK, "0 * * * *", "2026-11-01T06:00:00Z", &["2026-11-01T07:00:00Z"]),
            (NEW_YORK, "*/15 * * * *", "2026-11-01T06:50:00Z", &["2026-11-01T07:00:00Z"]),
            // From inside the spring gap's collapse: the end of the gap is not fired twice.
            (BERLIN, "0,30 2 * * *", "2026-03-29T01:00:00Z", &["2026-03-30T00:00:00Z"]),
            (NEW_YORK, "*/15 * * * *", "2026-03-08T07:00:00Z", &["2026-03-08T07:15:00Z"]),
        ];
        for (zone, schedule, from, expected) in table {
            let w = window(schedule, zone);
            let mut at = ts(from);
            let mut fired = Vec::new();
            for _ in 0..expected.len() {
                at = w.next_fire(at).unwrap_or_else(|| panic!("{zone} {schedule}: no firing after {at}"));
                fired.push(at.to_string());
            }
            assert_eq!(&fired, expected, "{zone} {schedule:?} from {from}");
        }
    }

    /// `last_fire` at chosen instants: the firing at or before each.
    #[test]
    fn last_fire_follows_the_rule_around_the_transitions() {
        #[rustfmt::skip]
        let table: &[(&str, &str, &str, &str)] = &[
            // Spring, Berlin (gap 02:00-03:00 local, ends 01:00 UTC).
            (BERLIN, "0,30 2 * * *", "2026-03-29T00:59:59Z", "2026-03-28T01:30:00Z"),
            (BERLIN, "0,30 2 * * *", "2026-03-29T01:00:00Z", "2026-03-29T01:00:00Z"),
            (BERLIN, "0,30 2 * * *", "2026-03-29T01:29:00Z", "2026-03-29T01:00:00Z"),
            (BERLIN, "30 2 * * *", "2026-03-29T01:05:00Z", "2026-03-29T01:00:00Z"),
            (BERLIN, "*/15 * * * *", "2026-03-29T00:59:00Z", "2026-03-29T00:45:00Z"),
            (BERLIN, "*/15 * * * *", "2026-03-29T01:14:00Z", "2026-03-29T01:00:00Z"),
            (BERLIN, "0 * * * *", "2026-03-29T00:59:00Z", "2026-03-29T00:00:00Z"),
            (BERLIN, "0 * * * *", "2026-03-29T01:59:00Z", "2026-03-29T01:00:00Z"),
            // Spring, New York (gap 02:00-03:00 local, ends 07:00 UTC).
            (NEW_YORK, "0,30 2 * * *", "2026-03-08T06:59:00Z", "2026-03-07T07:30:00Z"),
            (NEW_YORK, "0,30 2 * * *", "2026-03-08T07:10:00Z", "2026-03-08T07:00:00Z"),
            (NEW_YORK, "30 2 * * *", "2026-03-08T07:00:00Z", "2026-03-08T07:00:00Z"),
            (NEW_YORK, "*/15 * * * *", "2026-03-08T07:05:00Z", "2026-03-08T07:00:00Z"),
            (NEW_YORK, "0 * * * *", "2026-03-08T07:59:00Z", "2026-03-08T07:00:00Z"),
            // Autumn, Berlin (02:00-03:00 local twice: 00:00-01:00 and 01:00-02:00 UTC).
            (BERLIN, "0,30 2 * * *", "2026-10-25T00:29:00Z", "2026-10-25T00:00:00Z"),
            (BERLIN, "0,30 2 * * *", "2026-10-25T01:45:00Z", "2026-10-25T00:30:00Z"),
            (BERLIN, "30 2 * * *", "2026-10-25T01:30:00Z", "2026-10-25T00:30:00Z"),
            (BERLIN, "*/15 * * * *", "2026-10-25T00:30:00Z", "2026-10-25T00:30:00Z"),
            (BERLIN, "*/15 * * * *", "2026-10-25T00:59:59Z", "2026-10-25T00:45:00Z"),
            (BERLIN, "*/15 * * * *", "2026-10-25T01:00:00Z", "2026-10-25T00:45:00Z"),
            (BERLIN, "*/15 * * * *", "2026-10-25T01:20:00Z", "2026-10-25T00:45:00Z"),
            (BERLIN, "*/15 * * * *", "2026-10-25T02:00:00Z", "2026-10-25T02:00:00Z"),
            (BERLIN, "0 * * * *", "2026-10-25T01:30:00Z", "2026-10-25T00:00:00Z"),
            (BERLIN, "0 * * * *", "2026-10-25T01:59:59Z", "2026-10-25T00:00:00Z"),
            // Autumn, New York (01:00-02:00 local twice: 05:00-06:00 and 06:00-07:00 UTC).
            (NEW_YORK, "0,30 2 * * *", "2026-11-01T06:45:00Z", "2026-10-31T06:30:00Z"),
            (NEW_YORK, "30 2 * * *", "2026-11-01T07:29:00Z", "2026-10-31T06:30:00Z"),
            (NEW_YORK, "*/15 * * * *", "2026-11-01T06:20:00Z", "2026-11-01T05:45:00Z"),
            (NEW_YORK, "*/15 * * * *", "2026-11-01T06:59:00Z", "2026-11-01T05:45:00Z"),
            (NEW_YORK, "*/15 * * * *", "2026-11-01T07:00:00Z", "2026-11-01T07:00:00Z"),
            (NEW_YORK, "0 * * * *", "2026-11-01T06:30:00Z", "2026-11-01T05:00:00Z"),
        ];
        for (zone, schedule, at, expected) in table {
            let last = window(schedule, zone).last_fire(ts(at)).map(|t| t.to_string());
            assert_eq!(last.as_deref(), Some(*expected), "{zone} {schedule:?} at {at}");
        }
    }
}
