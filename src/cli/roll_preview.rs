//! The roll preview of `review`: in which order a rolling maintenance
//! (`spec.maxUnavailable`), or one whose nodes NodeDisruptionBudgets cover, would take its
//! nodes, and what makes them wait, from [`holds::roll_order`] (the controller's own
//! allotment) over a snapshot of the cluster's Nodes, maintenances and budgets, with the
//! budgets' gates evaluated at the current time. Pure but for reading the clock.

use crate::api::{MaintenanceWindowStatus, NodeMaintenance, scaled_count};
use crate::cluster::standalone::StaticView;
use crate::gates::{AlertsRead, AlertsView};
use crate::planner::from_cluster::Nodes;
use crate::planner::holds::from_cluster::{budget_views, hold_request, node_views};
use crate::planner::holds::{self, BudgetView, HoldRequest, Wait};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How the reviewed maintenance would roll.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollPreview {
    /// `spec.maxUnavailable` resolved against the selected nodes; `None`: every node at once
    /// (the KEP's group maintenance) as far as the budgets allow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_at_once: Option<usize>,
    /// The NodeDisruptionBudgets selecting some of its nodes.
    pub budgets: Vec<String>,
    /// Nodes held together, wave after wave; the first is what it would hold now.
    pub waves: Vec<Vec<String>>,
    /// Nodes that would wait now, by why (the drainMessage the controller would show).
    pub waiting_now: BTreeMap<String, Vec<String>>,
    /// Nodes it would never hold as the cluster stands, by why.
    pub never: BTreeMap<String, Vec<String>>,
    /// The maintenance windows of those budgets that have some, by budget: open now and
    /// until when, or when one next opens.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub windows: BTreeMap<String, MaintenanceWindowStatus>,
    /// Those budgets whose health gate matches alerts: `review` reads no Prometheus, so that
    /// gate is taken as open here and may still hold nodes back in the cluster.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alerts_not_evaluated: Vec<String>,
}

/// The maintenance under review, as [`roll_preview`] needs it.
#[derive(Clone, Copy, Debug)]
pub struct Rolled<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// Creation time in Unix seconds; `None` for a CREATE (the newest maintenance).
    pub created: Option<i64>,
    /// The nodes its selector picks.
    pub selected: &'a [String],
    /// `spec.maxUnavailable`, if set.
    pub max_unavailable: Option<&'a IntOrString>,
    /// The stored maintenance an UPDATE replaces (the nodes it released stay released).
    pub stored: Option<&'a NodeMaintenance>,
    /// `spec.paused`: no node would start.
    pub paused: bool,
}

fn by_reason(waits: BTreeMap<String, Wait>) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (node, wait) in waits {
        out.entry(wait.to_string()).or_default().push(node);
    }
    out
}

/// The roll of `reviewed` next to the active maintenances of `view` (itself left out), as if
/// it entered Cordon or Drain now. `None` when nothing limits it: no `maxUnavailable` and no
/// budget selecting one of its nodes (it then takes every node at once).
pub fn roll_preview(reviewed: &Rolled<'_>, view: &StaticView) -> Option<RollPreview> {
    let mine: BTreeSet<&str> = reviewed.selected.iter().map(String::as_str).collect();
    // `review` reads no Prometheus: alert gates are shown open; the other gates as of now.
    let no_alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
    let nodes = Nodes::new(&view.nodes);
    let budgets =
        budget_views(&view.budgets, &nodes, &view.maintenances, &no_alerts, k8s_openapi::jiff::Timestamp::now());
    let covering: Vec<&BudgetView> =
        budgets.iter().filter(|b| b.nodes.iter().any(|n| mine.contains(n.as_str()))).collect();
    let windows =
        covering.iter().filter_map(|b| b.gates.maintenance_window.clone().map(|w| (b.name.clone(), w))).collect();
    let alerts_not_evaluated = view
        .budgets
        .iter()
        .filter(|b| b.spec.health_gate.as_ref().is_some_and(|g| g.alerts.is_some()))
        .filter_map(|b| b.metadata.name.clone())
        .filter(|name| covering.iter().any(|c| c.name == *name))
        .collect();
    let covering: Vec<String> = covering.iter().map(|b| b.name.clone()).collect();
    if reviewed.max_unavailable.is_none() && covering.is_empty() {
        return None;
    }
    let request = HoldRequest {
        name: reviewed.name.to_owned(),
        created: reviewed.created.unwrap_or(i64::MAX),
        selected: reviewed.selected.to_vec(),
        released: reviewed.stored.map(NodeMaintenance::released_nodes).unwrap_or_default(),
        max_unavailable: reviewed.max_unavailable.cloned(),
        paused: reviewed.paused,
    };
    let others: Vec<HoldRequest> = view
        .maintenances
        .iter()
        .filter(|m| m.is_active() && m.metadata.name.as_deref() != Some(reviewed.name))
        .map(|m| hold_request(m, &nodes))
        .collect();
    let order = holds::roll_order(&request, &others, &node_views(&nodes), &budgets);
    Some(RollPreview {
        nodes_at_once: reviewed.max_unavailable.and_then(|v| scaled_count(v, reviewed.selected.len()).ok()),
        budgets: covering,
        waves: order.waves,
        waiting_now: by_reason(order.waiting_now),
        never: by_reason(order.never),
        windows,
        alerts_not_evaluated,
    })
}

/// Renders a roll preview for a terminal.
pub fn render_text(p: &RollPreview) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut limits = Vec::new();
    if let Some(n) = p.nodes_at_once {
        limits.push(format!("spec.maxUnavailable: {n} at a time"));
    }
    if !p.budgets.is_empty() {
        limits.push(format!("NodeDisruptionBudgets: {}", p.budgets.join(", ")));
    }
    let _ = writeln!(out, "Roll preview ({}):", limits.join("; "));
    for (budget, w) in &p.windows {
        let when = match (w.open, &w.closes_at, &w.next_opens_at) {
            (true, Some(closes), _) => format!("open until {}", closes.0),
            (true, None, _) => "open".to_owned(),
            (false, _, Some(opens)) => format!("closed, next opens {}", opens.0),
            (false, _, None) => "closed, no opening found".to_owned(),
        };
        let _ = writeln!(out, "  maintenance window of {budget}: {when}");
    }
    for (i, wave) in p.waves.iter().enumerate() {
        let _ = writeln!(out, "  wave {}: {}", i + 1, wave.join(", "));
    }
    for (title, waits) in [("waiting now", &p.waiting_now), ("never held", &p.never)] {
        for (why, nodes) in waits {
            let _ = writeln!(out, "  {title} ({}): {why}", nodes.join(", "));
        }
    }
    if !p.alerts_not_evaluated.is_empty() {
        let _ = writeln!(
            out,
            "  alert gates not evaluated (review reads no Prometheus; taken as open): {}",
            p.alerts_not_evaluated.join(", ")
        );
    }
    if p.waves.len() > 1 {
        let _ = writeln!(out, "  (a node given back frees its place for the next one at once: waves overlap)");
    }
    out
}

#[cfg(test)]
mod tests;
