//! Holds written but not yet seen in the Node cache. A cordon for a maintenance is
//! a patch; the watch that brings it back into the cache lags by a few milliseconds to
//! seconds. A reconcile in between (of this or another maintenance) must still count that
//! node as held, or a NodeDisruptionBudget of one would let two nodes go.

use super::memory::locked;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest a hold is kept here without the cache showing it: past it the write was lost or
/// undone, and the cache is the truth again.
const KEEP: Duration = Duration::from_secs(60);

/// (node, maintenance) holds written by this controller and not yet in the cache.
#[derive(Debug, Default)]
pub struct InFlightHolds(Mutex<HashMap<(String, String), Instant>>);

impl InFlightHolds {
    /// Notes that `maintenance` now holds `node` (its hold write succeeded).
    pub fn add(&self, node: &str, maintenance: &str) {
        locked(&self.0).insert((node.to_owned(), maintenance.to_owned()), Instant::now());
    }

    /// The maintenances holding `node` by writes the cache may not show yet; `cached` is the
    /// holders the cache shows, and entries it shows already (or that are too old) are
    /// forgotten.
    pub fn holders(&self, node: &str, cached: &BTreeSet<String>) -> BTreeSet<String> {
        let mut m = locked(&self.0);
        m.retain(|(n, holder), at| n != node || (!cached.contains(holder) && at.elapsed() < KEEP));
        m.keys().filter(|(n, _)| n == node).map(|(_, holder)| holder.clone()).collect()
    }

    /// Forgets holds older than the cache's lag can explain, on every node (a node
    /// deleted before the cache showed its hold is never asked about again). Returns how many
    /// remain.
    pub fn prune(&self) -> usize {
        let mut m = locked(&self.0);
        m.retain(|_, at| at.elapsed() < KEEP);
        m.len()
    }
}
