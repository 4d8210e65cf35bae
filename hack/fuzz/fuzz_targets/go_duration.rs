//! Go durations (`spec.drainTimeout`, `waitForCompletion.timeout`, a window's `duration`):
//! `parse_drain_timeout` agrees with Go's `time.ParseDuration` (without a sign or `µs`, as
//! documented) on every text: the same texts accepted, the same duration to the nanosecond
//! (one nanosecond per number with a fraction: Go's float64 rounding), and a window reads
//! its duration alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use node_maintenance::api::{DrainTimeoutError, MaintenanceWindow, parse_drain_timeout};
use node_maintenance::gates::{Window, WindowError};
use node_maintenance_fuzz::go;

fuzz_target!(|text: &str| {
    let ours = parse_drain_timeout(text);
    let read = match &ours {
        Ok(d) => Some(d.as_nanos()),
        Err(DrainTimeoutError::Zero) => Some(0),
        Err(DrainTimeoutError::Unreadable) => None,
    };
    match (read, go::parse_duration(text)) {
        // Go multiplies a fraction in float64 and truncates; go-duration sums it digit by
        // digit: each number with a fraction may end a nanosecond apart.
        (Some(ours), Some(go)) => {
            let apart = ours.abs_diff(u128::from(go));
            assert!(apart <= text.matches('.').count() as u128, "{text:?}: ours {ours}, Go {go}");
        }
        (None, None) => {}
        (ours, go) => panic!("{text:?}: ours {ours:?}, Go {go:?}"),
    }
    // A window reads its duration with the same rule (an empty schedule: no cron search).
    let w = MaintenanceWindow { schedule: String::new(), duration: text.into(), time_zone: None };
    let errors = Window::compile(&w).err().unwrap_or_default();
    let window = errors.iter().find_map(|e| if let WindowError::Duration(d) = e { Some(d) } else { None });
    assert_eq!(window, ours.as_ref().err(), "{text:?}");
});
