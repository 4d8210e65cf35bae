//! Which maintenances have a `pods_pending_eviction` series (SPEC 4.4): state the
//! controller's context owns; [`super`] keeps it in step with the gauge.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The names of the maintenances that have a `pods_pending_eviction` series (a `Family`
/// cannot list its label sets).
#[derive(Debug, Default)]
pub struct PendingSeries(pub(super) Mutex<BTreeSet<String>>);

impl PendingSeries {
    /// Number of series (a gauge, flat over time).
    pub fn len(&self) -> usize {
        self.0.lock().map_or(0, |s| s.len())
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
