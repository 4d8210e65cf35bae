//! IANA zones of maintenance windows (`timeZone`, read with the system's zone database): any
//! text as the zone, with one of a few schedules. A zone is accepted only as a name in the
//! database, never as a path out of it (`..`, a leading `/`, a NUL); an accepted zone is
//! checked at two instants (often near its transitions) as `window_schedule` checks
//! schedules. Input: `input::KNOBS` bytes (schedule, duration, instants), then the zone.
#![no_main]

use libfuzzer_sys::fuzz_target;
use node_maintenance::api::MaintenanceWindow;
use node_maintenance::gates::{Window, WindowError};
use node_maintenance_fuzz::input;
use node_maintenance_fuzz::window::{At, DURATIONS, check, gates};

const SCHEDULES: [&str; 6] =
    ["30 2 * * *", "0,30 1-3 * * *", "*/15 * * * *", "0 0 * * 0", "59 23 31 12 *", "0 22 * * 5,6"];

fuzz_target!(|data: &[u8]| {
    let (knobs, texts) = input::split(data);
    let Some(zone) = texts.first() else { return };
    let spec = MaintenanceWindow {
        schedule: SCHEDULES[usize::from(knobs[0]) % SCHEDULES.len()].into(),
        duration: DURATIONS[usize::from(knobs[1]) % DURATIONS.len()].into(),
        time_zone: Some((*zone).to_owned()),
    };
    let w = match Window::compile(&spec) {
        Ok(w) => w,
        Err(errors) => {
            assert!(matches!(errors.as_slice(), [WindowError::TimeZone(_)]), "{spec:?}: {errors:?}");
            return;
        }
    };
    assert!(
        !zone.starts_with('/') && !zone.split('/').any(|part| part == "..") && !zone.contains('\0'),
        "{zone:?} reads outside the zone database"
    );
    let tz = jiff::tz::db().get(zone).expect("an accepted zone is in the database");
    let gates = gates(&spec);
    for at in [&knobs[2..8], &knobs[8..14]] {
        check(&w, &spec, &gates, At::from_bytes(at).instant(&tz));
    }
});
