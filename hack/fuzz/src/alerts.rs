//! An alert selector through the public path the controller takes: a budget whose alert
//! gate has it as its only matcher, evaluated over one firing alert at a time.

use node_maintenance::api::{AlertGate, GateReason, HealthGate, NodeDisruptionBudgetSpec};
use node_maintenance::gates::{AlertsView, CompiledGates, alert_gate_errors};
use std::collections::BTreeMap;

/// A compiled selector, or why admission refuses it.
pub struct Compiled(CompiledGates);

/// Compiles `selector`; `Err` with admission's messages when it is refused. The controller's
/// gates and admission read a selector with the same function (`gates::alerts::compile`):
/// admission is asked only when the gate does not read, which keeps one regex compilation
/// per selector in the fuzz loop.
pub fn compile(selector: &str) -> Result<Compiled, Vec<String>> {
    let gate = AlertGate { matchers: vec![selector.to_owned()], ignore: vec![] };
    let spec = NodeDisruptionBudgetSpec {
        health_gate: Some(HealthGate { max_unhealthy: None, alerts: Some(gate.clone()) }),
        ..Default::default()
    };
    let gates = CompiledGates::compile("b", &spec);
    if !fires(&gates, &BTreeMap::new()) {
        return Ok(Compiled(gates));
    }
    // Closed for an alert without labels: Prometheus' rule says a selector that matches
    // one is refused, and one that does not read keeps the gate closed.
    let errors = alert_gate_errors(&gate);
    assert!(!errors.is_empty(), "{selector:?} accepted but matches an alert without labels");
    Err(errors.iter().map(ToString::to_string).collect())
}

fn fires(gates: &CompiledGates, alert: &BTreeMap<String, String>) -> bool {
    let v = gates.evaluate(&[], &AlertsView::Firing(vec![alert.clone()]), jiff::Timestamp::UNIX_EPOCH);
    v.closed.iter().any(|c| c.reason == GateReason::AlertsFiring)
}

impl Compiled {
    /// Whether a firing alert with `labels` closes the gate: the selector matches it.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        fires(&self.0, labels)
    }
}
