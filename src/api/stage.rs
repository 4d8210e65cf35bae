//! The maintenance stage (KEP-4212 "NodeMaintenance API", SPEC 2 and 3.3).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The stage a NodeMaintenance is asked to be in.
///
/// Stages are ordered `Idle < Cordon < Drain < Complete` (the derived `Ord` follows the
/// declaration order); an update may keep the stage or move it forward, never back
/// (SPEC 3.3). The default is `Idle`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Stage {
    /// Planning only: the controller touches no node and no pod.
    #[default]
    Idle,
    /// Every selected node is made unschedulable (`spec.unschedulable: true`).
    Cordon,
    /// Cordon first, then evict pods by the drainPlan.
    Drain,
    /// Stop evicting and make the nodes schedulable again unless something else holds them.
    Complete,
}

impl Stage {
    /// Every stage, in stage order.
    pub const ALL: [Stage; 4] = [Stage::Idle, Stage::Cordon, Stage::Drain, Stage::Complete];

    /// The name as it appears in the API (`"Idle"`, `"Cordon"`, `"Drain"`, `"Complete"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Idle => "Idle",
            Stage::Cordon => "Cordon",
            Stage::Drain => "Drain",
            Stage::Complete => "Complete",
        }
    }

    /// Parses the API name; `None` for anything else (the caller reports it with a field path).
    pub fn parse(name: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether a maintenance in this stage holds its nodes (Cordon or Drain: SPEC 3.5 "active").
    pub fn is_active(self) -> bool {
        matches!(self, Stage::Cordon | Stage::Drain)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_order_is_idle_cordon_drain_complete() {
        assert!(Stage::Idle < Stage::Cordon);
        assert!(Stage::Cordon < Stage::Drain);
        assert!(Stage::Drain < Stage::Complete);
        assert_eq!(Stage::default(), Stage::Idle);
    }

    #[test]
    fn parse_round_trips_and_rejects_unknown() {
        for s in Stage::ALL {
            assert_eq!(Stage::parse(s.as_str()), Some(s));
        }
        assert_eq!(Stage::parse("Rebooting"), None);
        assert_eq!(Stage::parse("idle"), None);
    }
}
