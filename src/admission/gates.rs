//! Validation of a NodeDisruptionBudget's gates (SPEC 4.6) with the parsers the controller
//! evaluates them with ([`crate::gates`]), so that what admission accepts the
//! controller reads.

use crate::api::requester::{DNS1123_SUBDOMAIN_MESSAGE, is_dns1123_subdomain};
use crate::api::{Blackout, HealthGate, MaintenanceWindow, PauseRequest};
use crate::field::{FieldError, FieldPath};
use crate::gates::{AlertGateError, MaxUnhealthy, Window, alert_gate_errors};

/// Most `maintenanceWindows`.
const MAX_WINDOWS: usize = 16;
/// Most `blackouts`.
const MAX_BLACKOUTS: usize = 32;
/// Most `pauseRequests`.
const MAX_PAUSE_REQUESTS: usize = 32;
/// Most entries of `alerts.matchers` and of `alerts.ignore`, each.
const MAX_MATCHERS: usize = 16;
/// Longest `schedule`.
const MAX_SCHEDULE_CHARS: usize = 128;
/// Longest blackout or pause `reason`.
const MAX_GATE_REASON_CHARS: usize = 256;
/// Longest pause request `name`.
const MAX_PAUSE_NAME_CHARS: usize = 253;
/// Longest alert selector.
const MAX_MATCHER_CHARS: usize = 1024;

/// The gate fields of a budget spec as sent.
pub(super) struct Gates<'a> {
    pub windows: &'a [MaintenanceWindow],
    pub blackouts: &'a [Blackout],
    pub pause_requests: &'a [PauseRequest],
    /// On UPDATE, the pause request names already stored: one of them is not refused for
    /// not being a DNS-1123 subdomain (stored before that rule), as CRD validation
    /// ratcheting lets it through the schema's rule, so that another party applying its own
    /// entry is not refused for a name it does not own.
    pub stored_pause_names: &'a [String],
    pub health_gate: Option<&'a HealthGate>,
}

impl Gates<'_> {
    /// Whether any gate can close: a budget without a count and without one limits nothing.
    pub fn any(&self) -> bool {
        !self.windows.is_empty()
            || !self.blackouts.is_empty()
            || !self.pause_requests.is_empty()
            || self.health_gate.is_some_and(|h| h.max_unhealthy.is_some() || h.alerts.is_some())
    }

    /// Every field error of the gates under `spec`. Lists longer than their maximum are
    /// refused and only their first maximum items checked, so a huge list costs no more than
    /// a full one.
    pub fn validate(&self, spec: &FieldPath) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let path = spec.child("maintenanceWindows");
        for (i, w) in bounded(self.windows, MAX_WINDOWS, &path, &mut errs) {
            let at = path.index(i);
            if w.schedule.chars().count() > MAX_SCHEDULE_CHARS {
                errs.push(FieldError::too_long(&at.child("schedule"), MAX_SCHEDULE_CHARS));
                continue;
            }
            for e in Window::compile(w).err().unwrap_or_default() {
                let value = match e.field() {
                    "schedule" => w.schedule.as_str(),
                    "duration" => w.duration.as_str(),
                    _ => w.time_zone.as_deref().unwrap_or_default(),
                };
                errs.push(FieldError::invalid(&at.child(e.field()), value, e.to_string()));
            }
        }

        let path = spec.child("blackouts");
        for (i, b) in bounded(self.blackouts, MAX_BLACKOUTS, &path, &mut errs) {
            if b.end.0 <= b.start.0 {
                errs.push(FieldError::invalid(
                    &path.index(i).child("end"),
                    b.end.0,
                    format!("must be after start ({})", b.start.0),
                ));
            }
            reason(b.reason.as_deref(), &path.index(i), &mut errs);
        }

        let path = spec.child("pauseRequests");
        let pauses = bounded(self.pause_requests, MAX_PAUSE_REQUESTS, &path, &mut errs);
        for (i, p) in pauses.clone() {
            let name = path.index(i).child("name");
            if p.name.is_empty() {
                errs.push(FieldError::required(&name, "who asks for the pause"));
            } else if p.name.chars().count() > MAX_PAUSE_NAME_CHARS {
                errs.push(FieldError::too_long(&name, MAX_PAUSE_NAME_CHARS));
            } else if !is_dns1123_subdomain(&p.name) && !self.stored_pause_names.contains(&p.name) {
                errs.push(FieldError::invalid(&name, &p.name, DNS1123_SUBDOMAIN_MESSAGE));
            } else if let Some(first) = pauses.clone().take(i).position(|(_, q)| q.name == p.name) {
                errs.push(FieldError::duplicate(&name, format!("{:?}, as pauseRequests[{first}]", p.name)));
            }
            reason(p.reason.as_deref(), &path.index(i), &mut errs);
        }

        if let Some(gate) = self.health_gate {
            health(gate, &spec.child("healthGate"), &mut errs);
        }
        errs
    }
}

fn health(gate: &HealthGate, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if let Some(max) = &gate.max_unhealthy
        && let Err(detail) = MaxUnhealthy::parse(max)
    {
        errs.push(FieldError::invalid(&path.child("maxUnhealthy"), crate::api::shown(max), detail));
    }
    let Some(alerts) = &gate.alerts else { return };
    let path = path.child("alerts");
    // Selectors are parsed only when the lists are within bounds: regular expressions cost.
    let mut oversized = false;
    for (field, list) in [("matchers", &alerts.matchers), ("ignore", &alerts.ignore)] {
        let at = path.child(field);
        oversized |= list.len() > MAX_MATCHERS;
        for (i, text) in bounded(list, MAX_MATCHERS, &at, errs) {
            if text.chars().count() > MAX_MATCHER_CHARS {
                errs.push(FieldError::too_long(&at.index(i), MAX_MATCHER_CHARS));
                oversized = true;
            }
        }
    }
    if oversized {
        return;
    }
    for e in alert_gate_errors(alerts) {
        errs.push(match e {
            AlertGateError::NoMatchers => FieldError::required(
                &path.child("matchers"),
                "at least one selector: an alert gate matching every alert would hold while a Watchdog fires",
            ),
            AlertGateError::Entry { list, index, error } => {
                let text = if list.field() == "matchers" { &alerts.matchers } else { &alerts.ignore };
                FieldError::invalid(
                    &path.child(list.field()).index(index),
                    text.get(index).map_or("", String::as_str),
                    error.to_string(),
                )
            }
        });
    }
}

fn reason(reason: Option<&str>, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if reason.is_some_and(|r| r.chars().count() > MAX_GATE_REASON_CHARS) {
        errs.push(FieldError::too_long(&path.child("reason"), MAX_GATE_REASON_CHARS));
    }
}

/// The first `max` items of `list` with their indices; a longer list adds a "too many" error.
fn bounded<'a, T>(
    list: &'a [T],
    max: usize,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) -> std::iter::Take<std::iter::Enumerate<std::slice::Iter<'a, T>>> {
    if list.len() > max {
        errs.push(FieldError::too_many(path, list.len(), max));
    }
    list.iter().enumerate().take(max)
}
