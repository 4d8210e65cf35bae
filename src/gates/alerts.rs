//! The alert part of a health gate (`spec.healthGate.alerts`, SPEC 4.6): which firing alerts
//! close it.

use super::matcher::{MatcherError, Selector};
use crate::api::AlertGate;
use std::collections::{BTreeMap, BTreeSet};

/// The firing alerts as the controller last read them from Prometheus (plain data; the
/// reader fills it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlertsView {
    /// The controller has no `--prometheus-url`.
    NotConfigured,
    /// The last read failed (the cause, for a person: an error, a timeout, a bad answer).
    Failed(String),
    /// The labels of each alert firing at the last good read (pending ones left out).
    Firing(Vec<BTreeMap<String, String>>),
}

/// Which list of an alert gate an entry is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertList {
    /// `matchers`.
    Matchers,
    /// `ignore`.
    Ignore,
}

impl AlertList {
    /// The field's JSON name.
    pub fn field(self) -> &'static str {
        match self {
            AlertList::Matchers => "matchers",
            AlertList::Ignore => "ignore",
        }
    }
}

/// Why an alert gate was refused: an empty `matchers`, or an entry that does not parse or is a
/// selector Prometheus refuses.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlertGateError {
    /// `matchers` is empty: a gate matching no alert guards nothing, and one matching all
    /// would hold forever on an always-firing Watchdog.
    #[error("at least one matcher is required")]
    NoMatchers,
    /// Entry `index` of `list` does not parse, or every matcher of it matches the empty string
    /// ([`MatcherError::MatchesEmpty`]).
    #[error("{error}")]
    Entry {
        /// Which list.
        list: AlertList,
        /// Its index in the list.
        index: usize,
        /// Why.
        error: MatcherError,
    },
}

/// A compiled alert gate.
#[derive(Clone, Debug)]
pub(super) struct AlertRules {
    matchers: Vec<Selector>,
    ignore: Vec<Selector>,
}

/// Compiles the selectors of `gate` (SPEC 4.6).
///
/// Every entry of both lists is one Prometheus series selector and is read by the same rules,
/// so an `ignore` entry whose every matcher matches the empty string is refused as a
/// `matchers` entry is: Prometheus would refuse it as a selector too, and here it would ignore
/// every alert, so that the gate would never close.
///
/// # Errors
/// Every problem: [`AlertGateError::NoMatchers`], then each entry that does not parse or that
/// Prometheus refuses, in list order (`matchers` first).
pub(super) fn compile(gate: &AlertGate) -> Result<AlertRules, Vec<AlertGateError>> {
    let mut errors = Vec::new();
    if gate.matchers.is_empty() {
        errors.push(AlertGateError::NoMatchers);
    }
    let mut read = |list: AlertList, entries: &[String]| -> Vec<Selector> {
        let mut out = Vec::new();
        for (index, text) in entries.iter().enumerate() {
            match Selector::parse(text) {
                Ok(s) => out.push(s),
                Err(error) => errors.push(AlertGateError::Entry { list, index, error }),
            }
        }
        out
    };
    let matchers = read(AlertList::Matchers, &gate.matchers);
    let ignore = read(AlertList::Ignore, &gate.ignore);
    if errors.is_empty() { Ok(AlertRules { matchers, ignore }) } else { Err(errors) }
}

impl AlertRules {
    /// The sorted, distinct `alertname`s of the alerts that match a matcher and no ignore
    /// entry (an alert without a name as `""`).
    pub fn matching(&self, firing: &[BTreeMap<String, String>]) -> BTreeSet<String> {
        firing
            .iter()
            .filter(|a| self.matchers.iter().any(|m| m.matches(a)) && !self.ignore.iter().any(|m| m.matches(a)))
            .map(|a| a.get("alertname").cloned().unwrap_or_default())
            .collect()
    }
}
