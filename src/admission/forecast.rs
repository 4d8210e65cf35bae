//! Admission warnings from the forecast (SPEC 4.7), the operators' first reading: a maintenance
//! that, on its late timeline, cannot finish before the next blackout on its budgets starts,
//! or whose budgets' maintenance windows never open for some of its nodes.

use super::ClusterView;
use super::warnings::budgets_over;
use crate::api::{NodeDisruptionBudget, NodeMaintenance, NodeMaintenanceSpec, NodeMaintenanceStatus};
use crate::planner::forecast::{Forecast, from_cluster};
use crate::planner::from_cluster::Nodes;
use crate::selector::NodeIndex;
use jiff::Timestamp;
use std::sync::Arc;

/// Most selected nodes a maintenance may have for the webhook to forecast it: the simulation
/// grows with the square of the pool (docs/benchmarks.md, "The forecast": about 3 ms for 30
/// nodes, 0.35 s for 300), and a review must answer well within the apiserver's timeout.
/// `kubectl maintenance forecast` and the status have no such limit.
pub const MAX_FORECAST_NODES: usize = 200;

/// The forecast warnings of the maintenance `name` with `spec` and the status `status` reads
/// (on an UPDATE, the stored one: the basis), whose selected nodes are `selected` (per node
/// of `index`), over the nodes, maintenances and budgets of `view` at `now`. Empty when no
/// budget over its nodes has maintenance windows or blackouts (nothing time can close: no
/// simulation is run), when it selects more than [`MAX_FORECAST_NODES`], or when `view` has
/// no whole Nodes. Without a basis (no node has finished) only the windows that never open
/// are foreseen.
pub fn forecast_warnings(
    name: &str,
    spec: &NodeMaintenanceSpec,
    status: impl FnOnce() -> Option<NodeMaintenanceStatus>,
    index: &NodeIndex,
    selected: &[bool],
    view: &dyn ClusterView,
    now: Timestamp,
) -> Vec<String> {
    if selected.iter().filter(|s| **s).count() > MAX_FORECAST_NODES {
        return Vec::new();
    }
    let budgets: Vec<Arc<NodeDisruptionBudget>> = view.budgets();
    let timed = |b: &NodeDisruptionBudget| !b.spec.maintenance_windows.is_empty() || !b.spec.blackouts.is_empty();
    if !budgets_over(index, selected, &budgets).any(|(b, _)| timed(b)) {
        return Vec::new();
    }
    let list = view.nodes();
    if list.is_empty() {
        return Vec::new();
    }
    let nodes = Nodes::new(&list);
    let mut m = NodeMaintenance::new(name, spec.clone());
    m.status = status();
    let statuses = from_cluster::stored_statuses(&m);
    warnings(&from_cluster::forecast_alone(&m, statuses, &nodes, &budgets, &view.maintenances(), None, now))
}

/// Most characters of a warning (SPEC 3.5: one short sentence, the Kubernetes guidance).
const MAX_WARNING: usize = 120;

/// `2026-12-18 00:00Z`.
fn minute(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%MZ").to_string()
}

/// The warnings a forecast gives, each at most [`MAX_WARNING`] characters: its completion
/// (expected, else late) past the next blackout start, and nodes that never start because no
/// window opens outside the blackouts within a year.
fn warnings(f: &Forecast) -> Vec<String> {
    let mut out = Vec::new();
    let timed = ["OutsideMaintenanceWindow", "Blackout"];
    if let Some(never) = f.never.as_ref().filter(|n| timed.contains(&n.reason.as_str())) {
        let noun = if never.nodes == 1 { "node" } else { "nodes" };
        out.push(format!(
            "{} selected {noun} cannot start within a year: no maintenance window opens outside the blackouts",
            never.nodes
        ));
    }
    if let (Some(late), Some(blackout)) = (f.late_completion_time, &f.next_blackout)
        && late > blackout.at
    {
        let (verb, when) = match f.completion_time {
            Some(expected) if expected > blackout.at => ("cannot", format!("forecast {}", minute(expected))),
            _ => ("may not", format!("late forecast {}", minute(late))),
        };
        let say = |named: &str| {
            let start = minute(blackout.at);
            format!("{verb} finish before blackout{named} of budget {} starts {start} ({when})", blackout.budget)
        };
        let reason = blackout.reasons.first().map(|r| format!(" {r:?}")).unwrap_or_default();
        let mut w = say(&reason);
        if w.chars().count() > MAX_WARNING {
            w = say("");
        }
        if w.chars().count() > MAX_WARNING {
            w = w.chars().take(MAX_WARNING - 3).chain("...".chars()).collect();
        }
        out.push(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::standalone::StaticView;
    use serde_json::json;

    fn node(name: &str) -> Arc<k8s_openapi::api::core::v1::Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"pool": "general"}},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }))
            .unwrap(),
        )
    }

    /// A rolling maintenance, one node at a time over 4 nodes, with one node finished in 10
    /// hours: 3 more nodes need 30 hours.
    fn maintenance() -> NodeMaintenance {
        serde_json::from_value(json!({
            "metadata": {"name": "kernel"},
            "spec": {
                "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "pool", "operator": "In", "values": ["general"]}]}]},
                "stage": "Drain", "maxUnavailable": 1,
            },
            "status": {"nodeStatuses": [{
                "nodeRef": {"name": "n0"}, "phase": "Released",
                "heldTime": "2026-12-01T00:00:00Z", "finishedTime": "2026-12-01T10:00:00Z",
            }]},
        }))
        .unwrap()
    }

    fn budget(spec: serde_json::Value) -> Arc<NodeDisruptionBudget> {
        let mut full = json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["general"]}]}]}});
        json_patch::merge(&mut full, &spec);
        Arc::new(serde_json::from_value(json!({"metadata": {"name": "general"}, "spec": full})).unwrap())
    }

    fn warn(budgets: Vec<Arc<NodeDisruptionBudget>>, now: &str) -> Vec<String> {
        let nodes: Vec<_> = (0..4).map(|i| node(&format!("n{i}"))).collect();
        let mut view = StaticView::new(nodes, Vec::new());
        view.budgets = budgets;
        let index = view.node_index();
        let selected = vec![true; 4];
        let m = maintenance();
        forecast_warnings("kernel", &m.spec, || m.status.clone(), &index, &selected, &view, now.parse().unwrap())
    }

    #[test]
    fn a_blackout_before_the_late_completion_is_named() {
        let freeze = json!({"blackouts": [
            {"start": "2026-12-02T00:00:00Z", "end": "2026-12-10T00:00:00Z", "reason": "year-end freeze"}]});
        let w = warn(vec![budget(freeze)], "2026-12-01T10:00:00Z");
        assert_eq!(
            w,
            [
                "cannot finish before blackout \"year-end freeze\" of budget general starts 2026-12-02 00:00Z (forecast 2026-12-10 10:00Z)"
            ]
        );
        // The same blackout after the late completion (three nodes, 30 hours): quiet.
        let later = json!({"blackouts": [{"start": "2026-12-03T00:00:00Z", "end": "2026-12-10T00:00:00Z"}]});
        assert_eq!(warn(vec![budget(later)], "2026-12-01T10:00:00Z"), Vec::<String>::new());
    }

    #[test]
    fn windows_that_never_open_outside_a_blackout_are_named_and_budgets_without_time_gates_skip() {
        // A window on the 1st of January only, inside a blackout of two years.
        let never = json!({
            "maintenanceWindows": [{"schedule": "0 0 1 1 *", "duration": "1h"}],
            "blackouts": [{"start": "2026-12-01T00:00:00Z", "end": "2028-12-31T00:00:00Z"}],
        });
        let w = warn(vec![budget(never)], "2026-12-01T10:00:00Z");
        assert!(
            w.iter().any(|w| w.contains("3 selected nodes cannot start within a year: no maintenance window opens")),
            "{w:?}"
        );
        assert!(w.iter().all(|w| w.chars().count() <= MAX_WARNING), "{w:?}");
        assert_eq!(warn(vec![budget(json!({"maxUnavailable": 1}))], "2026-12-01T10:00:00Z"), Vec::<String>::new());
    }
}
