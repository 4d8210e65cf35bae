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

use super::index::{MaintIx, NodeIx};
use super::state::Pass;
use std::collections::BTreeSet;
use typed_index_collections::{TiSlice, TiVec};

/// Finds standstills and breaks each one; returns the (node, winning maintenance) pairs
/// whose targets were raised.
pub(super) fn break_standstills(pass: &mut Pass<'_>) -> BTreeSet<(NodeIx, MaintIx)> {
    let mut parent: TiVec<MaintIx, MaintIx> = pass.maints().keys().collect();
    for node in pass.nodes() {
        if let Some((&first, rest)) = node.maints().split_first() {
            for &m in rest {
                union(&mut parent, first, m);
            }
        }
    }
    let mut busy_component: TiVec<MaintIx, bool> = pass.maints().iter().map(|_| false).collect();
    for (n, node) in pass.nodes().iter_enumerated() {
        if let Some(&m) = node.maints().first()
            && pass.busy(n)
        {
            let root = find(&mut parent, m);
            busy_component[root] = true;
        }
    }
    // The oldest stuck maintenance of each component that has no busy node.
    let mut winner: TiVec<MaintIx, Option<MaintIx>> = pass.maints().iter().map(|_| None).collect();
    for m in pass.maints().keys() {
        let root = find(&mut parent, m);
        if busy_component[root] || !pass.stuck(m) {
            continue;
        }
        let age = |m: MaintIx| pass.maints()[m].age();
        if winner[root].is_none_or(|w| age(m) < age(w)) {
            winner[root] = Some(m);
        }
    }
    let mut raised = BTreeSet::new();
    for w in winner.into_iter().flatten() {
        let Some(proposal) = pass.maints()[w].proposal().cloned() else { continue };
        for pos in 0..pass.maints()[w].nodes().len() {
            if pass.held(w, pos) {
                let n = pass.maints()[w].nodes()[pos];
                pass.raise(n, &proposal);
                raised.insert((n, w));
            }
        }
    }
    raised
}

fn find(parent: &mut TiSlice<MaintIx, MaintIx>, mut x: MaintIx) -> MaintIx {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

fn union(parent: &mut TiSlice<MaintIx, MaintIx>, a: MaintIx, b: MaintIx) {
    let (ra, rb) = (find(parent, a), find(parent, b));
    if ra != rb {
        parent[ra.max(rb)] = ra.min(rb);
    }
}
