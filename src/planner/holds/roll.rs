//! The roll order of a maintenance before it runs (for `review`): the allotment
//! repeated as if each wave of held nodes were given back at once. The controller starts the
//! next waiting node as soon as one place frees up, so real waves overlap; the order and the
//! budget waits are the same.

use super::{BudgetView, HoldRequest, NodeView, Wait, allot};
use std::collections::{BTreeMap, BTreeSet};

/// How a maintenance would roll over its selected nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RollOrder {
    /// Nodes held together, wave after wave (each in name order); the first wave is what the
    /// maintenance would hold now.
    pub waves: Vec<Vec<String>>,
    /// Why each node outside the first wave waits now.
    pub waiting_now: BTreeMap<String, Wait>,
    /// Nodes it would never hold (a budget that other holds or unavailable nodes keep at
    /// zero), with the wait that stops them.
    pub never: BTreeMap<String, Wait>,
}

/// Simulates `reviewed` (as if in Cordon or Drain now) next to the active maintenances
/// `others` over `nodes` and `budgets`: [`allot`] gives the first wave; its nodes are then
/// given back (released, no longer held or cordoned by it) and the next allotment gives the
/// next wave, until every selected node had its turn or none can start. The others keep
/// their holds throughout (their grants are added to the nodes). Pure; at most one round
/// per selected node.
pub fn roll_order(
    reviewed: &HoldRequest,
    others: &[HoldRequest],
    nodes: &[NodeView<'_>],
    budgets: &[BudgetView],
) -> RollOrder {
    let mut nodes = nodes.to_vec();
    let mut released = reviewed.released.clone();
    let mut order = RollOrder::default();
    let held_at_start: BTreeSet<String> =
        nodes.iter().filter(|n| n.holders.contains(&reviewed.name)).map(|n| n.name.to_string()).collect();
    for round in 0..=reviewed.selected.len() {
        let mut requests = others.to_vec();
        requests.push(HoldRequest { released: released.clone(), ..reviewed.clone() });
        let mut allotment = allot(&requests, &nodes, budgets);
        let mine = allotment.maintenances.remove(&reviewed.name).unwrap_or_default();
        if round == 0 {
            order.waiting_now = mine.waiting.clone();
        }
        if mine.hold.is_empty() {
            order.never = mine.waiting;
            break;
        }
        for n in nodes.iter_mut() {
            for (other, holds) in &allotment.maintenances {
                if holds.granted.contains(&*n.name) {
                    n.holders.to_mut().insert(other.clone());
                }
            }
            if mine.hold.contains(&*n.name) {
                n.holders.to_mut().remove(&reviewed.name);
                // Given back. A node it held at the start is unschedulable by its cordon
                // (taken as its own); any other keeps the cordon it had.
                if held_at_start.contains(&*n.name) {
                    n.unschedulable = false;
                }
            }
        }
        released.extend(mine.hold.iter().cloned());
        order.waves.push(mine.hold.into_iter().collect());
    }
    order
}
