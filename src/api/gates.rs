//! Gates on a NodeDisruptionBudget (SPEC 4.6): maintenance windows, blackouts, pause
//! requests and the health gate, each answering "may maintenance start on a node this budget
//! selects now?", and the status that says which are closed and since when. Plain data: the
//! evaluation is in [`crate::gates`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Pod annotation that, with a maintenance's `spec.waitForCompletion` set, lets the pod run to
/// completion on a draining node whatever the selector says (value `"true"`; SPEC 4.6).
pub const WAIT_FOR_COMPLETION_ANNOTATION: &str = "nodemaintenance.k8s.io/wait-for-completion";

/// The reasons of closed gates, in the order the budget's `DisruptionAllowed` condition
/// reports the first one (SPEC 4.6): `Paused`, `Blackout`, `OutsideMaintenanceWindow`,
/// `AlertsFiring`, `TooManyUnhealthyNodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum GateReason {
    /// A pause request is present.
    Paused,
    /// A blackout covers now.
    Blackout,
    /// Windows are set and none is open.
    OutsideMaintenanceWindow,
    /// A firing alert matches the health gate (or the alerts could not be read).
    AlertsFiring,
    /// More selected nodes are unhealthy than `healthGate.maxUnhealthy`.
    TooManyUnhealthyNodes,
}

impl GateReason {
    /// Every reason, in report order.
    pub const ALL: [GateReason; 5] = [
        GateReason::Paused,
        GateReason::Blackout,
        GateReason::OutsideMaintenanceWindow,
        GateReason::AlertsFiring,
        GateReason::TooManyUnhealthyNodes,
    ];

    /// The reason as it appears in the API and in metric labels (CamelCase).
    pub fn as_str(self) -> &'static str {
        match self {
            GateReason::Paused => "Paused",
            GateReason::Blackout => "Blackout",
            GateReason::OutsideMaintenanceWindow => "OutsideMaintenanceWindow",
            GateReason::AlertsFiring => "AlertsFiring",
            GateReason::TooManyUnhealthyNodes => "TooManyUnhealthyNodes",
        }
    }
}

/// A recurring time during which maintenance may start on the budget's nodes
/// (`spec.maintenanceWindows[]`, SPEC 4.6). A window opens when its schedule fires and stays
/// open for `duration`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// When the window opens: a 5-field cron expression (minute hour day-of-month month
    /// day-of-week, as a CronJob's; day-of-month and day-of-week ORed when both are
    /// restricted; no seconds, `L`, `W`, `#` or `?`), in `timeZone`'s local time. A time that
    /// daylight saving skips fires at the end of the gap; a time in a repeated hour fires
    /// once. Required; at most 128 characters.
    #[schemars(length(max = 128))]
    pub schedule: String,
    /// How long the window stays open after its schedule fires: a Go duration of elapsed time
    /// greater than zero (`8h`, `90m`; units h, m, s). Required; at most 64 characters.
    #[schemars(length(max = 64))]
    pub duration: String,
    /// IANA time zone the schedule is read in (`Europe/Berlin`). Default `UTC`. At most 64
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub time_zone: Option<String>,
}

/// A span of time during which no maintenance starts on the budget's nodes, windows or not
/// (`spec.blackouts[]`, SPEC 4.6).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = super::cel::blackout_ends_after_start())]
pub struct Blackout {
    /// Start (RFC 3339), inclusive. Required.
    pub start: Time,
    /// End (RFC 3339), exclusive; after `start`. Required.
    pub end: Time,
    /// Why (shown in the budget's status and the waiting nodes' messages); at most 256
    /// characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub reason: Option<String>,
}

/// One party's request to pause maintenance on the budget's nodes
/// (`spec.pauseRequests[]`, a map list keyed by `name`: each party server-side applies and
/// removes only its own entry; SPEC 4.6).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct PauseRequest {
    /// Who asks (unique in the list): a DNS-1123 subdomain (lowercase alphanumerics, '-' and
    /// '.', starting and ending alphanumeric, such as `oncall` or `nhc.medik8s.io`) of at most
    /// 253 characters. Required.
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = super::cel::dns1123_subdomain())]
    pub name: String,
    /// Why; at most 256 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub reason: Option<String>,
}

/// Nothing new starts while the cluster is unhealthy (`spec.healthGate`, SPEC 4.6).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthGate {
    /// At most this many selected nodes may be unhealthy (Ready not True, and not held by a
    /// maintenance) for maintenance to start: an integer from 0, or a percentage of the
    /// selected nodes from "0%" to "100%", rounded down. Unset: node health is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = 8))]
    #[x_kube(validation = super::cel::unhealthy_count())]
    pub max_unhealthy: Option<IntOrString>,
    /// Nothing starts while a firing alert read from the controller's `--prometheus-url`
    /// matches. Unset: alerts are not read for this budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertGate>,
}

/// Which firing alerts close the health gate (SPEC 4.6).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlertGate {
    /// Prometheus series selectors without a metric name, ORed:
    /// `{severity="critical",team!~"batch.*"}` (operators `=`, `!=`, `=~`, `!~`; values
    /// double-quoted with Go escapes; regular expressions fully anchored RE2 matched as
    /// Prometheus matches them: `.` also matches a newline, `\d` `\w` `\s` are ASCII). As in
    /// Prometheus, a selector needs a matcher that does not match the empty string
    /// (`{severity!="info"}` alone would match every alert). At least one, at most 16, each at
    /// most 1024 characters.
    #[schemars(length(min = 1, max = 16), inner(length(max = 1024)))]
    pub matchers: Vec<String>,
    /// Alerts matching any of these selectors never close the gate (same grammar and rules; at
    /// most 16, each at most 1024 characters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(max = 1024)))]
    pub ignore: Vec<String>,
}

/// Whether the budget's maintenance windows are open now (`status.maintenanceWindow`; times
/// in UTC).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindowStatus {
    /// A window is open now.
    pub open: bool,
    /// While open: when the open windows close (the end of their union).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes_at: Option<Time>,
    /// While closed: when a window next opens outside every blackout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_opens_at: Option<Time>,
}

/// A gate that is closed now (`status.closedGates[]`, in report order).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClosedGate {
    /// Which gate: `Paused`, `Blackout`, `OutsideMaintenanceWindow`, `AlertsFiring` or
    /// `TooManyUnhealthyNodes`.
    pub reason: GateReason,
    /// What closes it (the pause requests, the blackout, the next opening, the alerts, the
    /// unhealthy nodes).
    pub message: String,
    /// Since when it has been closed (RFC 3339).
    pub since: Time,
}
