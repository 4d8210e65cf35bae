//! The maintenances' state as Prometheus gauges, read from the Node and
//! NodeMaintenance caches at every scrape, the way kube-state-metrics works: the values come
//! from the API objects (stage, `status.stageStatuses`, `status.drainStatus`, the `Drained`
//! condition, the nodes' holders annotation), so they are right after a restart or a leader
//! change and no series is ever left behind by a maintenance that went away. Every replica
//! exports the same series; the chart's alerts aggregate them with `max by`.
//!
//! Nothing is exported before both caches have synced: an empty cache would read as "no
//! maintenance", which would make every held node look held by a maintenance that is gone.

use super::{encode_gauge, encode_gauges};
use crate::admission::ClusterView;
use crate::api::node::Holders;
use crate::api::{NodeCounts, NodeMaintenance, Stage, parse_drain_timeout};
use crate::cluster::cache::ClusterCache;
use crate::planner::decide::deadline::DRAIN_TIMED_OUT;
use crate::planner::decide::status::{DRAINED, waits};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::registry::Unit;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// `node_maintenance_maintenances{stage}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    stage: &'static str,
}

/// The per-maintenance drain series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MaintenanceLabels {
    maintenance: String,
}

/// `node_maintenance_nodes{maintenance,phase}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabels {
    maintenance: String,
    phase: &'static str,
}

/// `node_maintenance_node_held_by_missing_maintenance{node,maintenance}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HoldLabels {
    node: String,
    maintenance: String,
}

/// A drain that has not finished: Drain stage, not being deleted, `Drained` not True.
#[derive(Clone, Debug, PartialEq)]
pub struct RunningDrain {
    /// The maintenance's name.
    pub maintenance: String,
    /// Start of its Drain stage (`status.stageStatuses`), seconds since the Unix epoch.
    pub started: f64,
    /// `status.drainStatus.lastProgressTime`, seconds since the Unix epoch, when set; `None`
    /// too while the drain only waits for pods left to finish (`Drained` reason
    /// `WaitingForCompletion`, SPEC 4.6): a wait is not a stall, so the stall alert, which
    /// reads this gauge, has nothing to fire on.
    pub last_progress: Option<f64>,
    /// Drain start plus `spec.drainTimeout`, seconds since the Unix epoch, when a readable
    /// timeout is set.
    pub deadline: Option<f64>,
}

/// The forecast of an active maintenance (its `status.forecast`, SPEC 4.7), as timestamps in
/// seconds since the Unix epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct ForecastTimes {
    /// The maintenance's name.
    pub maintenance: String,
    /// `completionTime`, when set.
    pub completion: Option<f64>,
    /// `lateCompletionTime`, when set.
    pub late_completion: Option<f64>,
    /// `nextBlackoutStart`, when set.
    pub next_blackout_start: Option<f64>,
}

/// What the state metrics report, computed from the cached objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// Maintenances per stage, every stage present (0 when none).
    pub by_stage: Vec<(Stage, i64)>,
    /// Unfinished drains, by maintenance name.
    pub drains: Vec<RunningDrain>,
    /// Node counts by phase of every maintenance (its `status.nodeCounts`; zero
    /// when it has none), by name.
    pub nodes: BTreeMap<String, NodeCounts>,
    /// (node, maintenance) pairs where the node's holders annotation names a maintenance
    /// that does not exist (its cleanup never ran: the node stays cordoned).
    pub held_by_missing: BTreeSet<(String, String)>,
    /// Nodes whose holders annotation names at least one maintenance.
    pub held_nodes: i64,
    /// `status.drainStatus.podsPendingEvictionRequest` (0 when unset) of each maintenance in
    /// the Drain stage and not being deleted, by name.
    pub pending: BTreeMap<String, i64>,
    /// Maintenances in the Drain stage, not being deleted, whose `Drained` condition
    /// reports the drain timeout.
    pub timed_out: i64,
    /// The forecasts of the active maintenances that have one, by name.
    pub forecasts: Vec<ForecastTimes>,
}

fn seconds(t: &Time) -> f64 {
    t.0.as_millisecond() as f64 / 1000.0
}

fn running_drain(m: &NodeMaintenance) -> Option<RunningDrain> {
    if !m.is_draining() {
        return None;
    }
    let status = m.status.as_ref()?;
    let drained = status.conditions.iter().find(|c| c.type_ == DRAINED);
    if drained.is_some_and(|c| c.status == "True") {
        return None;
    }
    let waiting = waits(drained);
    let started = status.stage_statuses.iter().find(|s| s.name == Stage::Drain)?.start_timestamp.as_ref()?;
    let timeout = m.spec.drain_timeout.as_deref().and_then(|t| parse_drain_timeout(t).ok());
    Some(RunningDrain {
        maintenance: m.name_any(),
        started: seconds(started),
        last_progress: status
            .drain_status
            .as_ref()
            .and_then(|d| d.last_progress_time.as_ref())
            .map(seconds)
            .filter(|_| !waiting),
        deadline: timeout.map(|t| seconds(started) + t.as_secs_f64()),
    })
}

/// The state of `maintenances` and `nodes`: counts by stage, unfinished drains,
/// node counts per maintenance, and nodes held by maintenances that no longer exist.
pub fn state(nodes: &[Arc<Node>], maintenances: &[Arc<NodeMaintenance>]) -> State {
    let by_stage = Stage::ALL
        .iter()
        .map(|&stage| (stage, maintenances.iter().filter(|m| m.spec.stage == stage).count() as i64))
        .collect();
    let drains = maintenances.iter().filter_map(|m| running_drain(m)).collect();
    let counts: BTreeMap<String, NodeCounts> = maintenances
        .iter()
        .map(|m| (m.name_any(), m.status.as_ref().and_then(|s| s.node_counts.clone()).unwrap_or_default()))
        .collect();
    let mut held_by_missing = BTreeSet::new();
    let mut held_nodes = 0;
    for node in nodes {
        let holders = Holders::of(node).map(|h| h.maintenances).unwrap_or_default();
        held_nodes += i64::from(!holders.is_empty());
        for name in holders {
            if !counts.contains_key(&name) {
                held_by_missing.insert((node.name_any(), name));
            }
        }
    }
    let draining = || maintenances.iter().filter(|m| m.is_draining());
    let pending = draining()
        .map(|m| {
            let drain = m.status.as_ref().and_then(|s| s.drain_status.as_ref());
            (m.name_any(), drain.map_or(0, |d| i64::from(d.pods_pending_eviction_request)))
        })
        .collect();
    let reports_timeout = |m: &NodeMaintenance| {
        let conditions = m.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
        conditions.iter().any(|c| c.type_ == DRAINED && c.reason == DRAIN_TIMED_OUT)
    };
    let timed_out = draining().filter(|m| reports_timeout(m)).count() as i64;
    let forecasts = maintenances
        .iter()
        .filter(|m| m.is_active())
        .filter_map(|m| {
            let f = m.status.as_ref()?.forecast.as_ref()?;
            Some(ForecastTimes {
                maintenance: m.name_any(),
                completion: f.completion_time.as_ref().map(seconds),
                late_completion: f.late_completion_time.as_ref().map(seconds),
                next_blackout_start: f.next_blackout_start.as_ref().map(seconds),
            })
        })
        .collect();
    State { by_stage, drains, nodes: counts, held_by_missing, held_nodes, pending, timed_out, forecasts }
}

/// The scrape-time collector of the state metrics over a cluster cache; register it with
/// `Registry::register_collector` (the registry's `node_maintenance` prefix applies).
pub struct StateMetrics {
    cache: ClusterCache,
}

impl StateMetrics {
    /// A collector reading `cache` at each scrape.
    pub fn new(cache: ClusterCache) -> Self {
        StateMetrics { cache }
    }
}

impl std::fmt::Debug for StateMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMetrics").finish_non_exhaustive()
    }
}

impl Collector for StateMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let state = if self.cache.synced() {
            state(&self.cache.node_store().state(), &self.cache.maintenance_store().state())
        } else {
            State::default()
        };
        let drains = &state.drains;
        let per_drain = |value: fn(&RunningDrain) -> Option<f64>| {
            drains
                .iter()
                .filter_map(move |d| Some((MaintenanceLabels { maintenance: d.maintenance.clone() }, value(d)?)))
        };
        let e = &mut encoder;
        encode_gauges(
            e,
            "maintenances",
            "NodeMaintenances by spec.stage",
            None,
            state.by_stage.iter().map(|(s, n)| (StageLabels { stage: s.as_str() }, *n)),
        )?;
        // Name, help and value of each per-drain timestamp gauge.
        type Timestamp = (&'static str, &'static str, fn(&RunningDrain) -> Option<f64>);
        let timestamps: [Timestamp; 3] = [
            (
                "drain_started_timestamp",
                "Start of the Drain stage of each unfinished drain, seconds since the Unix epoch",
                |d| Some(d.started),
            ),
            (
                "drain_last_progress_timestamp",
                "status.drainStatus.lastProgressTime of each unfinished drain, seconds since the Unix epoch",
                |d| d.last_progress,
            ),
            (
                "drain_deadline_timestamp",
                "Drain start plus spec.drainTimeout of each unfinished drain that has one, seconds since the Unix epoch",
                |d| d.deadline,
            ),
        ];
        for (name, help, value) in timestamps {
            encode_gauges(e, name, help, Some(&Unit::Seconds), per_drain(value))?;
        }
        // Name, help and value of each per-maintenance forecast gauge.
        type Forecast = (&'static str, &'static str, fn(&ForecastTimes) -> Option<f64>);
        let forecasts: [Forecast; 3] = [
            (
                "forecast_completion_timestamp",
                "Expected completion of each active maintenance (status.forecast.completionTime), seconds since the Unix epoch",
                |f| f.completion,
            ),
            (
                "forecast_late_completion_timestamp",
                "Late (p90) completion of each active maintenance (status.forecast.lateCompletionTime), seconds since the Unix epoch",
                |f| f.late_completion,
            ),
            (
                "forecast_next_blackout_start_timestamp",
                "Next blackout start on the budgets over each active maintenance's nodes (status.forecast.nextBlackoutStart), seconds since the Unix epoch",
                |f| f.next_blackout_start,
            ),
        ];
        for (name, help, value) in forecasts {
            let series = state
                .forecasts
                .iter()
                .filter_map(|f| Some((MaintenanceLabels { maintenance: f.maintenance.clone() }, value(f)?)));
            encode_gauges(e, name, help, Some(&Unit::Seconds), series)?;
        }
        encode_gauges(
            e,
            "nodes",
            "Selected nodes of each NodeMaintenance by phase (status.nodeCounts): waiting, cordoned, draining, drained, released",
            None,
            state.nodes.iter().flat_map(|(name, c)| {
                [
                    ("waiting", c.waiting),
                    ("cordoned", c.cordoned),
                    ("draining", c.draining),
                    ("drained", c.drained),
                    ("released", c.released),
                ]
                .map(|(phase, n)| (PhaseLabels { maintenance: name.clone(), phase }, i64::from(n)))
            }),
        )?;
        let count = |n: i64| u64::try_from(n).unwrap_or(0);
        encode_gauge(
            e,
            "nodes_under_maintenance",
            "Nodes held by an active maintenance",
            None,
            count(state.held_nodes),
        )?;
        encode_gauges(
            e,
            "pods_pending_eviction",
            "Targeted pods not yet evicted, per Drain-stage maintenance (status.drainStatus.podsPendingEvictionRequest)",
            None,
            state.pending.iter().map(|(m, n)| (MaintenanceLabels { maintenance: m.clone() }, *n)),
        )?;
        encode_gauge(
            e,
            "drains_timed_out",
            "Drain-stage maintenances past their drainTimeout now",
            None,
            count(state.timed_out),
        )?;
        encode_gauges(
            e,
            "node_held_by_missing_maintenance",
            "1 for each node whose holders annotation names a NodeMaintenance that does not exist",
            None,
            state
                .held_by_missing
                .iter()
                .map(|(node, m)| (HoldLabels { node: node.clone(), maintenance: m.clone() }, 1_i64)),
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn maintenance(name: &str, stage: &str, timeout: Option<&str>, status: serde_json::Value) -> Arc<NodeMaintenance> {
        let mut spec = json!({"nodeSelector": {"nodeSelectorTerms": []}, "stage": stage});
        if let Some(t) = timeout {
            spec["drainTimeout"] = json!(t);
        }
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
                "metadata": {"name": name}, "spec": spec, "status": status,
            }))
            .unwrap(),
        )
    }

    fn node(name: &str, holders: &[&str]) -> Arc<Node> {
        let annotation = json!({"maintenances": holders, "unschedulableBefore": false}).to_string();
        Arc::new(
            serde_json::from_value(json!({"metadata": {
                "name": name, "annotations": {crate::api::MAINTENANCES_ANNOTATION: annotation}}}))
            .unwrap(),
        )
    }

    fn draining(drained: &str, counts: serde_json::Value) -> serde_json::Value {
        draining_for(drained, "Draining", counts)
    }

    fn draining_for(drained: &str, reason: &str, counts: serde_json::Value) -> serde_json::Value {
        json!({
            "stageStatuses": [{"name": "Cordon", "startTimestamp": "2026-11-22T00:00:00Z"},
                              {"name": "Drain", "startTimestamp": "2026-11-22T00:00:10Z"}],
            "drainStatus": {"lastProgressTime": "2026-11-22T00:05:00Z"},
            "nodeCounts": counts,
            "conditions": [{"type": "Drained", "status": drained, "reason": reason, "message": "",
                            "lastTransitionTime": "2026-11-22T00:00:10Z"}],
        })
    }

    const DRAIN_START: f64 = 1_795_305_610.0; // 2026-11-22T00:00:10Z

    #[test]
    fn running_drains_carry_their_start_progress_and_deadline() {
        let nodes = json!({"waiting": 1, "draining": 1, "drained": 1, "released": 2});
        let ms = [
            maintenance("timed", "Drain", Some("30m"), draining("False", nodes)),
            maintenance("open", "Drain", None, draining("False", json!({}))),
            maintenance("bad-timeout", "Drain", Some("soon"), draining("False", json!({}))),
            maintenance("done", "Drain", Some("1m"), draining("True", json!({}))),
            maintenance("idle", "Idle", None, json!({})),
        ];
        let s = state(&[node("a", &["timed"]), node("b", &["timed", "open"])], &ms);
        assert_eq!(s.by_stage, vec![(Stage::Idle, 1), (Stage::Cordon, 0), (Stage::Drain, 4), (Stage::Complete, 0)]);
        let progress = Some(DRAIN_START + 290.0);
        assert_eq!(
            s.drains,
            vec![
                RunningDrain {
                    maintenance: "timed".into(),
                    started: DRAIN_START,
                    last_progress: progress,
                    deadline: Some(DRAIN_START + 1800.0)
                },
                RunningDrain {
                    maintenance: "open".into(),
                    started: DRAIN_START,
                    last_progress: progress,
                    deadline: None
                },
                RunningDrain {
                    maintenance: "bad-timeout".into(),
                    started: DRAIN_START,
                    last_progress: progress,
                    deadline: None
                },
            ],
            "a finished drain and an Idle maintenance have none"
        );
        assert_eq!(s.nodes["timed"], NodeCounts { waiting: 1, draining: 1, drained: 1, released: 2, cordoned: 0 });
        assert_eq!(s.nodes["open"], NodeCounts::default());
        assert_eq!(s.nodes["idle"], NodeCounts::default());
        assert!(s.held_by_missing.is_empty());
        assert_eq!(s.held_nodes, 2);
        assert_eq!(
            s.pending,
            BTreeMap::from([("timed".into(), 0), ("open".into(), 0), ("bad-timeout".into(), 0), ("done".into(), 0)])
        );
        assert_eq!(s.timed_out, 0);
    }

    #[test]
    fn a_drain_waiting_for_pods_to_finish_shows_no_progress_time() {
        let ms = [maintenance(
            "jobs",
            "Drain",
            None,
            draining_for("False", crate::planner::decide::status::WAITING_FOR_COMPLETION, json!({})),
        )];
        let s = state(&[], &ms);
        assert_eq!(
            s.drains,
            vec![RunningDrain {
                maintenance: "jobs".into(),
                started: DRAIN_START,
                last_progress: None,
                deadline: None
            }],
            "a wait is not a stall: the stall alert has no series to fire on"
        );
    }

    #[test]
    fn a_node_held_by_a_maintenance_that_is_gone_is_reported() {
        let ms = [maintenance("live", "Cordon", None, json!({}))];
        let s = state(&[node("a", &["live", "gone"]), node("b", &["live"])], &ms);
        assert_eq!(s.held_by_missing, BTreeSet::from([("a".to_owned(), "gone".to_owned())]));
        assert!(!s.nodes.contains_key("gone"));
    }
}
