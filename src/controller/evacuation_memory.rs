//! What evacuation by rollout keeps between decisions ([`super::evacuate`]): the workload
//! caches it decides from, the rollouts this process started and the Events it emitted.

use super::memory::locked;
use crate::cluster::deployments::WorkloadCaches;
use std::collections::HashSet;
use std::sync::Mutex;

/// What evacuation by rollout keeps between decisions: the caches it decides from, the
/// rollouts started in this process (the cache may trail the patch that started one), and
/// the "not evacuated" Events already emitted.
pub struct EvacuationMemory {
    /// The Deployments and ReplicaSets it decides from.
    pub(super) caches: WorkloadCaches,
    /// (maintenance uid, Deployment uid) of every rollout started here.
    pub(super) started: Mutex<HashSet<(String, String)>>,
    /// (maintenance name, note) of every `NotEvacuated` Event emitted.
    pub(super) reported: Mutex<HashSet<(String, String)>>,
}

impl EvacuationMemory {
    /// A memory deciding from `caches`.
    pub fn new(caches: WorkloadCaches) -> Self {
        EvacuationMemory { caches, started: Mutex::default(), reported: Mutex::default() }
    }
}

impl EvacuationMemory {
    /// Forgets the rollouts and Events of maintenances that are gone: `live_uid`
    /// and `live_name` say whether a maintenance with that uid or name exists. Returns the
    /// remaining (rollouts started, Events emitted).
    pub fn prune(&self, live_uid: impl Fn(&str) -> bool, live_name: impl Fn(&str) -> bool) -> (usize, usize) {
        let mut started = locked(&self.started);
        started.retain(|(nm_uid, _)| live_uid(nm_uid));
        let mut reported = locked(&self.reported);
        reported.retain(|(name, _)| live_name(name));
        (started.len(), reported.len())
    }

    /// Forgets the Events emitted for the maintenance `name`, which is gone (a new one may
    /// take its name).
    pub fn forget(&self, name: &str) {
        locked(&self.reported).retain(|(n, _)| n != name);
    }
}
