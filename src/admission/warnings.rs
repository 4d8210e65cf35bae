//! Non-blocking warnings about what a maintenance selects (SPEC 3.5, 4.6).

use crate::api::{CONTROL_PLANE_LABEL, NodeDisruptionBudget, NodeMaintenance, budget_max_unavailable};
use crate::gates::{AlertsView, CompiledGates};
use crate::selector::{NodeIndex, NodeMatcher};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::sync::Arc;

/// Most names a warning lists before `and N more`, keeping it under 120 characters.
const LISTED: usize = 3;

/// Counts behind the warnings: how many nodes the cluster has and the maintenance selects,
/// in all and among the control-plane nodes.
struct Counts {
    total: usize,
    selected: usize,
    control_plane: usize,
    control_plane_selected: usize,
}

/// The warnings of SPEC 3.5 from the counts; `overlaps(matcher)` says whether another
/// maintenance's selector picks any node this one selects.
fn warnings(
    name: &str,
    c: Counts,
    maintenances: &[Arc<NodeMaintenance>],
    overlaps: impl Fn(&NodeMatcher) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if c.selected == 0 {
        out.push("nodeSelector matches no node; this maintenance does nothing until a matching node joins".into());
        return out;
    }
    if c.selected == c.total {
        out.push(format!(
            "nodeSelector matches all {} nodes of the cluster; it may get into a degraded and unrecoverable state",
            c.total
        ));
    }
    if c.control_plane > 0 && c.control_plane_selected == c.control_plane {
        out.push(format!(
            "nodeSelector matches every control-plane node ({}); the control plane may become unavailable",
            c.control_plane
        ));
    }
    let mut others: Vec<&str> = maintenances
        .iter()
        .filter(|m| m.metadata.name.as_deref() != Some(name) && m.is_active())
        .filter(|m| NodeMatcher::compile(&m.spec.node_selector).is_some_and(|matcher| overlaps(&matcher)))
        .filter_map(|m| m.metadata.name.as_deref())
        .collect();
    if !others.is_empty() {
        others.sort_unstable();
        out.push(format!("selected nodes are also held by active maintenances {}", name_list(&others)));
    }
    out
}

/// Warnings for a maintenance named `name` whose selector picked, per node of `index`, the
/// nodes where `selected` is true (SPEC 3.5): it selects every node; every control-plane
/// node; no node; or nodes that other active (Cordon/Drain) maintenances also select (named).
/// Each is one sentence of at most 120 characters.
pub fn selection_warnings(
    name: &str,
    index: &NodeIndex,
    selected: &[bool],
    maintenances: &[Arc<NodeMaintenance>],
) -> Vec<String> {
    let mut counts = Counts {
        total: index.len(),
        selected: selected.iter().filter(|s| **s).count(),
        control_plane: 0,
        control_plane_selected: 0,
    };
    for (cp, s) in index.carrying(CONTROL_PLANE_LABEL).zip(selected) {
        counts.control_plane += usize::from(cp);
        counts.control_plane_selected += usize::from(cp && *s);
    }
    warnings(name, counts, maintenances, |matcher| {
        matcher.matches_indexed(index).iter().zip(selected).any(|(theirs, ours)| *theirs && *ours)
    })
}

/// A group maintenance (no `maxUnavailable`) releases its nodes only at Complete,
/// so one that selects more of a NodeDisruptionBudget's nodes than the budget ever lets be
/// unavailable at once can never hold them all and never finishes its drain. One warning
/// per such budget (at most [`LISTED`]), each under 120 characters.
pub fn budget_warnings(
    max_unavailable: Option<&IntOrString>,
    index: &NodeIndex,
    selected: &[bool],
    budgets: &[Arc<NodeDisruptionBudget>],
) -> Vec<String> {
    if max_unavailable.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for b in budgets {
        let Some(matcher) = NodeMatcher::compile(&b.spec.node_selector) else { continue };
        let theirs = matcher.matches_indexed(index);
        let expected = theirs.iter().filter(|t| **t).count();
        let both = theirs.iter().zip(selected).filter(|(t, s)| **t && **s).count();
        let limit = budget_max_unavailable(b.spec.max_unavailable.as_ref(), b.spec.min_available.as_ref(), expected);
        if let Ok(limit) = limit
            && both > limit
            && out.len() < LISTED
        {
            out.push(format!(
                "NodeDisruptionBudget {} allows {limit} of these {both} nodes down at once: set maxUnavailable to roll",
                b.metadata.name.as_deref().unwrap_or_default()
            ));
        }
    }
    out
}

/// When every node a maintenance selects (`selected`, per node of `index`; at least one) is
/// selected by a NodeDisruptionBudget whose gates are closed at `now`, the maintenance starts
/// nowhere yet (SPEC 4.6): one warning per closed gate of those budgets (at most [`LISTED`]),
/// the gate's message (which names the budget and, for a window, when it opens). The webhook
/// knows neither node health nor alerts, so only pauses, blackouts, windows and gates that
/// cannot be read count here.
pub fn gate_warnings(
    index: &NodeIndex,
    selected: &[bool],
    budgets: &[Arc<NodeDisruptionBudget>],
    now: Timestamp,
) -> Vec<String> {
    let mut waiting = vec![false; selected.len()];
    let mut messages = Vec::new();
    for (b, theirs) in budgets_over(index, selected, budgets) {
        let name = b.metadata.name.as_deref().unwrap_or_default();
        let verdict = CompiledGates::compile(name, &b.spec).evaluate(&[], &AlertsView::Firing(Vec::new()), now);
        if verdict.open() {
            continue;
        }
        for (w, t) in waiting.iter_mut().zip(&theirs) {
            *w |= *t;
        }
        messages.extend(verdict.closed.into_iter().map(|c| c.message));
    }
    let all_wait = selected.iter().any(|s| *s) && selected.iter().zip(&waiting).all(|(s, w)| !*s || *w);
    if !all_wait {
        return Vec::new();
    }
    messages.truncate(LISTED);
    messages
}

/// The `budgets` that select at least one node of `selected` (per node of `index`), each with
/// the nodes it selects (per node of `index`); budgets whose selector does not compile select
/// nothing.
pub(super) fn budgets_over<'b>(
    index: &'b NodeIndex,
    selected: &'b [bool],
    budgets: &'b [Arc<NodeDisruptionBudget>],
) -> impl Iterator<Item = (&'b Arc<NodeDisruptionBudget>, Vec<bool>)> {
    budgets.iter().filter_map(move |b| {
        let theirs = NodeMatcher::compile(&b.spec.node_selector)?.matches_indexed(index);
        theirs.iter().zip(selected).any(|(t, s)| *t && *s).then_some((b, theirs))
    })
}

/// `a, b and c`, or `a, b, c and 4 more` when long.
pub(super) fn name_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [only] => (*only).to_owned(),
        _ if names.len() > LISTED => format!("{} and {} more", names[..LISTED].join(", "), names.len() - LISTED),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NodeMaintenanceSpec, Stage};
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn node(name: &str, cp: bool) -> Node {
        let mut labels = BTreeMap::from([("pool".to_string(), if cp { "cp" } else { "general" }.to_string())]);
        if cp {
            labels.insert(CONTROL_PLANE_LABEL.into(), String::new());
        }
        Node {
            metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..Default::default() },
            ..Default::default()
        }
    }

    fn maintenance(name: &str, stage: Stage, pool: &str) -> Arc<NodeMaintenance> {
        let selector = NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "pool".into(),
                    operator: "In".into(),
                    values: Some(vec![pool.into()]),
                }]),
                match_fields: None,
            }],
        };
        let spec = NodeMaintenanceSpec {
            node_selector: selector,
            stage,
            drain_plan: vec![],
            max_unavailable: None,
            release_nodes_on: None,
            reason: None,
            drain_timeout: None,
            evacuation: None,
            ..Default::default()
        };
        Arc::new(NodeMaintenance::new(name, spec))
    }

    #[test]
    fn warns_about_all_nodes_control_plane_none_and_overlap() {
        let nodes = [node("cp-1", true), node("w-1", false), node("w-2", false)];
        let index = NodeIndex::new(&nodes);
        let w = selection_warnings("m", &index, &[true; 3], &[]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("matches all 3 nodes"));
        assert!(w[1].contains("every control-plane node (1)"));
        assert!(selection_warnings("m", &index, &[false; 3], &[])[0].contains("matches no node"));
        let ms = vec![
            maintenance("a", Stage::Drain, "general"),
            maintenance("b", Stage::Idle, "general"),
            maintenance("m", Stage::Cordon, "general"),
            maintenance("c", Stage::Cordon, "gpu"),
        ];
        let w = selection_warnings("m", &index, &[false, true, true], &ms);
        assert_eq!(w, vec!["selected nodes are also held by active maintenances a".to_string()]);
        for s in w {
            assert!(s.len() <= 120);
        }
    }

    #[test]
    fn a_group_maintenance_beyond_a_budget_is_warned_about() {
        let nodes = [node("cp-1", true), node("w-1", false), node("w-2", false)];
        let index = NodeIndex::new(&nodes);
        let general = maintenance("x", Stage::Idle, "general").spec.node_selector.clone();
        let budget = |max: i32| {
            Arc::new(NodeDisruptionBudget::new(
                "general",
                crate::api::NodeDisruptionBudgetSpec {
                    node_selector: general.clone(),
                    max_unavailable: Some(IntOrString::Int(max)),
                    min_available: None,
                    ..Default::default()
                },
            ))
        };
        let w = budget_warnings(None, &index, &[false, true, true], &[budget(1)]);
        assert_eq!(
            w,
            ["NodeDisruptionBudget general allows 1 of these 2 nodes down at once: set maxUnavailable to roll"]
        );
        assert!(w[0].len() <= 120);
        assert!(budget_warnings(None, &index, &[false, true, true], &[budget(2)]).is_empty());
        let rolling = IntOrString::Int(1);
        assert!(
            budget_warnings(Some(&rolling), &index, &[false, true, true], &[budget(1)]).is_empty(),
            "a rolling one finishes"
        );
    }

    #[test]
    fn a_maintenance_whose_nodes_all_wait_behind_a_closed_gate_is_warned_about() {
        use crate::api::{MaintenanceWindow, PauseRequest};
        let nodes = [node("cp-1", true), node("w-1", false), node("w-2", false)];
        let index = NodeIndex::new(&nodes);
        let general = maintenance("x", Stage::Idle, "general").spec.node_selector.clone();
        let budget = |name: &str, windows: Vec<MaintenanceWindow>, pauses: Vec<PauseRequest>| {
            Arc::new(NodeDisruptionBudget::new(
                name,
                crate::api::NodeDisruptionBudgetSpec {
                    node_selector: general.clone(),
                    max_unavailable: None,
                    min_available: None,
                    maintenance_windows: windows,
                    blackouts: vec![],
                    pause_requests: pauses,
                    health_gate: None,
                },
            ))
        };
        let weekend = MaintenanceWindow {
            schedule: "0 22 * * SAT".into(),
            duration: "10h".into(),
            time_zone: Some("Europe/Berlin".into()),
        };
        let thursday: Timestamp = "2026-11-26T12:00:00Z".parse().unwrap();
        let budgets = [budget("weekend", vec![weekend], vec![])];
        let w = gate_warnings(&index, &[false, true, true], &budgets, thursday);
        assert_eq!(
            w,
            ["Waiting for the maintenance window of NodeDisruptionBudget weekend (opens 2026-11-28T22:00:00+01:00)"]
        );
        assert!(w[0].len() <= 120);
        let saturday_night: Timestamp = "2026-11-28T23:00:00Z".parse().unwrap();
        assert!(gate_warnings(&index, &[false, true, true], &budgets, saturday_night).is_empty(), "open");
        assert!(gate_warnings(&index, &[true, true, true], &budgets, thursday).is_empty(), "cp-1 may start");
        assert!(gate_warnings(&index, &[false; 3], &budgets, thursday).is_empty(), "no node");
        let paused = [budget("ops", vec![], vec![PauseRequest { name: "oncall".into(), reason: None }])];
        assert_eq!(
            gate_warnings(&index, &[false, true, false], &paused, thursday),
            ["NodeDisruptionBudget ops is paused by oncall"]
        );
        assert!(gate_warnings(&index, &[false, true, false], &[budget("open", vec![], vec![])], thursday).is_empty());
    }

    #[test]
    fn name_lists_are_bounded() {
        assert_eq!(name_list(&["a", "b"]), "a and b");
        assert_eq!(name_list(&["a", "b", "c", "d", "e"]), "a, b, c and 2 more");
    }
}
