//! A maintenance's drainPlan, compiled: which entry first matches a pod, the proposed targets
//! at a cursor, and how far the cursor advances (SPEC 4.3 "Targets" and "Advancing").
//!
//! A pod matches the proposal at cursor `c` exactly when some entry `0..=c` matches it
//! directly (the entry giving the group's priority is such an entry). So the first entry
//! matching a pod tells at which cursor the pod becomes part of the plan, and the cursor
//! after advancing is the first entry, from the stored cursor on, that still has a pod.

use super::selectors::SelectorTable;
use super::targets::{Group, PodKey, Targets};
use crate::api::{DrainPlanEntry, PodType};

/// One drainPlan entry with its selector interned.
#[derive(Clone, Copy, Debug)]
struct Entry {
    group: Group,
    priority: i32,
}

/// A drainPlan, compiled against a [`SelectorTable`].
#[derive(Clone, Debug, Default)]
pub(crate) struct CompiledPlan {
    entries: Vec<Entry>,
    /// The distinct groups of the plan, in group order.
    groups: Vec<Group>,
}

impl CompiledPlan {
    /// Compiles a plan; entries whose selector is not in the table match no pod.
    pub(crate) fn compile(plan: &[DrainPlanEntry], table: &SelectorTable) -> Self {
        let entries: Vec<Entry> = plan
            .iter()
            .map(|e| Entry {
                group: Group {
                    pod_type: e.pod_type,
                    // An unknown selector gets an id no table holds: it then matches nothing.
                    selector: e.pod_selector.as_ref().map(|s| table.id_of(s).unwrap_or(u32::MAX)),
                },
                priority: e.pod_priority,
            })
            .collect();
        let mut groups: Vec<Group> = entries.iter().map(|e| e.group).collect();
        groups.sort();
        groups.dedup();
        CompiledPlan { entries, groups }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Index of the last entry, `None` for an empty plan.
    pub(crate) fn last(&self) -> Option<usize> {
        self.entries.len().checked_sub(1)
    }

    /// The first entry in `0..=bound` that matches the pod directly, if any.
    pub(crate) fn first_match(&self, pod: &PodKey<'_>, bound: usize, table: &SelectorTable) -> Option<usize> {
        self.entries.iter().take(bound.saturating_add(1)).position(|e| {
            e.group.pod_type == pod.pod_type
                && pod.priority <= e.priority
                && e.group.selector.is_none_or(|id| pod.selected_by(id, table))
        })
    }

    /// The proposed targets at `cursor` (SPEC 4.3 "Targets"): one per group of the plan whose
    /// podType some entry `0..=cursor` has, with the highest priority among entries
    /// `0..=cursor` that apply to the group (a no-selector entry applies to every group of its
    /// podType, a selector entry to its own group only). A group no such entry applies to yet
    /// is left out.
    pub(crate) fn proposal(&self, cursor: usize) -> Targets {
        let upto = &self.entries[..cursor.saturating_add(1).min(self.entries.len())];
        let reached = |t: PodType| upto.iter().any(|e| e.group.pod_type == t);
        let pairs = self.groups.iter().filter(|g| reached(g.pod_type)).filter_map(|g| {
            upto.iter()
                .filter(|e| e.group == *g || (e.group.pod_type == g.pod_type && e.group.selector.is_none()))
                .map(|e| e.priority)
                .max()
                .map(|p| (*g, p))
        });
        Targets::from_pairs(pairs.collect::<Vec<_>>())
    }
}

/// Advances a cursor (SPEC 4.3 "Advancing"): the result is the first entry, from `stored`
/// on, that some pod still matches; the last entry when no pod matches any of them. Also
/// returns, per pod, its first matching entry when that is at most the result (otherwise
/// `u32::MAX`): a pod matches the proposal at the result exactly when its value is `<=` it.
/// A `None` pod (one the controller is not responsible for) neither holds the cursor nor
/// matches (`u32::MAX`).
///
/// `stored` is clamped to the plan; an empty plan yields `(0, all MAX)`.
pub(crate) fn advance<'p>(
    plan: &CompiledPlan,
    stored: usize,
    pods: impl IntoIterator<Item = Option<PodKey<'p>>>,
    table: &SelectorTable,
) -> (usize, Vec<u32>) {
    let Some(last) = plan.last() else {
        return (0, pods.into_iter().map(|_| u32::MAX).collect());
    };
    let stored = stored.min(last);
    let mut bound = last;
    let firsts = pods
        .into_iter()
        .map(|pod| match pod.and_then(|pod| plan.first_match(&pod, bound, table)) {
            Some(j) => {
                bound = bound.min(j.max(stored));
                u32::try_from(j).unwrap_or(u32::MAX)
            }
            None => u32::MAX,
        })
        .collect();
    (bound, firsts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::PodLabels;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use std::collections::BTreeMap;

    fn pg() -> LabelSelector {
        LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "postgres".to_string())])),
            ..Default::default()
        }
    }

    fn entry(t: PodType, p: i32, sel: bool) -> DrainPlanEntry {
        DrainPlanEntry { pod_priority: p, pod_type: t, pod_selector: sel.then(pg) }
    }

    /// The KEP's "PodTypes and Label Selectors Progression" plan.
    fn progression() -> (CompiledPlan, SelectorTable) {
        let plan = vec![
            entry(PodType::Default, 1000, false),
            entry(PodType::Default, 2000, true),
            entry(PodType::Default, i32::MAX, false),
            entry(PodType::DaemonSet, 1000, false),
        ];
        let sel = pg();
        let (table, _) = SelectorTable::build([&sel]);
        (CompiledPlan::compile(&plan, &table), table)
    }

    #[test]
    fn proposal_has_one_target_per_group_with_the_highest_applying_priority() {
        let (plan, table) = progression();
        let shown = |c| plan.proposal(c).to_entries(&table);
        assert_eq!(shown(0), vec![entry(PodType::Default, 1000, false), entry(PodType::Default, 1000, true)]);
        assert_eq!(shown(1), vec![entry(PodType::Default, 1000, false), entry(PodType::Default, 2000, true)]);
        assert_eq!(
            shown(3),
            vec![
                entry(PodType::Default, i32::MAX, false),
                entry(PodType::Default, i32::MAX, true),
                entry(PodType::DaemonSet, 1000, false)
            ]
        );
    }

    #[test]
    fn proposal_leaves_out_pod_types_the_cursor_has_not_reached() {
        let (plan, _) = progression();
        assert!(!plan.proposal(2).has_type(PodType::DaemonSet));
        assert!(plan.proposal(3).has_type(PodType::DaemonSet));
    }

    #[test]
    fn proposal_leaves_out_a_group_no_entry_applies_to_yet() {
        let plan = vec![entry(PodType::Default, 500, true), entry(PodType::Default, 1000, false)];
        let sel = pg();
        let (table, _) = SelectorTable::build([&sel]);
        let c = CompiledPlan::compile(&plan, &table);
        assert_eq!(c.proposal(0).to_entries(&table), vec![entry(PodType::Default, 500, true)]);
    }

    #[test]
    fn cursor_advances_past_every_entry_no_pod_matches() {
        let (plan, table) = progression();
        let labels = PodLabels::default();
        let ds = PodKey { pod_type: PodType::DaemonSet, priority: 10, labels: &labels, selected: None };
        let (cursor, firsts) = advance(&plan, 0, [Some(ds), None], &table);
        assert_eq!((cursor, firsts), (3, vec![3, u32::MAX]));
    }

    #[test]
    fn cursor_stays_while_a_pod_matches_and_never_moves_back() {
        let (plan, table) = progression();
        let labels = PodLabels::default();
        let low = PodKey { pod_type: PodType::Default, priority: 10, labels: &labels, selected: None };
        assert_eq!(advance(&plan, 0, [Some(low)], &table).0, 0);
        let low = PodKey { pod_type: PodType::Default, priority: 10, labels: &labels, selected: None };
        assert_eq!(advance(&plan, 2, [Some(low)], &table).0, 2);
    }

    #[test]
    fn cursor_without_pods_goes_to_the_last_entry() {
        let (plan, table) = progression();
        assert_eq!(advance(&plan, 0, std::iter::empty(), &table).0, 3);
        assert_eq!(advance(&CompiledPlan::default(), 5, std::iter::empty(), &table).0, 0);
    }
}
