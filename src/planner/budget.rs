//! Drain slots (issue 14): at most `spec.maxUnavailable` of a maintenance's selected nodes,
//! and at most `--max-draining-nodes` nodes over all maintenances, drain at once.
//!
//! A node needs a slot while its effective targets match pods the controller evicts (pending
//! or being evicted). A node that needs none (nothing targeted left, or only pods that are
//! reported) holds none, so a node waiting for the cursor of its maintenance never keeps
//! another from draining the entry that cursor waits for (with one slot, nodes take turns
//! at each drainPlan entry; docs/decisions.md "Node budget").
//!
//! Slots go first to nodes with evictions in progress (they are being disrupted already and
//! keep theirs even when a budget was lowered), then to the others in name order. A node
//! counts against the budget of every Drain maintenance selecting it and against the
//! cluster-wide cap: it drains only when all of them have room.

use super::index::{MaintIx, NodeIx};
use super::state::{Pass, Role};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use typed_index_collections::TiVec;

/// Whether a node may evict now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Slot {
    /// Nothing to evict: no slot needed.
    Unneeded,
    /// Draining in a slot.
    Draining,
    /// Has pods to evict but every slot of this budget is taken; the text names it
    /// (`maintenance-a: 2 of 2 nodes draining`).
    Waiting(String),
}

/// The node count `spec.maxUnavailable` allows out of `selected` nodes: the integer, or the
/// percentage rounded up (so any positive percentage allows at least one node). `Err` with
/// the reason for a value that is not a positive integer or a percentage from 1% to 100%.
pub fn max_unavailable(value: &IntOrString, selected: usize) -> Result<usize, String> {
    match value {
        IntOrString::Int(n) if *n >= 1 => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
        IntOrString::Int(n) => Err(format!("{n} is not a positive number of nodes")),
        IntOrString::String(s) => {
            let percent = s.strip_suffix('%').and_then(|p| p.parse::<usize>().ok()).filter(|p| (1..=100).contains(p));
            match percent {
                Some(p) => Ok((selected * p).div_ceil(100).max(1)),
                None => Err(format!("{s:?} is neither a positive integer nor a percentage from 1% to 100%")),
            }
        }
    }
}

/// Allots the drain slots of a pass; returns each node's slot and warnings about budgets
/// that could not be read (those count as no limit).
pub(super) fn allot(pass: &Pass<'_>) -> (TiVec<NodeIx, Slot>, Vec<String>) {
    let mut warnings = Vec::new();
    let limits: TiVec<MaintIx, Option<usize>> = pass
        .maints()
        .iter()
        .map(|m| {
            let value = m.max_unavailable()?;
            max_unavailable(value, m.nodes().len())
                .map_err(|e| warnings.push(format!("maintenance {}: spec.maxUnavailable {e}; not limited", m.name())))
                .ok()
        })
        .collect();
    let cap = pass.options().max_draining_nodes.filter(|&c| c > 0).map(|c| usize::try_from(c).unwrap_or(usize::MAX));
    let mut used: TiVec<MaintIx, usize> = pass.maints().iter().map(|_| 0).collect();
    let mut used_total = 0;
    let mut slots: TiVec<NodeIx, Slot> = pass.nodes().iter().map(|_| Slot::Unneeded).collect();
    let evicting = |n: NodeIx| pass.nodes()[n].pods().iter().filter(|p| p.targeted() && p.role() == Role::Evict);
    let active: TiVec<NodeIx, bool> =
        pass.nodes().keys().map(|n| evicting(n).any(|p| p.pod().eviction_in_progress)).collect();
    let first = pass.nodes().keys().filter(|&n| active[n]);
    let then = pass.nodes().keys().filter(|&n| !active[n] && evicting(n).next().is_some());
    for n in first.chain(then) {
        let maints = pass.nodes()[n].maints();
        let full_maint = maints.iter().find_map(|&m| {
            let limit = limits[m]?;
            (used[m] >= limit).then(|| format!("{}: {} of {limit} nodes draining", pass.maints()[m].name(), used[m]))
        });
        let full_cap = cap
            .filter(|&c| used_total >= c)
            .map(|c| format!("--max-draining-nodes: {used_total} of {c} nodes draining"));
        match full_maint.or(full_cap) {
            Some(full) if !active[n] => slots[n] = Slot::Waiting(full),
            _ => {
                for &m in maints {
                    used[m] += 1;
                }
                used_total += 1;
                slots[n] = Slot::Draining;
            }
        }
    }
    (slots, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unavailable_takes_integers_and_rounds_percentages_up() {
        assert_eq!(max_unavailable(&IntOrString::Int(2), 10), Ok(2));
        assert_eq!(max_unavailable(&IntOrString::String("25%".into()), 10), Ok(3));
        assert_eq!(max_unavailable(&IntOrString::String("1%".into()), 10), Ok(1));
        assert_eq!(max_unavailable(&IntOrString::String("100%".into()), 7), Ok(7));
        assert_eq!(max_unavailable(&IntOrString::String("50%".into()), 0), Ok(1));
        assert!(max_unavailable(&IntOrString::Int(0), 10).is_err());
        assert!(max_unavailable(&IntOrString::String("0%".into()), 10).is_err());
        assert!(max_unavailable(&IntOrString::String("101%".into()), 10).is_err());
        assert!(max_unavailable(&IntOrString::String("2".into()), 10).is_err());
    }
}
