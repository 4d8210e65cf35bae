//! Cron schedules of maintenance windows (`Window::compile`, `Schedule::parse`): any text as
//! `schedule`, read in a zone with hard transitions, for a duration; an accepted schedule is
//! checked at two instants (often near a transition of its zone) for the properties of
//! `node_maintenance_fuzz::window::check` (the next firing is after now, the last one not,
//! none skipped between; the budget's verdict agrees). Input: `input::KNOBS` bytes (zone,
//! duration, instants), then the schedule.
#![no_main]

use libfuzzer_sys::fuzz_target;
use node_maintenance::api::MaintenanceWindow;
use node_maintenance::gates::{Window, WindowError};
use node_maintenance_fuzz::input;
use node_maintenance_fuzz::window::{At, DURATIONS, ZONES, check, gates};

fuzz_target!(|data: &[u8]| {
    let (knobs, texts) = input::split(data);
    let Some(schedule) = texts.first() else { return };
    let zone = ZONES[usize::from(knobs[0]) % ZONES.len()];
    let spec = MaintenanceWindow {
        schedule: (*schedule).to_owned(),
        duration: DURATIONS[usize::from(knobs[1]) % DURATIONS.len()].into(),
        time_zone: Some(zone.into()),
    };
    let w = match Window::compile(&spec) {
        Ok(w) => w,
        Err(errors) => {
            assert!(matches!(errors.as_slice(), [WindowError::Schedule(_)]), "{spec:?}: {errors:?}");
            return;
        }
    };
    let tz = jiff::tz::db().get(zone).expect("a zone of the list");
    let gates = gates(&spec);
    for at in [&knobs[2..8], &knobs[8..14]] {
        check(&w, &spec, &gates, At::from_bytes(at).instant(&tz));
    }
});
