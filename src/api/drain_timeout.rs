//! `spec.drainTimeout`: how long the Drain stage may run before the maintenance
//! reports that it timed out. The value is a Go duration (`time.ParseDuration`, what
//! `metav1.Duration` and `kubectl drain --timeout` accept), so admission and the controller
//! read it with this one function and cannot disagree.

use go_duration::GoDuration;
use std::time::Duration;

/// The units of a Go duration this field takes. go-duration, which does the parsing, also
/// reads Go's `µs` and `μs` and a leading sign: those are refused.
const GO_UNITS: [&str; 6] = ["ns", "us", "ms", "s", "m", "h"];

/// Why a `drainTimeout` was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DrainTimeoutError {
    /// Not a Go duration (text, a unit Go does not know, spaces, a sign, overflow).
    #[error("not a duration such as 30m, 1h30m or 90s (units h, m, s, ms, us, ns)")]
    Unreadable,
    /// Zero: a drain would time out the moment it starts.
    #[error("must be greater than zero")]
    Zero,
}

/// Parses a `spec.drainTimeout` such as `30m`, `1h30m`, `1.5h`, `.5h` or `90s`: one or more
/// decimal numbers, each followed by a unit (`ns`, `us`, `ms`, `s`, `m`, `h`), no spaces or
/// sign, at most Go's largest duration (`2562047h47m16.854775807s`): Go's grammar for
/// positive durations, read as Go reads them (`node_maintenance_fuzz`'s `go_duration` target
/// checks it against a transcription of `time.ParseDuration`). Returns the duration.
///
/// # Errors
/// [`DrainTimeoutError::Unreadable`] for anything else (negative values included: Go's
/// leading `-` is not accepted), [`DrainTimeoutError::Zero`] for a zero duration.
pub fn parse_drain_timeout(text: &str) -> Result<Duration, DrainTimeoutError> {
    // Go reads a bare `0` as zero; go-duration asks for a unit.
    if text == "0" {
        return Err(DrainTimeoutError::Zero);
    }
    let go_units = text
        .split(|c: char| c.is_ascii_digit() || c == '.')
        .filter(|unit| !unit.is_empty())
        .all(|unit| GO_UNITS.contains(&unit));
    let nanos = go_units
        .then(|| text.parse::<GoDuration>().ok())
        .flatten()
        .and_then(|d| u64::try_from(d.nanoseconds()).ok())
        .ok_or(DrainTimeoutError::Unreadable)?;
    if nanos == 0 { Err(DrainTimeoutError::Zero) } else { Ok(Duration::from_nanos(nanos)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let secs = |s: &str| parse_drain_timeout(s).map(|d| d.as_secs_f64());
        assert_eq!(secs("30m"), Ok(1800.0));
        assert_eq!(secs("1h30m"), Ok(5400.0));
        assert_eq!(secs("90s"), Ok(90.0));
        assert_eq!(secs("1.5h"), Ok(5400.0));
        assert_eq!(secs("2h45m30s"), Ok(9930.0));
        assert_eq!(secs("1500ms"), Ok(1.5));
    }

    #[test]
    fn what_go_would_not_read_and_zero_are_refused() {
        for text in ["", "30", "30M", "2d", "1w", "1 h", "1h 30m", "-1h", "+1h", "1.h5", "ten minutes", "1h-30m"] {
            assert_eq!(parse_drain_timeout(text), Err(DrainTimeoutError::Unreadable), "{text:?}");
        }
        assert_eq!(parse_drain_timeout("99999999999999999999h"), Err(DrainTimeoutError::Unreadable));
        assert_eq!(parse_drain_timeout("0s"), Err(DrainTimeoutError::Zero));
        assert_eq!(parse_drain_timeout("0h0m"), Err(DrainTimeoutError::Zero));
    }

    /// Found by the `go_duration` fuzz target against Go's `time.ParseDuration`, when
    /// humantime did the parsing: a number without digits before or after its point, a
    /// fraction of an hour (cut to whole seconds), durations past Go's largest, a bare `0`.
    #[test]
    fn regressions_read_as_go_reads_them() {
        let nanos = |s: &str| parse_drain_timeout(s).map(|d| d.as_nanos());
        assert_eq!(nanos(".5h"), Ok(1_800_000_000_000));
        assert_eq!(nanos("1.h"), Ok(3_600_000_000_000));
        assert_eq!(nanos("1.0001h"), Ok(3_600_360_000_000));
        assert_eq!(nanos("2562047h47m16.854775807s"), Ok(i64::MAX as u128));
        assert_eq!(nanos("2562047h47m16.854775808s"), Err(DrainTimeoutError::Unreadable));
        assert_eq!(nanos("2562048h"), Err(DrainTimeoutError::Unreadable));
        assert_eq!(nanos("0"), Err(DrainTimeoutError::Zero));
        assert_eq!(nanos("1µs"), Err(DrainTimeoutError::Unreadable), "Go's µ is not one of the documented units");
    }
}
