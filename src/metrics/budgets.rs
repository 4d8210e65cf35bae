//! The NodeDisruptionBudget gauges of the controller's last decision (SPEC 4.5, 4.6),
//! encoded at scrape time.

use super::{BudgetGateLabels, BudgetLabels, encode_gauges};
use crate::api::GateReason;
use crate::planner::decide::cluster::BudgetGauges;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The NodeDisruptionBudget gauges (SPEC 4.5, 4.6) of the controller's last decision
/// ([`crate::planner::decide::cluster::ClusterDecision::budget_gauges`]), by budget name,
/// encoded at each scrape: what the series say is what the last decision said, and a budget
/// that is gone has no series from the next decision on. Empty while this replica does not
/// lead (a former leader's last values must not page anyone). A poisoned lock is taken over
/// as it is: the map is replaced whole.
#[derive(Clone, Debug, Default)]
pub struct BudgetGaugesView(Arc<Mutex<BTreeMap<String, BudgetGauges>>>);

impl BudgetGaugesView {
    /// Publishes the gauges of a decision, replacing the last ones.
    pub fn set(&self, gauges: BTreeMap<String, BudgetGauges>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = gauges;
    }

    /// Publishes none (the leadership term ended).
    pub fn clear(&self) {
        self.set(BTreeMap::new());
    }
}

impl Collector for BudgetGaugesView {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let budgets = self.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let e = &mut encoder;
        fn count(n: usize) -> i64 {
            i64::try_from(n).unwrap_or(i64::MAX)
        }
        let per_budget = |value: fn(&BudgetGauges) -> Option<i64>| {
            budgets.iter().filter_map(move |(b, g)| Some((BudgetLabels { budget: b.clone() }, value(g)?)))
        };
        let per_gate = |value: fn(Option<i64>) -> Option<i64>| {
            budgets.iter().flat_map(move |(b, g)| {
                GateReason::ALL.into_iter().filter_map(move |gate| {
                    let since = g.closed.iter().find(|(r, _)| *r == gate).map(|(_, since)| *since);
                    Some((BudgetGateLabels { budget: b.clone(), gate: gate.as_str() }, value(since)?))
                })
            })
        };
        encode_gauges(
            e,
            "budget_disruptions_allowed",
            "Nodes a NodeDisruptionBudget lets be disrupted now",
            None,
            per_budget(|g| Some(count(g.allowed))),
        )?;
        encode_gauges(
            e,
            "budget_unavailable_nodes",
            "Selected nodes of a NodeDisruptionBudget that are not Ready or unschedulable",
            None,
            per_budget(|g| Some(count(g.unavailable))),
        )?;
        encode_gauges(
            e,
            "budget_waiting_nodes",
            "Nodes maintenances would hold that wait for a NodeDisruptionBudget",
            None,
            per_budget(|g| Some(count(g.waiting))),
        )?;
        encode_gauges(
            e,
            "budget_gate_closed",
            "1 while a gate of a NodeDisruptionBudget is closed (no maintenance starts on its nodes), else 0",
            None,
            per_gate(|since| Some(i64::from(since.is_some()))),
        )?;
        encode_gauges(
            e,
            "budget_gate_closed_since_timestamp_seconds",
            "Since when a closed gate of a NodeDisruptionBudget has been closed (Unix seconds)",
            None,
            per_gate(|since| since),
        )?;
        encode_gauges(
            e,
            "budget_pause_requests",
            "Pause requests on a NodeDisruptionBudget",
            None,
            per_budget(|g| Some(count(g.pause_requests))),
        )?;
        encode_gauges(
            e,
            "budget_window_next_open_timestamp_seconds",
            "When a closed maintenance window of a NodeDisruptionBudget next opens (Unix seconds)",
            None,
            per_budget(|g| g.next_open),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn budget_gauges_are_the_last_decision_s_at_scrape_time_and_none_after_the_term() {
        let (m, registry) = Metrics::new();
        let closed = vec![(GateReason::Paused, 100)];
        let gauges = BudgetGauges { allowed: 1, waiting: 2, closed, next_open: Some(200), ..Default::default() };
        m.budgets.set(BTreeMap::from([("b".to_owned(), gauges)]));
        let scrape = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        let text = scrape();
        for line in [
            r#"node_maintenance_budget_disruptions_allowed{budget="b"} 1"#,
            r#"node_maintenance_budget_waiting_nodes{budget="b"} 2"#,
            r#"node_maintenance_budget_gate_closed{budget="b",gate="Paused"} 1"#,
            r#"node_maintenance_budget_gate_closed{budget="b",gate="Blackout"} 0"#,
            r#"node_maintenance_budget_gate_closed_since_timestamp_seconds{budget="b",gate="Paused"} 100"#,
            r#"node_maintenance_budget_window_next_open_timestamp_seconds{budget="b"} 200"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
        assert!(
            !text.contains(r#"gate_closed_since_timestamp_seconds{budget="b",gate="Blackout"}"#),
            "only closed gates"
        );
        m.budgets.clear();
        let text = scrape();
        assert!(!text.contains(r#"budget="b""#), "{text}");
        assert!(text.contains("# TYPE node_maintenance_budget_gate_closed gauge"), "the names stay on /metrics");
    }
}
