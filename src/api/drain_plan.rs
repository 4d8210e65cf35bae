//! drainPlan entries, pod types, the 12 KEP default entries and the canonical order
//! (KEP-4212 "Pod Selection", SPEC 2 and 3.1).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// Which kind of pod a drainPlan entry selects (SPEC 2 "Pod types").
///
/// Ordered `Default < DaemonSet < Static`: the order in which a drain reaches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
pub enum PodType {
    /// Every pod that is neither a DaemonSet pod nor a static (mirror) pod.
    Default,
    /// Pods whose controller ownerReference is of kind DaemonSet.
    DaemonSet,
    /// Mirror pods of static pods (annotation `kubernetes.io/config.mirror`).
    Static,
}

impl PodType {
    /// Every pod type, in drain order.
    pub const ALL: [PodType; 3] = [PodType::Default, PodType::DaemonSet, PodType::Static];

    /// The name as it appears in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            PodType::Default => "Default",
            PodType::DaemonSet => "DaemonSet",
            PodType::Static => "Static",
        }
    }

    /// Parses the API name; `None` for anything else.
    pub fn parse(name: &str) -> Option<PodType> {
        PodType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

impl fmt::Display for PodType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a drain: pods of `podType` with priority `<= podPriority` (and, when given,
/// labels matching `podSelector`) are evicted in this step.
///
/// Also used for drain targets (`status.drainStatus.reachedDrainTargets`,
/// `status.nodeStatuses[].drainTargets`), as in the KEP.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainPlanEntry {
    /// Pods with a priority (`spec.priority`, 0 when absent) less than or equal to this value
    /// are selected. int32.
    pub pod_priority: i32,
    /// Default (every pod that is not a DaemonSet or static pod), DaemonSet, or Static.
    pub pod_type: PodType,
    /// Optional label selector: only pods whose labels match are selected by this entry.
    /// Entries with a selector run before the entry without one at the same podType and
    /// podPriority. In `spec.drainPlan`, at most 64 matchLabels and 64 matchExpressions of at
    /// most 256 values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
}

/// The pod priorities of the 12 entries every drainPlan contains (KEP-4212 "Pod Selection"):
/// the highest user-definable priority, `system-cluster-critical`, `system-node-critical`,
/// and the int32 maximum.
pub const DEFAULT_PRIORITIES: [i32; 4] = [1_000_000_000, 2_000_000_000, 2_000_001_000, i32::MAX];

impl DrainPlanEntry {
    /// An entry without podSelector.
    pub fn new(pod_type: PodType, pod_priority: i32) -> Self {
        DrainPlanEntry { pod_priority, pod_type, pod_selector: None }
    }

    /// The 12 default entries (SPEC 3.1) in canonical order.
    pub fn defaults() -> impl Iterator<Item = DrainPlanEntry> {
        PodType::ALL.into_iter().flat_map(|t| DEFAULT_PRIORITIES.into_iter().map(move |p| DrainPlanEntry::new(t, p)))
    }

    /// Canonical order (SPEC 3.1): podType `Default < DaemonSet < Static`, then podPriority
    /// ascending, then entries with a podSelector before the one without. Entries equal under
    /// this order keep their relative order when sorted with a stable sort.
    pub fn canonical_cmp(&self, other: &Self) -> Ordering {
        self.pod_type
            .cmp(&other.pod_type)
            .then(self.pod_priority.cmp(&other.pod_priority))
            .then(self.pod_selector.is_none().cmp(&other.pod_selector.is_none()))
    }
}

/// Returns the plan with every missing default entry added and put in canonical order
/// (SPEC 3.1). Idempotent: `default_plan(&default_plan(p)) == default_plan(p)`.
pub fn default_plan(plan: &[DrainPlanEntry]) -> Vec<DrainPlanEntry> {
    let mut out = plan.to_vec();
    for d in DrainPlanEntry::defaults() {
        if !plan.contains(&d) {
            out.push(d);
        }
    }
    out.sort_by(DrainPlanEntry::canonical_cmp);
    out
}

/// Whether the plan is in canonical order (SPEC 3.2). Returns the index of the first entry
/// that comes before its predecessor, if any.
pub fn first_out_of_order(plan: &[DrainPlanEntry]) -> Option<usize> {
    plan.windows(2).position(|w| w[0].canonical_cmp(&w[1]) == Ordering::Greater).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn with_selector(t: PodType, p: i32) -> DrainPlanEntry {
        DrainPlanEntry {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), "postgres".into())])),
                ..Default::default()
            }),
            ..DrainPlanEntry::new(t, p)
        }
    }

    #[test]
    fn defaults_are_the_twelve_kep_entries_in_canonical_order() {
        let d: Vec<_> = DrainPlanEntry::defaults().collect();
        assert_eq!(d.len(), 12);
        assert_eq!(d[0], DrainPlanEntry::new(PodType::Default, 1_000_000_000));
        assert_eq!(d[11], DrainPlanEntry::new(PodType::Static, 2_147_483_647));
        assert_eq!(first_out_of_order(&d), None);
    }

    #[test]
    fn selector_entries_run_before_the_plain_entry_of_same_type_and_priority() {
        let plain = DrainPlanEntry::new(PodType::Default, 5000);
        let sel = with_selector(PodType::Default, 5000);
        assert_eq!(sel.canonical_cmp(&plain), Ordering::Less);
        assert_eq!(plain.canonical_cmp(&sel), Ordering::Greater);
        assert_eq!(first_out_of_order(&[plain, sel]), Some(1));
    }

    #[test]
    fn default_plan_adds_missing_sorts_and_is_idempotent() {
        let user = vec![
            DrainPlanEntry::new(PodType::Default, 15000),
            DrainPlanEntry::new(PodType::DaemonSet, 3000),
            DrainPlanEntry::new(PodType::Default, 5000),
            with_selector(PodType::Default, 5000),
        ];
        let out = default_plan(&user);
        assert_eq!(out.len(), 16);
        assert_eq!(out[0], with_selector(PodType::Default, 5000));
        assert_eq!(out[1], DrainPlanEntry::new(PodType::Default, 5000));
        assert_eq!(out[2], DrainPlanEntry::new(PodType::Default, 15000));
        assert_eq!(out[7], DrainPlanEntry::new(PodType::DaemonSet, 3000));
        assert_eq!(default_plan(&out), out);
    }

    #[test]
    fn a_default_entry_with_selector_does_not_count_as_present() {
        let user = vec![with_selector(PodType::Static, i32::MAX)];
        let out = default_plan(&user);
        assert_eq!(out.len(), 13);
        assert_eq!(out[11], with_selector(PodType::Static, i32::MAX));
        assert_eq!(out[12], DrainPlanEntry::new(PodType::Static, i32::MAX));
    }
}
