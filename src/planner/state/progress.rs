//! Whether a maintenance still has pods matching its proposal, and whether a node drains
//! (SPEC 4.3 "Advancing", "Messages"): the questions `stall` and `publish` ask of a pass.
//!
//! A maintenance's nodes are addressed by position in [`MaintState::nodes`] (`pos`): its
//! first matches are stored in that order.

use super::{MaintState, Pass, Role};
use crate::planner::index::{MaintIx, NodeIx};

impl MaintState<'_> {
    /// The first-match values of its pods on its `pos`-th node (`len` pods there).
    fn firsts_at(&self, pos: usize, len: usize) -> &[u32] {
        let start = self.offsets[pos];
        self.firsts.get(start..start + len).unwrap_or_default()
    }
}

impl Pass<'_> {
    /// Pods of maintenance `m` on its `pos`-th node that match its proposal, with whether each
    /// is targeted by the node's effective targets.
    fn matching_at(&self, m: MaintIx, pos: usize) -> impl Iterator<Item = bool> + '_ {
        let maint = &self.maints[m];
        let pods = &self.nodes[maint.nodes[pos]].pods;
        let cursor = u32::try_from(maint.cursor).unwrap_or(u32::MAX);
        maint.firsts_at(pos, pods.len()).iter().zip(pods).filter(move |(f, _)| **f <= cursor).map(|(_, p)| p.targeted)
    }

    /// Some responsible pod on the maintenance's `pos`-th node matches its proposal.
    pub(in crate::planner) fn has_matching(&self, m: MaintIx, pos: usize) -> bool {
        self.matching_at(m, pos).next().is_some()
    }

    /// Some responsible pod on the maintenance's `pos`-th node matches its proposal but is
    /// not targeted there: another maintenance holds that node back.
    pub(in crate::planner) fn held(&self, m: MaintIx, pos: usize) -> bool {
        self.matching_at(m, pos).any(|t| !t)
    }

    /// The maintenance still has pods matching its proposal: its cursor cannot advance.
    pub(in crate::planner) fn stuck(&self, m: MaintIx) -> bool {
        (0..self.maints[m].nodes.len()).any(|pos| self.has_matching(m, pos))
    }

    /// Some responsible pod on node `n` is targeted: the node drains.
    pub(in crate::planner) fn busy(&self, n: NodeIx) -> bool {
        self.nodes[n].pods.iter().any(|p| p.targeted && p.role == Role::Evict)
    }
}
