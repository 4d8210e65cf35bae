//! Pod selectors of drainPlan entries and drain targets, interned and compiled once per pass
//! (SPEC 4.3 "Targets": a target's podSelector must match the pod's labels).
//!
//! Two selectors are the same group when their JSON forms are equal. Ids are assigned in the
//! order of those JSON forms, so output order never depends on input order.

use super::pods::PodLabels;
use crate::selector::PodSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Index of an interned selector in a [`SelectorTable`].
pub(crate) type SelId = u32;

/// Interned, compiled pod selectors.
#[derive(Debug, Default)]
pub(crate) struct SelectorTable {
    ids: HashMap<String, SelId>,
    originals: Vec<LabelSelector>,
    /// `None` when the selector is invalid: it then matches no pod.
    compiled: Vec<Option<PodSelector>>,
}

/// The identity of a selector: its JSON form (matchLabels is a sorted map, so equal selectors
/// written in a different label order get the same key).
fn key_of(selector: &LabelSelector) -> String {
    serde_json::to_string(selector).unwrap_or_else(|_| format!("{selector:?}"))
}

impl SelectorTable {
    /// Interns every selector given; returns the table and one warning per invalid selector
    /// (an invalid selector matches no pod, so its entries never target anything).
    pub(crate) fn build<'a>(selectors: impl IntoIterator<Item = &'a LabelSelector>) -> (Self, Vec<String>) {
        let mut by_key: BTreeMap<String, &LabelSelector> = BTreeMap::new();
        for s in selectors {
            by_key.entry(key_of(s)).or_insert(s);
        }
        let mut table = SelectorTable::default();
        let mut warnings = Vec::new();
        let mut seen_invalid = BTreeSet::new();
        for (i, (key, sel)) in by_key.into_iter().enumerate() {
            let compiled = PodSelector::compile(sel);
            if compiled.is_none() && seen_invalid.insert(key.clone()) {
                warnings.push(format!("podSelector {key} is invalid; it matches no pod"));
            }
            table.ids.insert(key, i as SelId);
            table.originals.push(sel.clone());
            table.compiled.push(compiled);
        }
        (table, warnings)
    }

    /// The id of a selector given to [`SelectorTable::build`]; `None` for one that was not.
    pub(crate) fn id_of(&self, selector: &LabelSelector) -> Option<SelId> {
        self.ids.get(&key_of(selector)).copied()
    }

    /// Number of selectors.
    pub(crate) fn len(&self) -> usize {
        self.originals.len()
    }

    /// The selector as first given.
    pub(crate) fn original(&self, id: SelId) -> Option<&LabelSelector> {
        self.originals.get(id as usize)
    }

    /// Whether the selector matches these labels (false for an invalid or unknown id).
    pub(crate) fn matches(&self, id: SelId, labels: &PodLabels) -> bool {
        match self.compiled.get(id as usize) {
            Some(Some(sel)) => sel.matches(|k| labels.get(k)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> PodLabels {
        pairs.iter().copied().collect()
    }

    fn match_labels(pairs: &[(&str, &str)]) -> LabelSelector {
        let map = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        LabelSelector { match_labels: Some(map), ..Default::default() }
    }

    #[test]
    fn equal_selectors_share_one_id_and_ids_follow_json_order() {
        let b = match_labels(&[("app", "b")]);
        let a = match_labels(&[("app", "a")]);
        let (t, w) = SelectorTable::build([&b, &a, &b]);
        assert!(w.is_empty());
        assert_eq!(t.id_of(&a), Some(0));
        assert_eq!(t.id_of(&b), Some(1));
        assert_eq!(t.id_of(&match_labels(&[("x", "y")])), None);
    }

    #[test]
    fn selector_matches_labels() {
        let pg = match_labels(&[("app", "postgres")]);
        let (t, _) = SelectorTable::build([&pg]);
        let id = t.id_of(&pg).unwrap_or(u32::MAX);
        assert!(t.matches(id, &labels(&[("app", "postgres"), ("tier", "db")])));
        assert!(!t.matches(id, &labels(&[("app", "redis")])));
        assert!(!t.matches(id, &PodLabels::default()));
    }

    #[test]
    fn invalid_selector_matches_no_pod_and_warns() {
        let bad = LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: "Near".into(),
                values: None,
            }]),
            ..Default::default()
        };
        let (t, w) = SelectorTable::build([&bad]);
        assert_eq!(w.len(), 1);
        let id = t.id_of(&bad).unwrap_or(u32::MAX);
        assert!(!t.matches(id, &labels(&[("app", "x")])));
    }
}
