//! Why a node waits (SPEC 4.6 "Several budgets over one node"): one value per node and
//! decision, from which every word the product says about a waiting node is rendered.
//!
//! [`Gates`] is what stops a node from starting, or a started node from evicting: every
//! budget over it with a closed gate (each with all its closed gates) and every pause. It is
//! computed once per decision ([`super::holds::Allotment::node_gates`]) from all the budgets
//! and maintenances over the node, so no budget is lost to another that the caches happen to
//! list first. [`Wait`] is why a selected node is not held: those gates, the maintenance's
//! own turn, or a budget's count. The precedence of gate reasons is written once, here
//! ([`Gates::reason`]), and so are the messages ([`Gates`]' `Display`).

use crate::api::GateReason;
use crate::gates::GateClosure;
use std::fmt;
use std::sync::Arc;

/// One budget over a node with its closed gates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClosedBudget {
    /// The NodeDisruptionBudget's name.
    pub name: String,
    /// Its closed gates, in report order ([`GateReason::ALL`]); never empty.
    pub closed: Vec<GateClosure>,
}

/// The pauses and closed gates over one node (SPEC 4.6). Empty: nothing stops it.
///
/// Shared by every node under the same budgets: the budgets are `Arc`s built once per
/// budget and decision.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Gates {
    /// Maintenances with `spec.paused: true` that hold or ask for the node, sorted by name.
    pub paused: Vec<String>,
    /// Every budget over the node with a closed gate, sorted by name.
    pub budgets: Vec<Arc<ClosedBudget>>,
}

impl Gates {
    /// Nothing is closed and nothing paused: the node may start.
    pub fn is_open(&self) -> bool {
        self.paused.is_empty() && self.budgets.is_empty()
    }

    /// Some pause (a maintenance's `spec.paused` or a budget's pause request) stops the
    /// node: no new eviction, EvictionRequest or rollout on it, whatever else is open.
    pub fn is_paused(&self) -> bool {
        !self.paused.is_empty() || self.budgets.iter().any(|b| b.closed.iter().any(|g| g.reason == GateReason::Paused))
    }

    /// What still stops a node whose drain started: only the pauses (a gate that closes
    /// after the start lets the drain finish, SPEC 4.6).
    pub fn pauses(&self) -> Gates {
        let budgets = self
            .budgets
            .iter()
            .filter_map(|b| {
                let closed: Vec<GateClosure> =
                    b.closed.iter().filter(|g| g.reason == GateReason::Paused).cloned().collect();
                match closed.len() {
                    0 => None,
                    n if n == b.closed.len() => Some(b.clone()),
                    _ => Some(Arc::new(ClosedBudget { name: b.name.clone(), closed })),
                }
            })
            .collect();
        Gates { paused: self.paused.clone(), budgets }
    }

    /// These gates with maintenance `name`'s own `spec.paused` added.
    pub fn with_paused(mut self, name: &str) -> Gates {
        if let Err(at) = self.paused.binary_search_by(|p| p.as_str().cmp(name)) {
            self.paused.insert(at, name.to_owned());
        }
        self
    }

    /// The union of two nodes' gates (a maintenance's over its nodes): pauses and budgets
    /// by name, a budget's closed gates merged by reason.
    pub fn merge(&mut self, other: &Gates) {
        for p in &other.paused {
            if let Err(at) = self.paused.binary_search(p) {
                self.paused.insert(at, p.clone());
            }
        }
        for b in &other.budgets {
            match self.budgets.binary_search_by(|x| x.name.cmp(&b.name)) {
                Err(at) => self.budgets.insert(at, b.clone()),
                Ok(at) if self.budgets[at] != *b => {
                    let mine = Arc::make_mut(&mut self.budgets[at]);
                    for g in &b.closed {
                        if let Err(i) = mine.closed.binary_search_by(|x| x.reason.cmp(&g.reason)) {
                            mine.closed.insert(i, g.clone());
                        }
                    }
                }
                Ok(_) => {}
            }
        }
    }

    /// The first reason in SPEC 4.6's order (`Paused`, `Blackout`,
    /// `OutsideMaintenanceWindow`, `AlertsFiring`, `TooManyUnhealthyNodes`; a maintenance's
    /// `spec.paused` is `Paused`); `None` when open. The one place that order is applied to
    /// a node.
    pub fn reason(&self) -> Option<GateReason> {
        let budgets = self.budgets.iter().flat_map(|b| b.closed.iter().map(|g| g.reason));
        (!self.paused.is_empty()).then_some(GateReason::Paused).into_iter().chain(budgets).min()
    }

    /// Only maintenance windows keep the node: the `MaintenanceWindow` reason of its
    /// `MaintenancePlanned` condition (KEP-5683).
    pub fn for_window(&self) -> bool {
        let mut reasons = self.budgets.iter().flat_map(|b| b.closed.iter().map(|g| g.reason));
        self.paused.is_empty() && !self.budgets.is_empty() && reasons.all(|r| r == GateReason::OutsideMaintenanceWindow)
    }

    /// Why, without counts or times (a `MaintenancePlanned` message, which must not change
    /// as a window comes closer): `paused (spec.paused); NodeDisruptionBudget a: Paused,
    /// Blackout; NodeDisruptionBudget b: OutsideMaintenanceWindow`.
    pub fn summary(&self) -> String {
        let pauses = (!self.paused.is_empty()).then(|| "paused (spec.paused)".to_owned());
        let budgets = self.budgets.iter().map(|b| {
            let reasons: Vec<&str> = b.closed.iter().map(|g| g.reason.as_str()).collect();
            format!("NodeDisruptionBudget {}: {}", b.name, reasons.join(", "))
        });
        pauses.into_iter().chain(budgets).collect::<Vec<_>>().join("; ")
    }
}

#[cfg(test)]
impl Gates {
    /// The gates of one budget `name` closed for `reason` with `message` (tests).
    pub(crate) fn closed(name: &str, reason: GateReason, message: &str) -> Gates {
        let closed = vec![GateClosure { reason, message: message.to_owned() }];
        Gates { paused: Vec::new(), budgets: vec![Arc::new(ClosedBudget { name: name.to_owned(), closed })] }
    }
}

impl fmt::Display for Gates {
    /// The node's drainMessage: every pause, then every budget by name with each of its
    /// closed gates in report order, `; `-separated, with a final period:
    /// `Paused (spec.paused of NodeMaintenance m); NodeDisruptionBudget team is paused by
    /// oncall (incident); NodeDisruptionBudget zone is in a blackout until ….`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut part = |f: &mut fmt::Formatter<'_>, text: &dyn fmt::Display| {
            let sep = if first { "" } else { "; " };
            first = false;
            write!(f, "{sep}{text}")
        };
        for m in &self.paused {
            part(f, &format_args!("Paused (spec.paused of NodeMaintenance {m})"))?;
        }
        for g in self.budgets.iter().flat_map(|b| &b.closed) {
            part(f, &g.message)?;
        }
        write!(f, ".")
    }
}

/// Why a selected node is not held (SPEC 4.5, 4.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Pauses or closed gates over the node ([`Gates`]).
    Gated(Gates),
    /// The maintenance holds as many nodes as its maxUnavailable allows.
    Turn {
        /// Nodes it holds.
        held: usize,
        /// Its maxUnavailable, resolved.
        limit: usize,
    },
    /// A NodeDisruptionBudget selecting the node allows no further disruption.
    Budget {
        /// The budget's name.
        name: String,
        /// Its selected nodes unavailable now (counting holds granted before this one).
        unavailable: usize,
        /// Its selected nodes allowed to be unavailable.
        max_unavailable: usize,
    },
}

impl Wait {
    /// The gates, when the node waits for gates or a pause.
    pub fn gates(&self) -> Option<&Gates> {
        match self {
            Wait::Gated(g) => Some(g),
            _ => None,
        }
    }

    /// The budgets this wait is for (each counts the node as waiting for it).
    pub fn budgets(&self) -> Vec<&str> {
        match self {
            Wait::Gated(g) => g.budgets.iter().map(|b| b.name.as_str()).collect(),
            Wait::Budget { name, .. } => vec![name.as_str()],
            Wait::Turn { .. } => Vec::new(),
        }
    }

    /// Why, without counts or times ([`Gates::summary`]): the `MaintenancePlanned` text.
    pub fn summary(&self) -> String {
        match self {
            Wait::Gated(g) if g.for_window() => {
                let names: Vec<&str> = g.budgets.iter().map(|b| b.name.as_str()).collect();
                format!("waiting for the maintenance window of NodeDisruptionBudget {}", names.join(", "))
            }
            Wait::Gated(g) if g.budgets.is_empty() => "paused".to_owned(),
            Wait::Gated(g) => format!("waiting for {}", g.summary()),
            Wait::Turn { .. } => "waiting for a place".to_owned(),
            Wait::Budget { name, .. } => format!("waiting for NodeDisruptionBudget {name}"),
        }
    }
}

impl fmt::Display for Wait {
    /// The node's drainMessage: the gates ([`Gates`]), `Waiting for a place (2 of 2 nodes
    /// held).` or `Waiting for NodeDisruptionBudget general (1 of 1 unavailable).`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::Gated(g) => g.fmt(f),
            Wait::Turn { held, limit } => write!(f, "Waiting for a place ({held} of {limit} nodes held)."),
            Wait::Budget { name, unavailable, max_unavailable } => {
                write!(f, "Waiting for NodeDisruptionBudget {name} ({unavailable} of {max_unavailable} unavailable).")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(name: &str, reasons: &[GateReason]) -> Arc<ClosedBudget> {
        let closed =
            reasons.iter().map(|&reason| GateClosure { reason, message: format!("{name} {reason:?}") }).collect();
        Arc::new(ClosedBudget { name: name.into(), closed })
    }

    #[test]
    fn every_budget_and_gate_is_named_and_the_first_reason_follows_the_spec_order() {
        let g = Gates {
            paused: vec![],
            budgets: vec![
                budget("pool", &[GateReason::OutsideMaintenanceWindow]),
                budget("team", &[GateReason::Paused, GateReason::AlertsFiring]),
            ],
        };
        assert_eq!(g.to_string(), "pool OutsideMaintenanceWindow; team Paused; team AlertsFiring.");
        assert_eq!(g.reason(), Some(GateReason::Paused));
        assert!(g.is_paused() && !g.for_window());
        let started = g.pauses();
        assert_eq!(started.to_string(), "team Paused.", "a started node keeps only the pauses");
        let own = Gates::default().with_paused("m");
        assert_eq!(own.to_string(), "Paused (spec.paused of NodeMaintenance m).");
        assert_eq!(own.reason(), Some(GateReason::Paused));
        assert!(Gates::default().is_open() && Gates::default().reason().is_none());
    }

    #[test]
    fn merging_is_a_union_by_budget_and_reason() {
        let mut a = Gates { paused: vec!["m".into()], budgets: vec![budget("team", &[GateReason::Paused])] };
        let b = Gates {
            paused: vec!["k".into()],
            budgets: vec![
                budget("pool", &[GateReason::Blackout]),
                budget("team", &[GateReason::Paused, GateReason::AlertsFiring]),
            ],
        };
        a.merge(&b);
        assert_eq!(a.paused, ["k", "m"]);
        assert_eq!(
            a.summary(),
            "paused (spec.paused); NodeDisruptionBudget pool: Blackout; NodeDisruptionBudget team: Paused, AlertsFiring"
        );
        let window = Gates { paused: vec![], budgets: vec![budget("w", &[GateReason::OutsideMaintenanceWindow])] };
        assert!(window.for_window());
    }
}
