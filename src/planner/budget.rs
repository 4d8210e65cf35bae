//! Drain slots: at most `--max-draining-nodes` nodes over all maintenances drain
//! at once. (A maintenance's own `spec.maxUnavailable` limits the nodes it holds:
//! the controller plans only held nodes, so it needs no slot here.)
//!
//! A node needs a slot while its effective targets match pods the controller evicts (pending
//! or being evicted). A node that needs none (nothing targeted left, or only pods that are
//! reported) holds none, so a node waiting for the cursor of its maintenance never keeps
//! another from draining the entry that cursor waits for (with one slot, nodes take turns
//! at each drainPlan entry; docs/decisions.md "Node budget").
//!
//! Slots go first to nodes with evictions in progress (they are being disrupted already and
//! keep theirs even when the cap was lowered), then to the others in name order.

use super::index::NodeIx;
use super::state::{Pass, Role};
use typed_index_collections::TiVec;

/// Whether a node may evict now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// Nothing to evict: no slot needed.
    Unneeded,
    /// Draining in a slot.
    Draining,
    /// Has pods to evict but every slot is taken; the text names the cap
    /// (`--max-draining-nodes: 2 of 2 nodes draining`).
    Waiting(String),
    /// No new eviction may start on it (a pause or a closed gate, SPEC 4.6: the node's
    /// [`super::wait::Gates`]), whether or not it has pods to evict. Takes no slot.
    Gated,
}

/// Allots the drain slots of a pass: each node's slot.
pub(super) fn allot(pass: &Pass<'_>) -> TiVec<NodeIx, Slot> {
    let cap = pass.options().max_draining_nodes.filter(|&c| c > 0).map(|c| usize::try_from(c).unwrap_or(usize::MAX));
    let mut used = 0;
    let mut slots: TiVec<NodeIx, Slot> =
        pass.nodes().iter().map(|n| if n.gated().is_some() { Slot::Gated } else { Slot::Unneeded }).collect();
    let evicting = |n: NodeIx| pass.nodes()[n].pods().iter().filter(|p| p.targeted() && p.role() == Role::Evict);
    let active: TiVec<NodeIx, bool> =
        pass.nodes().keys().map(|n| evicting(n).any(|p| p.pod().eviction_in_progress)).collect();
    let first = pass.nodes().keys().filter(|&n| active[n]);
    let then = pass.nodes().keys().filter(|&n| !active[n] && evicting(n).next().is_some());
    for n in first.chain(then).filter(|&n| pass.nodes()[n].gated().is_none()) {
        match cap.filter(|&c| used >= c) {
            Some(c) if !active[n] => {
                slots[n] = Slot::Waiting(format!("--max-draining-nodes: {used} of {c} nodes draining"));
            }
            _ => {
                used += 1;
                slots[n] = Slot::Draining;
            }
        }
    }
    slots
}
