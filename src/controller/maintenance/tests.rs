//! The maintenance decision without a network.
use super::*;
use crate::api::{GateReason, NodeRef};
use crate::planner::gates::GateClosure;

fn node(name: &str, phase: NodePhase) -> NodeMaintenanceNodeStatus {
    NodeMaintenanceNodeStatus { node_ref: NodeRef { name: name.into() }, phase: Some(phase), ..Default::default() }
}

#[test]
fn a_drain_waits_for_gates_only_when_every_node_left_does() {
    let window = Wait::Gate {
        name: "w".into(),
        closed: vec![GateClosure { reason: GateReason::OutsideMaintenanceWindow, message: "Window shut".into() }],
    };
    let waiting = BTreeMap::from([("a".to_owned(), window), ("b".to_owned(), Wait::Turn { held: 1, limit: 1 })]);
    let gated = BTreeMap::from([("c".to_owned(), "Paused (spec.paused of NodeMaintenance m).".to_owned())]);
    let done = node("d", NodePhase::Released);
    let statuses = [node("a", NodePhase::Waiting), node("c", NodePhase::Draining), done.clone()];
    assert_eq!(
        gate_waits_of(&statuses, &waiting, &gated).as_deref(),
        Some("Paused (spec.paused of NodeMaintenance m). Window shut.")
    );
    let turn = [node("a", NodePhase::Waiting), node("b", NodePhase::Waiting)];
    assert_eq!(gate_waits_of(&turn, &waiting, &gated), None, "a wait for a place may be a stall");
    let draining = [node("a", NodePhase::Waiting), node("e", NodePhase::Draining)];
    assert_eq!(gate_waits_of(&draining, &waiting, &gated), None, "a draining node may be stalled");
    assert_eq!(gate_waits_of(&[done], &waiting, &gated), None, "nothing waits");
}
