//! Breaking a standstill between conflicting plans.
//!
//! Plans without podSelectors order pods the same way (by podType, then priority), so the
//! least advanced proposal always has its pods targeted and the drain always moves. With
//! podSelectors two plans can order two pods in opposite ways (plan A: plain priority 4
//! before `app=pg` priority 7; plan B: the reverse). The group-wise minimum then targets
//! neither pod, both maintenances wait for each other and nothing would ever change.
//!
//! SPEC 4.3 does not cover this; following the KEP's rule that the preconditions of older
//! maintenances win (the newer one is fast-forwarded, with an Event), a standstill is broken
//! in favour of the oldest maintenance involved: on its nodes where its pods are held back,
//! the targets are raised to its proposal, and the others are reported as fast-forwarded.
//!
//! A standstill is a connected group of maintenances (sharing nodes) where no node has a
//! targeted pod left and some maintenance still has pods matching its proposal.

use super::state::Pass;
use std::collections::BTreeSet;

/// Finds standstills and breaks each one; returns the (node, winning maintenance) pairs
/// whose targets were raised.
pub(super) fn break_standstills(pass: &mut Pass<'_>) -> BTreeSet<(usize, usize)> {
    let count = pass.maint_nodes.len();
    let mut parent: Vec<usize> = (0..count).collect();
    for maints in &pass.node_maints {
        if let Some((&first, rest)) = maints.split_first() {
            for &m in rest {
                union(&mut parent, first, m);
            }
        }
    }
    let mut busy_component = vec![false; count];
    for (n, maints) in pass.node_maints.iter().enumerate() {
        if let Some(&m) = maints.first()
            && pass.busy(n)
        {
            let root = find(&mut parent, m);
            busy_component[root] = true;
        }
    }
    // The oldest stuck maintenance of each component that has no busy node.
    let mut winner: Vec<Option<usize>> = vec![None; count];
    for m in 0..count {
        let root = find(&mut parent, m);
        if busy_component[root] || !pass.stuck(m) {
            continue;
        }
        let age = |m: usize| {
            let mi = &pass.input.maintenances[m];
            (mi.created, mi.name.as_str())
        };
        if winner[root].is_none_or(|w| age(m) < age(w)) {
            winner[root] = Some(m);
        }
    }
    let mut raised = BTreeSet::new();
    for w in winner.into_iter().flatten() {
        let Some(proposal) = pass.proposal[w].clone() else { continue };
        for pos in 0..pass.maint_nodes[w].len() {
            if pass.held(w, pos) {
                let n = pass.maint_nodes[w][pos];
                pass.effective[n] = pass.effective[n].max(&proposal);
                pass.retarget(n);
                raised.insert((n, w));
            }
        }
    }
    raised
}

fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn union(parent: &mut [usize], a: usize, b: usize) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}
