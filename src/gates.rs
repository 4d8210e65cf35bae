//! The gates of a NodeDisruptionBudget (SPEC 4.6): maintenance windows, blackouts, pause
//! requests and the health gate (unhealthy nodes, firing alerts), each answering "may
//! maintenance start on a node this budget selects now?".
//!
//! Pure: plain data in, plain data out, no I/O. A budget's gates are compiled once
//! ([`CompiledGates::compile`]: cron schedules, zones, regular expressions) and evaluated per
//! budget, not per node ([`CompiledGates::evaluate`]), into the closed gates in report order
//! with their messages, the `status.maintenanceWindow`, and the next instant at which time
//! alone changes the answer, so the controller wakes then instead of polling.
//!
//! Fail closed: a window or an alert matcher that does not parse (admission refuses them,
//! but an object stored before could reach the controller), a `maxUnhealthy` that cannot be
//! read, or alerts that cannot be read close their gate, with a message saying why. Admission
//! validates with the same parsers ([`Window::compile`], [`MaxUnhealthy::parse`],
//! [`alert_gate_errors`]), so both apply one definition of each rule.
//!
//! A layer of its own, beside [`crate::selector`] and for the same reason: the parsers and
//! evaluation of API fields that admission, `review` and the planner all read. It imports
//! nothing of them (`hack/module-cycles.py`), so admission does not depend on the planner.

mod alerts;
mod blackout;
mod health;
mod matcher;
mod re2;
mod window;

#[cfg(test)]
mod tests;

pub use alerts::{AlertGateError, AlertList, AlertsView};
pub use health::{GateNode, MaxUnhealthy};
pub use matcher::MatcherError;
pub use window::{DEFAULT_ZONE, ScheduleError, Window, WindowError};

use crate::api::{AlertGate, GateReason, MaintenanceWindowStatus, NodeDisruptionBudgetSpec, PauseRequest};
use blackout::Blackouts;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;

/// How many names (alerts, pause requesters) a message lists before `and N more`.
const LISTED: usize = 5;

/// Every problem of `spec.healthGate.alerts` (SPEC 4.6): an empty `matchers`, then each entry
/// of `matchers` and `ignore` that does not parse or that Prometheus refuses (one whose every
/// matcher matches the empty string); empty when the gate is valid.
pub fn alert_gate_errors(gate: &AlertGate) -> Vec<AlertGateError> {
    alerts::compile(gate).err().unwrap_or_default()
}

/// One answer of the alert reader (SPEC 4.6 `healthGate.alerts`): what fired, and for
/// which budgets' alert gates the read was made.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertsRead {
    /// The firing alerts, or why they could not be read.
    pub view: AlertsView,
    /// The alert gate of each budget (by name) as it was when the read started; `None`:
    /// every budget counts as read (`review`, which reads no Prometheus). A budget that
    /// starts reading alerts (new, or its alert gate changed) is closed until a read made
    /// after that moment (fail closed).
    pub read_for: Option<BTreeMap<String, AlertGate>>,
}

impl From<AlertsView> for AlertsRead {
    fn from(view: AlertsView) -> Self {
        AlertsRead { view, read_for: None }
    }
}

impl AlertsRead {
    /// Whether budget `name` with alert gate `gate` was read for: its gate as it is now was
    /// there when the last read started.
    pub fn read_for(&self, name: &str, gate: &AlertGate) -> bool {
        self.read_for.as_ref().is_none_or(|r| r.get(name) == Some(gate))
    }
}

/// One gate closed now.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GateClosure {
    /// Which gate.
    pub reason: GateReason,
    /// What closes it, naming the budget: a node's message and the budget's
    /// `status.closedGates[].message`.
    pub message: String,
}

/// What a budget's gates say at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GateVerdict {
    /// The closed gates, in report order ([`GateReason::ALL`]); empty when maintenance may
    /// start.
    pub closed: Vec<GateClosure>,
    /// `status.maintenanceWindow` (UTC); `None` when the budget has no windows.
    pub maintenance_window: Option<MaintenanceWindowStatus>,
    /// The next instant at which time alone (a window or blackout edge) changes the verdict;
    /// `None` when nothing time-bound is ahead.
    pub next_instant: Option<Timestamp>,
}

impl GateVerdict {
    /// Whether maintenance may start on the budget's nodes.
    pub fn open(&self) -> bool {
        self.closed.is_empty()
    }
}

/// The gates of one NodeDisruptionBudget, parsed once.
#[derive(Clone, Debug)]
pub struct CompiledGates {
    budget: String,
    /// The windows; `Err` names the first field that does not parse.
    windows: Result<Vec<Window>, String>,
    blackouts: Blackouts,
    pauses: Vec<PauseRequest>,
    max_unhealthy: Option<Result<MaxUnhealthy, String>>,
    alerts: Option<Result<alerts::AlertRules, String>>,
    /// No read was made since its alert gate was set ([`CompiledGates::unread_alerts`]).
    unread: bool,
}

impl CompiledGates {
    /// Compiles the gates of the budget named `budget` with `spec`. Never fails: a part that
    /// does not parse is kept as its error and closes its gate when evaluated.
    pub fn compile(budget: &str, spec: &NodeDisruptionBudgetSpec) -> Self {
        let windows = spec
            .maintenance_windows
            .iter()
            .enumerate()
            .map(|(i, w)| {
                Window::compile(w).map_err(|errs| {
                    let e = &errs[0];
                    format!("spec.maintenanceWindows[{i}].{}: {e}", e.field())
                })
            })
            .collect();
        let gate = spec.health_gate.as_ref();
        let max_unhealthy = gate
            .and_then(|g| g.max_unhealthy.as_ref())
            .map(|v| MaxUnhealthy::parse(v).map_err(|e| format!("spec.healthGate.maxUnhealthy: {e}")));
        let alerts = gate.and_then(|g| g.alerts.as_ref()).map(|a| {
            alerts::compile(a).map_err(|errs| match &errs[0] {
                AlertGateError::NoMatchers => "spec.healthGate.alerts.matchers: no matcher".to_owned(),
                AlertGateError::Entry { list, index, error } => {
                    format!("spec.healthGate.alerts.{}[{index}]: {error}", list.field())
                }
            })
        });
        CompiledGates {
            budget: budget.to_owned(),
            windows,
            blackouts: Blackouts::new(&spec.blackouts),
            pauses: spec.pause_requests.clone(),
            max_unhealthy,
            alerts,
            unread: false,
        }
    }

    /// These gates with the answer `read` says: the alert gate stays closed until a read
    /// made after the budget started reading alerts (SPEC 4.6, fail closed).
    pub fn unread_alerts(mut self, spec: &NodeDisruptionBudgetSpec, read: &AlertsRead) -> Self {
        let gate = spec.health_gate.as_ref().and_then(|g| g.alerts.as_ref());
        self.unread = gate.is_some_and(|g| !read.read_for(&self.budget, g));
        self
    }

    /// Evaluates the gates at `now` (UTC instant) over the budget's selected `nodes` and the
    /// firing `alerts` (read only when the budget has an alert gate). Returns the closed gates
    /// in report order with their messages, the window status and the next instant.
    pub fn evaluate(&self, nodes: &[GateNode], alerts: &AlertsView, now: Timestamp) -> GateVerdict {
        let name = &self.budget;
        let mut closed = Vec::new();
        let mut close = |reason, message: String| closed.push(GateClosure { reason, message });

        if !self.pauses.is_empty() {
            let who: Vec<String> = self
                .pauses
                .iter()
                .map(|p| match p.reason.as_deref() {
                    Some(r) if !r.is_empty() => format!("{} ({r})", p.name),
                    _ => p.name.clone(),
                })
                .collect();
            close(GateReason::Paused, format!("NodeDisruptionBudget {name} is paused by {}", listed(&who)));
        }

        if let Some(b) = self.blackouts.at(now) {
            let why = if b.reasons.is_empty() { String::new() } else { format!(" ({})", b.reasons.join("; ")) };
            close(GateReason::Blackout, format!("NodeDisruptionBudget {name} is in a blackout until {}{why}", b.until));
        }

        let mut next_instant = self.blackouts.next_edge(now);
        let maintenance_window = match &self.windows {
            Ok(windows) if windows.is_empty() => None,
            Ok(windows) => {
                let state = window::evaluate(windows, &self.blackouts, now);
                if !state.open {
                    let opens = state.next_opens_at.map_or_else(
                        || "no opening found".to_owned(),
                        |(t, i)| format!("opens {}", windows[i].show(t)),
                    );
                    close(
                        GateReason::OutsideMaintenanceWindow,
                        format!("Waiting for the maintenance window of NodeDisruptionBudget {name} ({opens})"),
                    );
                }
                next_instant = earliest(next_instant, state.next_edge);
                Some(MaintenanceWindowStatus {
                    open: state.open,
                    closes_at: state.closes_at.map(Time),
                    next_opens_at: state.next_opens_at.map(|(t, _)| Time(t)),
                })
            }
            Err(field) => {
                close(
                    GateReason::OutsideMaintenanceWindow,
                    format!("The maintenance windows of NodeDisruptionBudget {name} cannot be read ({field})"),
                );
                Some(MaintenanceWindowStatus::default())
            }
        };

        if let Some(rules) = &self.alerts {
            let why = match (rules, alerts) {
                (Err(field), _) => Some(format!("its alert matchers cannot be read ({field})")),
                (Ok(_), AlertsView::NotConfigured) => {
                    Some("alerts cannot be read: the controller has no --prometheus-url".to_owned())
                }
                (Ok(_), AlertsView::Failed(cause)) => Some(format!("alerts cannot be read: {cause}")),
                (Ok(_), AlertsView::Firing(_)) if self.unread => {
                    Some("its alert matchers are not read yet (no read of Prometheus since they were set)".to_owned())
                }
                (Ok(rules), AlertsView::Firing(firing)) => {
                    let names: Vec<String> = rules.matching(firing).into_iter().collect();
                    (!names.is_empty()).then(|| format!("alerts fire: {}", listed(&names)))
                }
            };
            if let Some(why) = why {
                close(GateReason::AlertsFiring, format!("NodeDisruptionBudget {name} holds while {why}"));
            }
        }

        if let Some(max) = &self.max_unhealthy {
            let unhealthy = nodes.iter().filter(|n| n.unhealthy()).count();
            let why = match max {
                Err(field) => Some(format!("its maxUnhealthy cannot be read ({field})")),
                Ok(m) => {
                    let limit = m.resolve(nodes.len());
                    (unhealthy > limit).then(|| {
                        format!(
                            "{unhealthy} of {} selected nodes are unhealthy (maxUnhealthy allows {limit})",
                            nodes.len()
                        )
                    })
                }
            };
            if let Some(why) = why {
                close(GateReason::TooManyUnhealthyNodes, format!("NodeDisruptionBudget {name} holds while {why}"));
            }
        }

        GateVerdict { closed, maintenance_window, next_instant }
    }
}

/// What happens at an edge of a budget's time-bound gates (SPEC 4.7: the edges a forecast's
/// timeline crosses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum EdgeKind {
    /// A maintenance window opens (blackouts aside: one may still cover it).
    WindowOpens,
    /// The open maintenance windows close (the end of their union).
    WindowCloses,
    /// A blackout begins (while none covered the instant before).
    BlackoutStarts,
    /// The blackouts covering the time end.
    BlackoutEnds,
}

/// One edge of a budget's windows or blackouts.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GateEdge {
    /// When (UTC instant).
    pub at: Timestamp,
    /// `at` on the clock of the budget's first window (RFC 3339 with its offset,
    /// `2026-12-04T22:00:00+01:00`), in UTC for a budget without windows.
    pub local: String,
    /// The NodeDisruptionBudget's name.
    pub budget: String,
    /// What happens.
    pub kind: EdgeKind,
    /// The reasons of the blackouts that start (spec order; unset ones left out).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// A window edge inside a blackout: the opening lets nothing start.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub in_blackout: bool,
}

impl CompiledGates {
    /// The budget's name.
    pub fn budget(&self) -> &str {
        &self.budget
    }

    /// Some pause request is present.
    pub fn paused(&self) -> bool {
        !self.pauses.is_empty()
    }

    /// The edges of the windows and blackouts after `from` up to `until` (both UTC
    /// instants, `until` included), in time order, at most `limit` of them: each opening and
    /// closing of the windows (their union, in their zones, daylight saving included; the
    /// instants [`CompiledGates::evaluate`] reports as its next instant) and each start and
    /// end of the blackouts. Windows that cannot be read have no edges (their gate stays
    /// closed).
    pub fn edges(&self, from: Timestamp, until: Timestamp, limit: usize) -> Vec<GateEdge> {
        let windows = self.windows.as_deref().ok().filter(|w| !w.is_empty());
        let state = |at| (windows.map(|w| window::evaluate(w, &self.blackouts, at)), self.blackouts.at(at));
        let mut out = Vec::new();
        let (mut at, (mut windows_then, mut blackout_then)) = (from, state(from));
        while out.len() < limit {
            let next = earliest(self.blackouts.next_edge(at), windows_then.as_ref().and_then(|w| w.next_edge));
            let Some(next) = next.filter(|n| *n > at && *n <= until) else { break };
            let (windows_now, blackout_now) = state(next);
            let in_blackout = blackout_now.is_some();
            let mut edge = |kind, reasons| {
                let local = windows.map_or_else(|| next.to_string(), |w| w[0].show(next));
                let in_blackout = in_blackout && matches!(kind, EdgeKind::WindowOpens | EdgeKind::WindowCloses);
                out.push(GateEdge { at: next, local, budget: self.budget.clone(), kind, reasons, in_blackout });
            };
            match (windows_then.as_ref().map(|w| w.open), windows_now.as_ref().map(|w| w.open)) {
                (Some(false), Some(true)) => edge(EdgeKind::WindowOpens, Vec::new()),
                (Some(true), Some(false)) => edge(EdgeKind::WindowCloses, Vec::new()),
                _ => {}
            }
            match (&blackout_then, &blackout_now) {
                (None, Some(b)) => edge(EdgeKind::BlackoutStarts, b.reasons.clone()),
                (Some(_), None) => edge(EdgeKind::BlackoutEnds, Vec::new()),
                _ => {}
            }
            (at, windows_then, blackout_then) = (next, windows_now, blackout_now);
        }
        out.truncate(limit);
        out
    }

    /// The next blackout start after `after` (a UTC instant): an edge
    /// [`EdgeKind::BlackoutStarts`], however far ahead; `None` when no blackout starts later.
    pub fn next_blackout_start(&self, after: Timestamp) -> Option<GateEdge> {
        let (at, reasons) = self.blackouts.next_start(after)?;
        let local = self.windows.as_deref().ok().and_then(|w| w.first()).map_or_else(|| at.to_string(), |w| w.show(at));
        let kind = EdgeKind::BlackoutStarts;
        Some(GateEdge { at, local, budget: self.budget.clone(), kind, reasons, in_blackout: false })
    }
}

fn earliest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `a`, `a and b`, `a, b and c`, or `a, b, c, d, e and 3 more`.
fn listed(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [only] => only.clone(),
        _ if names.len() > LISTED => format!("{} and {} more", names[..LISTED].join(", "), names.len() - LISTED),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
