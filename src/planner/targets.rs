//! Drain targets as a map from (podType, podSelector) group to podPriority, and the
//! group-wise minimum and maximum of SPEC 4.3 "Combining".
//!
//! The level of a group in a target set is its own priority, or, when the set has no such
//! group, the priority of the set's no-selector group of the same podType, or nothing at all
//! when the set has not reached that podType ([`Targets::level`]).

use super::pods::PodLabels;
use super::selectors::{SelId, SelectorTable};
use crate::api::{DrainPlanEntry, PodType};
use std::collections::BTreeMap;

/// A (podType, podSelector) group. Orders by podType, then the no-selector group first,
/// then selectors in [`SelectorTable`] id order: the order drain targets are published in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Group {
    pub(crate) pod_type: PodType,
    pub(crate) selector: Option<SelId>,
}

impl Group {
    /// The no-selector group of the same podType.
    pub(crate) fn plain(self) -> Group {
        Group { selector: None, ..self }
    }
}

/// A set of drain targets: at most one priority per group, kept sorted by group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Targets {
    entries: Vec<(Group, i32)>,
}

/// What a pod looks like to target matching.
pub(crate) struct PodKey<'a> {
    pub(crate) pod_type: PodType,
    pub(crate) priority: i32,
    pub(crate) labels: &'a PodLabels,
    /// Precomputed matches of the first 64 selectors (bit `id` set when selector `id` matches);
    /// `None` to match every selector against the labels.
    pub(crate) selected: Option<u64>,
}

impl PodKey<'_> {
    /// Whether selector `id` matches the pod's labels.
    pub(crate) fn selected_by(&self, id: SelId, table: &SelectorTable) -> bool {
        match self.selected {
            Some(bits) if id < 64 => bits >> id & 1 == 1,
            _ => table.matches(id, self.labels),
        }
    }
}

impl Targets {
    /// Builds a set from (group, priority) pairs; a group given twice keeps its highest priority.
    pub(crate) fn from_pairs(pairs: impl IntoIterator<Item = (Group, i32)>) -> Self {
        let mut map: BTreeMap<Group, i32> = BTreeMap::new();
        for (g, p) in pairs {
            let slot = map.entry(g).or_insert(p);
            *slot = (*slot).max(p);
        }
        Targets { entries: map.into_iter().collect() }
    }

    /// Builds a set from published entries (a node's floor); entries whose selector is not in
    /// the table are skipped (the table is built from every floor, so this does not happen).
    pub(crate) fn from_entries(entries: &[DrainPlanEntry], table: &SelectorTable) -> Self {
        Targets::from_pairs(entries.iter().filter_map(|e| {
            let selector = match &e.pod_selector {
                None => None,
                Some(s) => Some(table.id_of(s)?),
            };
            Some((Group { pod_type: e.pod_type, selector }, e.pod_priority))
        }))
    }

    /// The published form, in group order.
    pub(crate) fn to_entries(&self, table: &SelectorTable) -> Vec<DrainPlanEntry> {
        self.entries
            .iter()
            .map(|(g, p)| DrainPlanEntry {
                pod_priority: *p,
                pod_type: g.pod_type,
                pod_selector: g.selector.and_then(|id| table.original(id).cloned()),
            })
            .collect()
    }

    /// The groups and priorities, in group order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Group, i32)> + '_ {
        self.entries.iter().copied()
    }

    /// The exact priority of a group.
    pub(crate) fn get(&self, g: Group) -> Option<i32> {
        self.entries.binary_search_by(|(k, _)| k.cmp(&g)).ok().map(|i| self.entries[i].1)
    }

    /// The level of a group (SPEC 4.3): its own priority, else the no-selector level of its
    /// podType, else `None` (podType not reached by this set).
    pub(crate) fn level(&self, g: Group) -> Option<i32> {
        self.get(g).or_else(|| g.selector.and_then(|_| self.get(g.plain())))
    }

    /// Whether the set targets some pod of this podType.
    pub(crate) fn has_type(&self, t: PodType) -> bool {
        self.entries.iter().any(|(g, _)| g.pod_type == t)
    }

    /// The groups of both sets, in group order, without duplicates (a merge of two sorted lists).
    fn union_groups<'a>(&'a self, other: &'a Targets) -> impl Iterator<Item = Group> + 'a {
        let (mut a, mut b) = (self.entries.iter().peekable(), other.entries.iter().peekable());
        std::iter::from_fn(move || match (a.peek(), b.peek()) {
            (Some((ga, _)), Some((gb, _))) => {
                let g = *ga.min(gb);
                if *ga == g {
                    a.next();
                }
                if *gb == g {
                    b.next();
                }
                Some(g)
            }
            (Some(_), None) => a.next().map(|(g, _)| *g),
            (None, _) => b.next().map(|(g, _)| *g),
        })
    }

    /// Group-wise minimum: the least powerful of two proposals (SPEC 4.3 "Combining"). A group
    /// one side does not reach is left out.
    pub(crate) fn min(&self, other: &Targets) -> Targets {
        let entries = self.union_groups(other).filter_map(|g| Some((g, self.level(g)?.min(other.level(g)?)))).collect();
        Targets { entries }
    }

    /// Group-wise maximum: never going backwards from what a node reached (SPEC 4.3).
    pub(crate) fn max(&self, other: &Targets) -> Targets {
        let entries = self
            .union_groups(other)
            .filter_map(|g| match (self.level(g), other.level(g)) {
                (Some(a), Some(b)) => Some((g, a.max(b))),
                (a, b) => Some((g, a.or(b)?)),
            })
            .collect();
        Targets { entries }
    }

    /// Whether this set is below `other` in some group of `other` (a lower level there, or
    /// that podType not reached at all).
    pub(crate) fn is_below(&self, other: &Targets) -> bool {
        other.iter().any(|(g, p)| self.level(g).is_none_or(|mine| mine < p))
    }

    /// Whether this set is below `reference` in a group where `effective` is below it too:
    /// the set then holds the node whose effective targets these are below `reference`.
    pub(crate) fn holds_below(&self, reference: &Targets, effective: &Targets) -> bool {
        reference
            .iter()
            .any(|(g, p)| self.level(g).is_none_or(|mine| mine < p) && effective.level(g).is_none_or(|e| e < p))
    }

    /// Whether a pod matches some target: same podType, priority at most the target's, and
    /// the target's selector (if any) matching its labels (SPEC 4.3 "Targets").
    pub(crate) fn matches(&self, pod: &PodKey<'_>, table: &SelectorTable) -> bool {
        self.entries.iter().any(|(g, p)| {
            g.pod_type == pod.pod_type && pod.priority <= *p && g.selector.is_none_or(|id| pod.selected_by(id, table))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: PodType = PodType::Default;
    const DS: PodType = PodType::DaemonSet;

    fn g(t: PodType, s: Option<SelId>) -> Group {
        Group { pod_type: t, selector: s }
    }

    fn t(pairs: &[(PodType, Option<SelId>, i32)]) -> Targets {
        Targets::from_pairs(pairs.iter().map(|(ty, s, p)| (g(*ty, *s), *p)))
    }

    #[test]
    fn level_falls_back_to_the_no_selector_group_of_the_same_type() {
        let a = t(&[(D, None, 5000)]);
        assert_eq!(a.level(g(D, Some(0))), Some(5000));
        assert_eq!(a.level(g(DS, None)), None);
        assert_eq!(a.level(g(DS, Some(0))), None);
    }

    #[test]
    fn min_is_group_wise_and_missing_group_counts_at_no_selector_level() {
        let a = t(&[(D, None, 1000), (D, Some(0), 2000)]);
        let b = t(&[(D, None, 1500)]);
        assert_eq!(a.min(&b), t(&[(D, None, 1000), (D, Some(0), 1500)]));
        assert_eq!(b.min(&a), a.min(&b));
    }

    #[test]
    fn min_leaves_out_a_pod_type_one_side_has_not_reached() {
        let a = t(&[(D, None, i32::MAX), (DS, None, 3000)]);
        let b = t(&[(D, None, 15000)]);
        assert_eq!(a.min(&b), t(&[(D, None, 15000)]));
    }

    #[test]
    fn max_never_goes_backwards_and_keeps_groups_of_either_side() {
        let floor = t(&[(D, None, 10000)]);
        let proposal = t(&[(D, None, 2000), (D, Some(0), 2000)]);
        assert_eq!(proposal.max(&floor), t(&[(D, None, 10000), (D, Some(0), 10000)]));
        let more = t(&[(D, None, i32::MAX), (DS, None, 1)]);
        assert_eq!(floor.max(&more), more);
    }

    #[test]
    fn below_means_lower_in_some_group_or_type_not_reached() {
        let a = t(&[(D, None, 2000)]);
        let b = t(&[(D, None, 10000)]);
        assert!(a.is_below(&b));
        assert!(!b.is_below(&a));
        assert!(!a.is_below(&a));
        assert!(b.is_below(&t(&[(DS, None, 0)])));
    }

    #[test]
    fn holds_below_needs_the_effective_targets_to_be_below_too() {
        let c = t(&[(D, None, 2000)]);
        let join = t(&[(D, None, 15000)]);
        assert!(c.holds_below(&join, &t(&[(D, None, 10000)])));
        assert!(!c.holds_below(&join, &t(&[(D, None, 15000)])));
    }

    #[test]
    fn matching_needs_type_priority_and_selector() {
        let (table, _) = super::super::selectors::SelectorTable::build(std::iter::empty());
        let none = PodLabels::default();
        let a = t(&[(D, None, 5000)]);
        let pod = |pod_type, priority| PodKey { pod_type, priority, labels: &none, selected: None };
        assert!(a.matches(&pod(D, 5000), &table));
        assert!(a.matches(&pod(D, -5), &table));
        assert!(!a.matches(&pod(D, 5001), &table));
        assert!(!a.matches(&pod(DS, 0), &table));
        // Unknown selector id matches nothing.
        assert!(!t(&[(D, Some(7), 5000)]).matches(&pod(D, 0), &table));
    }
}
