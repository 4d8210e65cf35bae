//! The forecast as a maintenance's status shows it (SPEC 4.7): `status.forecast`, rewritten only
//! when what it says moves enough to matter, so that a maintenance in steady state (waiting
//! for its window, a node draining on schedule) sends no write.

use super::Forecast;
use crate::api::ForecastStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The least move of a completion time that rewrites the stored forecast: 15 minutes, or a
/// tenth of the time left until the stored completion when that is more (a forecast weeks
/// ahead is not rewritten for an hour).
pub const MIN_MOVE: SignedDuration = SignedDuration::from_mins(15);

/// `status.forecast` from the forecast `f`: `stored` (the one the status holds) while its
/// basis, next blackout start and message are unchanged and neither completion time moved by more than
/// [`MIN_MOVE`] or a tenth of the time left (both present or both absent), else the new one,
/// with `computedAt` the forecast's now.
pub fn status(f: &Forecast, stored: Option<&ForecastStatus>) -> ForecastStatus {
    let fresh = ForecastStatus {
        completion_time: f.completion_time.map(Time),
        late_completion_time: f.late_completion_time.map(Time),
        basis: f.basis.to_string(),
        next_blackout_start: f.next_blackout.as_ref().map(|e| Time(e.at)),
        message: f.never.as_ref().map(|n| {
            let noun = if n.nodes == 1 { "node" } else { "nodes" };
            format!("{} {noun} cannot start within a year ({}): {}", n.nodes, n.reason, n.message)
        }),
        computed_at: Time(f.computed_at),
    };
    match stored {
        Some(s) if !moved(s, &fresh, f.computed_at) => s.clone(),
        _ => fresh,
    }
}

/// Whether `fresh` says something `stored` does not, at `now`.
fn moved(stored: &ForecastStatus, fresh: &ForecastStatus, now: Timestamp) -> bool {
    let time_moved = |was: &Option<Time>, is: &Option<Time>| match (was, is) {
        (Some(was), Some(is)) => {
            let left = was.0.duration_since(now).max(SignedDuration::ZERO);
            is.0.duration_since(was.0).abs() > MIN_MOVE.max(left / 10)
        }
        (None, None) => false,
        _ => true,
    };
    stored.basis != fresh.basis
        || stored.next_blackout_start != fresh.next_blackout_start
        || stored.message != fresh.message
        || time_moved(&stored.completion_time, &fresh.completion_time)
        || time_moved(&stored.late_completion_time, &fresh.late_completion_time)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Option<Time> {
        Some(Time(s.parse().unwrap()))
    }

    fn stored(completion: &str) -> ForecastStatus {
        ForecastStatus {
            completion_time: t(completion),
            late_completion_time: t(completion),
            basis: "2 finished nodes (median 1h, p90 1h)".into(),
            next_blackout_start: t("2026-12-18T00:00:00Z"),
            message: None,
            computed_at: Time("2026-12-01T00:00:00Z".parse().unwrap()),
        }
    }

    fn fresh_at(completion: &str, now: &str) -> ForecastStatus {
        ForecastStatus { computed_at: Time(now.parse().unwrap()), ..stored(completion) }
    }

    #[test]
    fn small_moves_keep_the_stored_forecast_and_larger_ones_replace_it() {
        let now = "2026-12-01T10:00:00Z".parse().unwrap();
        let was = stored("2026-12-01T12:00:00Z");
        // Two hours left: a tenth is 12 minutes, so 15 minutes governs.
        assert!(!moved(&was, &fresh_at("2026-12-01T12:15:00Z", "2026-12-01T10:00:00Z"), now));
        assert!(moved(&was, &fresh_at("2026-12-01T12:15:01Z", "2026-12-01T10:00:00Z"), now));
        assert!(moved(&was, &fresh_at("2026-12-01T11:44:59Z", "2026-12-01T10:00:00Z"), now));
        // Ten days left: a tenth is a day.
        let far = stored("2026-12-11T10:00:00Z");
        assert!(!moved(&far, &fresh_at("2026-12-12T09:00:00Z", "2026-12-01T10:00:00Z"), now));
        assert!(moved(&far, &fresh_at("2026-12-12T10:00:01Z", "2026-12-01T10:00:00Z"), now));
    }

    #[test]
    fn a_new_basis_message_or_a_completion_appearing_replaces_it() {
        let now = "2026-12-01T10:00:00Z".parse().unwrap();
        let was = stored("2026-12-01T12:00:00Z");
        let basis = ForecastStatus { basis: "3 finished nodes (median 1h, p90 1h)".into(), ..was.clone() };
        assert!(moved(&was, &basis, now));
        let never = ForecastStatus { completion_time: None, late_completion_time: None, ..was.clone() };
        assert!(moved(&was, &never, now));
        assert!(moved(&never, &was, now));
        assert!(!moved(&never, &never.clone(), now));
        let message = ForecastStatus { message: Some("1 node cannot start".into()), ..never.clone() };
        assert!(moved(&never, &message, now));
    }
}
