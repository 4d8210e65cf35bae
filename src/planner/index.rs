//! The index spaces of one planning pass, each its own type so that indexing per-node state
//! with a maintenance index (or the reverse) does not compile.
//!
//! - [`NodeIx`]: a selected node, in name order ([`Pass::nodes`](super::state::Pass::nodes)).
//! - [`MaintIx`]: a maintenance, in input order (`PlannerInput::maintenances`).
//! - [`ClassIx`]: a class of nodes with the same maintenances and targets (`publish`).
//!
//! Pods have no index space: a node's pod state holds a reference to its `PodView`. Plan
//! entries (the cursor) and selectors keep plain integers: `proposal` and `selectors` take
//! and return them in their unit tests, which pin that interface.
//!
//! The vectors over these spaces are `typed_index_collections::TiVec` / `TiSlice` (MIT OR
//! Apache-2.0, no dependencies, maintained; `index_vec` also fits but is older and less kept
//! up): a `Vec` indexed by the key type only, with `iter_enumerated` yielding typed keys.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

macro_rules! index_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(super) struct $name(usize);

        impl From<usize> for $name {
            fn from(i: usize) -> Self {
                $name(i)
            }
        }

        impl From<$name> for usize {
            fn from(i: $name) -> usize {
                i.0
            }
        }
    };
}

index_type!(
    /// Index of a selected node.
    NodeIx
);
index_type!(
    /// Index of a maintenance in the input.
    MaintIx
);
index_type!(
    /// Index of a node class (same maintenances, same effective targets).
    ClassIx
);

/// FNV-1a, for the node-name index that every pod is looked up in: several times faster than
/// the default SipHash on short names. Node names come from the API server, so hash flooding
/// is not a concern here.
pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Node name to node index.
pub(super) type NodeLookup<'a> = HashMap<&'a str, NodeIx, BuildHasherDefault<Fnv>>;
