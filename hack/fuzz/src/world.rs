//! A small cluster from fuzzer bytes, for the `decide` target: up to 6 Nodes in two pools,
//! 4 NodeMaintenances, 3 NodeDisruptionBudgets and 24 pods, with names drawn from short
//! lists so that selectors, holders annotations, statuses and pods refer to each other.
//! Mirror structs derive `Arbitrary` and are written as the JSON the API serves, then read
//! into the product's types as the caches read them: the library needs no `arbitrary`.
//!
//! [`World::check`] runs one decision as the controller's loop makes it (the snapshot, the
//! scopes, the planning pass from the same objects, each maintenance's and the cluster-wide
//! decision) and checks it against a model written from the mirror, not from the product:
//! - no eviction on a node the maintenance does not hold (after this decision's holds and
//!   releases), does not select, or released; none by a maintenance that does not drain;
//! - no eviction on a node under a pause (a budget's pause request, a paused maintenance
//!   holding it), nor, before its drain started, under a closed gate (blackout, unreadable
//!   alerts); each evicted pod is on that node and is one the rules let go;
//! - no new hold beyond the maintenance's `maxUnavailable`, beyond what a budget allows
//!   over its selected nodes, under a pause or a closed gate, or by a paused or inactive
//!   maintenance; at most `--max-draining-nodes` nodes evict (besides those already evicting).

use arbitrary::Arbitrary;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use node_maintenance::api::node::published_status;
use node_maintenance::api::{DrainPlanEntry, NodeDisruptionBudget, NodeMaintenance, PodType, default_plan};
use node_maintenance::gates::{AlertsRead, AlertsView};
use node_maintenance::planner::decide::drain::DrainView;
use node_maintenance::planner::decide::maintenance::Release;
use node_maintenance::planner::decide::{self, Snapshot};
use node_maintenance::planner::from_cluster::{Drained, Nodes, drain_maintenances, node_inputs};
use node_maintenance::planner::{PlannerInput, PlannerOptions, PodLabels, PodPolicy, PodView, plan};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

const NODES: [&str; 6] = ["n0", "n1", "n2", "n3", "n4", "n5"];
const MAINTENANCES: [&str; 4] = ["m0", "m1", "m2", "m3"];
/// A maintenance a holders annotation may name that does not exist (deleted).
const GONE: &str = "gone";
const POOLS: [&str; 2] = ["a", "b"];
const PRIORITIES: [i32; 10] = [-5, 0, 100, 1000, 5000, 1_000_000_000, 2_000_000_000, 2_000_001_000, i32::MAX, i32::MIN];
const SCHEDULES: [&str; 4] = ["0 22 * * 5,6", "*/20 * * * *", "0 12 * * *", "0 0 L * *"];
const WINDOW_DURATIONS: [&str; 4] = ["1h", "8h", "10m", "0s"];
const ZONES: [&str; 3] = ["UTC", "Europe/Berlin", "Mars/Olympus"];
const SELECTORS: [&str; 3] = [r#"{severity="critical"}"#, r#"{team=~"db|storage"}"#, "{a=1}"];
const DRAIN_TIMEOUTS: [&str; 4] = ["30m", "1s", "bogus", "0s"];
const PHASES: [&str; 6] = ["Waiting", "Cordoning", "Cordoned", "Draining", "Drained", "Released"];

/// The time of the decision: `BASE` plus up to 45 days.
const BASE: i64 = 1_795_694_400; // 2026-11-26T12:00:00Z

fn pick<T: Copy>(list: &[T], i: u8) -> T {
    list[usize::from(i) % list.len()]
}

/// A node selector.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum SelectorM {
    /// `metadata.name In` the nodes whose bit is set (none: an invalid `In` without values).
    Names(u8),
    /// `pool In [a]` or `[b]`.
    Pool(bool),
    /// `pool Exists`: every node.
    Everything,
    /// An unknown operator: selects nothing.
    Invalid,
}

impl SelectorM {
    fn json(self) -> Value {
        let term = match self {
            SelectorM::Names(mask) => {
                let names: Vec<&str> =
                    NODES.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, n)| *n).collect();
                json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": names}]})
            }
            SelectorM::Pool(b) => {
                json!({"matchExpressions": [{"key": "pool", "operator": "In", "values": [POOLS[usize::from(b)]]}]})
            }
            SelectorM::Everything => json!({"matchExpressions": [{"key": "pool", "operator": "Exists"}]}),
            SelectorM::Invalid => json!({"matchExpressions": [{"key": "pool", "operator": "Near", "values": ["a"]}]}),
        };
        json!({"nodeSelectorTerms": [term]})
    }

    /// The model: whether it selects node `i` of pool `pool`.
    fn selects(self, i: usize, pool: usize) -> bool {
        match self {
            SelectorM::Names(mask) => mask & (1 << i) != 0,
            SelectorM::Pool(b) => usize::from(b) == pool,
            SelectorM::Everything => true,
            SelectorM::Invalid => false,
        }
    }
}

/// An int-or-string count.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum CountM {
    Int(i8),
    Percent(u8),
    Unreadable,
}

impl CountM {
    fn json(self) -> Value {
        match self {
            CountM::Int(n) => json!(n),
            CountM::Percent(p) => json!(format!("{p}%")),
            CountM::Unreadable => json!("lots"),
        }
    }

    /// `scaled_count`'s rule, written again: at least 1, a percentage of `total` rounded up.
    fn scaled(self, total: usize) -> Option<usize> {
        match self {
            CountM::Int(n) if n >= 1 => Some(n as usize),
            CountM::Percent(p) if (1..=100).contains(&p) => Some((total * usize::from(p)).div_ceil(100).max(1)),
            _ => None,
        }
    }
}

/// A drainPlan entry (or a drain target of a published status).
#[derive(Arbitrary, Debug, Clone)]
pub struct EntryM {
    priority: PriorityM,
    pod_type: u8,
    selector: Option<PodSelectorM>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum PriorityM {
    Listed(u8),
    Any(i32),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct PodSelectorM {
    /// `app` or `tier`.
    key: bool,
    /// matchLabels, In, NotIn, Exists, DoesNotExist, or an unknown operator.
    op: u8,
    /// Which of `a`, `b` and `x` are listed.
    values: u8,
}

impl EntryM {
    /// The entry as JSON; `any_type` lets an unknown podType through (a published status
    /// anyone may write), else the type is one of the three.
    pub fn json(&self, any_type: bool) -> Value {
        let priority = match self.priority {
            PriorityM::Listed(i) => pick(&PRIORITIES, i),
            PriorityM::Any(p) => p,
        };
        let types: &[&str] =
            if any_type { &["Default", "DaemonSet", "Static", "Bogus"] } else { &["Default", "DaemonSet", "Static"] };
        let mut e = json!({"podPriority": priority, "podType": types[usize::from(self.pod_type) % types.len()]});
        if let Some(s) = self.selector {
            let key = if s.key { "tier" } else { "app" };
            let values: Vec<&str> =
                ["a", "b", "x"].iter().enumerate().filter(|(i, _)| s.values & (1 << i) != 0).map(|(_, v)| *v).collect();
            e["podSelector"] = match s.op % 6 {
                0 => json!({"matchLabels": {key: values.first().copied().unwrap_or("a")}}),
                op => {
                    let operator = ["In", "NotIn", "Exists", "DoesNotExist", "Gt"][usize::from(op) - 1];
                    json!({"matchExpressions": [{"key": key, "operator": operator, "values": values}]})
                }
            };
        }
        e
    }

    fn entry(&self) -> DrainPlanEntry {
        serde_json::from_value(self.json(false)).expect("an entry of a known type reads")
    }
}

/// A node's holders annotation.
#[derive(Arbitrary, Debug, Clone)]
pub enum HoldersM {
    None,
    /// The maintenances whose bit is set (bit 4: one that is gone).
    Valid {
        mask: u8,
        unschedulable_before: bool,
    },
    /// Anything (what anyone who may patch a Node can write).
    Unreadable(String),
}

impl HoldersM {
    /// The model: the names it holds for, as the product must read them.
    fn names(&self) -> BTreeSet<&'static str> {
        match self {
            HoldersM::Valid { mask, .. } => MAINTENANCES
                .iter()
                .chain([&GONE])
                .enumerate()
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, m)| *m)
                .collect(),
            _ => BTreeSet::new(),
        }
    }
}

/// A node's published status annotation.
#[derive(Arbitrary, Debug, Clone)]
pub enum PublishedM {
    Valid { targets: Vec<EntryM>, started_minutes_ago: Option<u16>, pending: i32 },
    Unreadable(String),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct NodeM {
    pool: bool,
    ready: bool,
    unschedulable: Option<bool>,
    holders: HoldersM,
    published: Option<PublishedM>,
    /// The done annotation names this maintenance (4, 5: a name that is none of them).
    done: Option<u8>,
    taint: bool,
    boot: Option<u8>,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct WaitM {
    selector: Option<PodSelectorM>,
    timeout: Option<u8>,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct MaintenanceM {
    /// Idle, Cordon, Drain, Complete.
    stage: u8,
    selector: SelectorM,
    max_unavailable: Option<CountM>,
    paused: Option<bool>,
    finalizer: bool,
    deleting: bool,
    /// Stages recorded: none, Cordon, Cordon and Drain, Drain only.
    recorded: u8,
    started_minutes_ago: u16,
    plan: Vec<EntryM>,
    /// Written as admission leaves it (defaulted, canonical) or as stored before.
    canonical: bool,
    plan_index: i8,
    wait: Option<WaitM>,
    drain_timeout: Option<u8>,
    reboot_releases: bool,
    created: u8,
    /// Stored node statuses: (node, phase, boot ID).
    node_statuses: Vec<(u8, u8, Option<u8>)>,
    /// A stored `Drained` condition: its status.
    drained: Option<bool>,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct BudgetM {
    selector: SelectorM,
    max_unavailable: Option<CountM>,
    min_available: Option<CountM>,
    pauses: u8,
    /// (schedule, duration, zone).
    window: Option<(u8, u8, u8)>,
    /// (start, in hours from now; length in hours).
    blackout: Option<(i8, u8)>,
    max_unhealthy: Option<CountM>,
    alerts: Option<u8>,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct PodM {
    node: u8,
    /// Default, DaemonSet, Static.
    pod_type: u8,
    priority: PriorityM,
    /// app label: none, a, b.
    app: u8,
    tier: bool,
    /// terminal, eviction in progress, tolerates the taint, opted out, unmanaged, emptyDir,
    /// owned by a Job, annotated to wait.
    flags: u8,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum AlertsM {
    NotConfigured,
    Failed,
    /// The severities (critical, warning) and teams (db, web) of the firing alerts.
    Firing(Vec<(bool, bool)>),
}

#[derive(Arbitrary, Debug, Clone)]
pub struct World {
    nodes: Vec<NodeM>,
    maintenances: Vec<MaintenanceM>,
    budgets: Vec<BudgetM>,
    pods: Vec<PodM>,
    minutes: u16,
    alerts: AlertsM,
    skip_daemonset_pods: bool,
    block_unmanaged: bool,
    block_emptydir: bool,
    max_draining_nodes: Option<u8>,
    /// Which maintenances are decided now (a bit each; all when 0).
    decided: u8,
    cluster: bool,
    /// Nodes with a refusal of our evictions remembered.
    refused: u8,
}

fn time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn minutes_before(now: Timestamp, minutes: u16) -> Timestamp {
    now.checked_sub(SignedDuration::from_mins(i64::from(minutes))).expect("in range")
}

/// The objects built from a [`World`], as the caches hold them.
pub struct Objects {
    pub nodes: Vec<Arc<Node>>,
    pub maintenances: Vec<Arc<NodeMaintenance>>,
    pub budgets: Vec<Arc<NodeDisruptionBudget>>,
    pub pods: Vec<PodView>,
    pub now: Timestamp,
}

impl World {
    fn nodes(&self) -> &[NodeM] {
        &self.nodes[..self.nodes.len().min(NODES.len())]
    }

    fn maintenances(&self) -> &[MaintenanceM] {
        &self.maintenances[..self.maintenances.len().min(MAINTENANCES.len())]
    }

    fn budgets(&self) -> &[BudgetM] {
        &self.budgets[..self.budgets.len().min(3)]
    }

    fn pods(&self) -> &[PodM] {
        &self.pods[..self.pods.len().min(24)]
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_second(BASE + 60 * i64::from(self.minutes)).expect("in range")
    }

    /// The objects, as JSON read into the product's types.
    pub fn objects(&self) -> Objects {
        let now = self.now();
        let nodes = self.nodes().iter().enumerate().map(|(i, n)| Arc::new(node(i, n, now))).collect();
        let maintenances =
            self.maintenances().iter().enumerate().map(|(i, m)| Arc::new(maintenance(i, m, self, now))).collect();
        let budgets = self.budgets().iter().enumerate().map(|(i, b)| Arc::new(budget(i, b, now))).collect();
        let pods = self.pods().iter().enumerate().filter_map(|(i, p)| pod(i, p, self.nodes().len())).collect();
        Objects { nodes, maintenances, budgets, pods, now }
    }

    fn alerts(&self) -> AlertsView {
        match &self.alerts {
            AlertsM::NotConfigured => AlertsView::NotConfigured,
            AlertsM::Failed => AlertsView::Failed("connection refused".into()),
            AlertsM::Firing(v) => AlertsView::Firing(
                v.iter()
                    .take(4)
                    .enumerate()
                    .map(|(i, (critical, db))| {
                        BTreeMap::from([
                            ("alertname".to_owned(), format!("A{i}")),
                            ("severity".to_owned(), if *critical { "critical" } else { "warning" }.to_owned()),
                            ("team".to_owned(), if *db { "db" } else { "web" }.to_owned()),
                        ])
                    })
                    .collect(),
            ),
        }
    }

    /// One decision over the world, as the controller's loop makes it, checked against the
    /// model (module documentation).
    pub fn check(&self) {
        let o = self.objects();
        let alerts = AlertsRead::from(self.alerts());
        let snapshot = Snapshot {
            nodes: Nodes::for_selectors(&o.nodes, &o.maintenances, &o.budgets),
            maintenances: &o.maintenances,
            budgets: &o.budgets,
            alerts: &alerts,
            busy_requeue: Duration::from_secs(2),
            idle_requeue: Duration::from_secs(300),
            now: Time(o.now),
        };
        let decided = |name: &str| {
            let i = MAINTENANCES.iter().position(|m| *m == name).unwrap_or(0);
            self.decided == 0 || self.decided & (1 << i) != 0
        };
        let scopes = decide::scopes(&snapshot, decided);
        let mut drains = BTreeMap::new();
        if scopes.draining().next().is_some() {
            // The planning pass over the same objects, as `controller::pass` builds it.
            let inputs = drain_maintenances(&o.maintenances, &o.nodes, Drained::Held);
            let names: HashSet<&str> = inputs.iter().flat_map(|m| m.nodes.iter().map(String::as_str)).collect();
            let input = PlannerInput {
                nodes: node_inputs(&o.nodes, |n| names.contains(n), &scopes.gated),
                pods: o.pods.iter().filter(|p| names.contains(&*p.node_name)).cloned().collect(),
                maintenances: inputs.clone(),
                options: PlannerOptions {
                    skip_daemonset_pods: self.skip_daemonset_pods,
                    unmanaged_pods: if self.block_unmanaged { PodPolicy::Block } else { PodPolicy::Evict },
                    emptydir_pods: if self.block_emptydir { PodPolicy::Block } else { PodPolicy::Evict },
                    max_draining_nodes: self.max_draining_nodes.map(u32::from),
                },
                now: o.now,
            };
            let pass = Arc::new(plan(&input));
            for (nm, _) in scopes.draining() {
                let refused = NODES
                    .iter()
                    .take(self.nodes().len())
                    .enumerate()
                    .filter(|(i, _)| self.refused & (1 << i) != 0)
                    .map(|(_, n)| ((*n).to_owned(), "refused by a PodDisruptionBudget".to_owned()))
                    .collect();
                let view = DrainView {
                    decision: pass.clone(),
                    gated: scopes.gated.clone(),
                    evacuation: Default::default(),
                    refused,
                };
                drains.insert(nm.metadata.name.clone().unwrap_or_default(), view);
            }
        }
        let d = decide::decide(&snapshot, scopes, drains, self.cluster);
        Model::new(self, &o).check(&d);
    }
}

fn node(i: usize, n: &NodeM, now: Timestamp) -> Node {
    let mut annotations = serde_json::Map::new();
    match &n.holders {
        HoldersM::None => {}
        h @ HoldersM::Valid { unschedulable_before, .. } => {
            let names: Vec<&str> = h.names().into_iter().collect();
            let value = json!({"maintenances": names, "unschedulableBefore": unschedulable_before}).to_string();
            annotations.insert("nodemaintenance.k8s.io/maintenances".into(), json!(value));
        }
        HoldersM::Unreadable(text) => {
            drop(annotations.insert("nodemaintenance.k8s.io/maintenances".into(), json!(text)))
        }
    }
    match &n.published {
        None => {}
        Some(PublishedM::Valid { targets, started_minutes_ago, pending }) => {
            let mut status = json!({
                "nodeRef": {"name": NODES[i]},
                "drainTargets": targets.iter().take(6).map(|e| e.json(true)).collect::<Vec<_>>(),
                "podsPendingEvictionRequest": pending,
            });
            if let Some(m) = started_minutes_ago {
                status["drainStartTime"] = json!(time(minutes_before(now, *m)));
            }
            annotations.insert("nodemaintenance.k8s.io/maintenance-status".into(), json!(status.to_string()));
        }
        Some(PublishedM::Unreadable(text)) => {
            annotations.insert("nodemaintenance.k8s.io/maintenance-status".into(), json!(text));
        }
    }
    if let Some(d) = n.done {
        let names = [MAINTENANCES.as_slice(), &[GONE, ""]].concat();
        annotations.insert("nodemaintenance.k8s.io/done".into(), json!(pick(&names, d)));
    }
    let mut spec = json!({});
    if let Some(u) = n.unschedulable {
        spec["unschedulable"] = json!(u);
    }
    if n.taint {
        spec["taints"] = json!([{"key": "nodemaintenance.k8s.io/draining", "effect": "NoSchedule"}]);
    }
    let mut status = json!({"conditions": [{"type": "Ready", "status": if n.ready { "True" } else { "False" }}]});
    if let Some(b) = n.boot {
        status["nodeInfo"] = json!({"bootID": format!("boot-{}", b % 3), "machineID": "", "systemUUID": "", "kernelVersion": "",
            "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "", "kubeProxyVersion": "", "operatingSystem": "linux",
            "architecture": "amd64"});
    }
    let value = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NODES[i], "resourceVersion": "1", "labels": {"pool": POOLS[usize::from(n.pool)]}, "annotations": annotations},
        "spec": spec, "status": status,
    });
    serde_json::from_value(value).expect("a Node reads")
}

fn maintenance(i: usize, m: &MaintenanceM, w: &World, now: Timestamp) -> NodeMaintenance {
    let stage = pick(&["Idle", "Cordon", "Drain", "Complete"], m.stage);
    let entries: Vec<DrainPlanEntry> = m.plan.iter().take(6).map(EntryM::entry).collect();
    let plan = if m.canonical { default_plan(&entries) } else { entries };
    let mut spec = json!({"stage": stage, "nodeSelector": m.selector.json(), "drainPlan": plan});
    if let Some(c) = m.max_unavailable {
        spec["maxUnavailable"] = c.json();
    }
    if let Some(p) = m.paused {
        spec["paused"] = json!(p);
    }
    if let Some(wait) = &m.wait {
        let mut v = json!({});
        if let Some(s) = wait.selector {
            v["podSelector"] =
                EntryM { priority: PriorityM::Any(0), pod_type: 0, selector: Some(s) }.json(false)["podSelector"]
                    .clone();
        }
        if let Some(t) = wait.timeout {
            v["timeout"] = json!(pick(&DRAIN_TIMEOUTS, t));
        }
        spec["waitForCompletion"] = v;
    }
    if let Some(t) = m.drain_timeout {
        spec["drainTimeout"] = json!(pick(&DRAIN_TIMEOUTS, t));
    }
    if m.reboot_releases {
        spec["releaseNodesOn"] = json!("Reboot");
    }
    let started = json!(time(minutes_before(now, m.started_minutes_ago)));
    let recorded = |name: &str| json!({"name": name, "startTimestamp": started});
    let stages = match m.recorded % 4 {
        0 => json!([]),
        1 => json!([recorded("Cordon")]),
        2 => json!([recorded("Cordon"), recorded("Drain")]),
        _ => json!([recorded("Drain")]),
    };
    let node_statuses: Vec<Value> = m
        .node_statuses
        .iter()
        .take(6)
        .filter(|(n, _, _)| usize::from(*n % 6) < w.nodes().len())
        .map(|(n, phase, boot)| {
            let mut s = json!({"nodeRef": {"name": pick(&NODES, *n)}, "phase": pick(&PHASES, *phase)});
            if let Some(b) = boot {
                s["bootID"] = json!(format!("boot-{}", b % 3));
            }
            s
        })
        .collect();
    let mut status = json!({
        "stageStatuses": stages, "nodeStatuses": node_statuses,
        "drainStatus": {"drainPlanIndex": m.plan_index},
    });
    if let Some(d) = m.drained {
        status["conditions"] = json!([{"type": "Drained", "status": if d { "True" } else { "False" },
            "reason": "Draining", "message": "", "lastTransitionTime": started}]);
    }
    let mut metadata = json!({
        "name": MAINTENANCES[i], "uid": format!("uid-{i}"), "generation": 1, "resourceVersion": "1",
        "creationTimestamp": time(Timestamp::from_second(BASE - 86_400 + i64::from(m.created)).expect("in range")),
    });
    if m.finalizer {
        metadata["finalizers"] = json!(["nodemaintenance.k8s.io/maintenance-completion"]);
    }
    if m.deleting {
        metadata["deletionTimestamp"] = started.clone();
    }
    let value = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": metadata, "spec": spec, "status": status});
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("a NodeMaintenance reads: {e}: {value}"))
}

fn budget(i: usize, b: &BudgetM, now: Timestamp) -> NodeDisruptionBudget {
    let mut spec = json!({"nodeSelector": b.selector.json()});
    if let Some(c) = b.max_unavailable {
        spec["maxUnavailable"] = c.json();
    }
    if let Some(c) = b.min_available {
        spec["minAvailable"] = c.json();
    }
    let pauses: Vec<Value> =
        (0..b.pauses % 3).map(|p| json!({"name": format!("ops-{p}"), "reason": "incident"})).collect();
    spec["pauseRequests"] = json!(pauses);
    if let Some((s, d, z)) = b.window {
        spec["maintenanceWindows"] = json!([{"schedule": pick(&SCHEDULES, s), "duration": pick(&WINDOW_DURATIONS, d), "timeZone": pick(&ZONES, z)}]);
    }
    if let Some((start, hours)) = b.blackout {
        let start = now.checked_add(SignedDuration::from_hours(i64::from(start))).expect("in range");
        let end = start.checked_add(SignedDuration::from_hours(i64::from(hours))).expect("in range");
        spec["blackouts"] = json!([{"start": time(start), "end": time(end), "reason": "freeze"}]);
    }
    let mut gate = json!({});
    if let Some(c) = b.max_unhealthy {
        gate["maxUnhealthy"] = c.json();
    }
    if let Some(a) = b.alerts {
        gate["alerts"] = json!({"matchers": [pick(&SELECTORS, a)]});
    }
    spec["healthGate"] = gate;
    let value = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
        "metadata": {"name": format!("b{i}"), "resourceVersion": "1", "generation": 1}, "spec": spec});
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("a NodeDisruptionBudget reads: {e}: {value}"))
}

fn pod(i: usize, p: &PodM, nodes: usize) -> Option<PodView> {
    let node = usize::from(p.node) % NODES.len();
    (node < nodes).then_some(())?;
    let flag = |bit: u8| p.flags & (1 << bit) != 0;
    let mut labels: Vec<(&str, &str)> = Vec::new();
    if p.app % 3 != 0 {
        labels.push(("app", if p.app % 3 == 1 { "a" } else { "b" }));
    }
    if p.tier {
        labels.push(("tier", "x"));
    }
    Some(PodView {
        namespace: Arc::from("ns"),
        name: Arc::from(format!("p{i}")),
        uid: Arc::from(format!("uid-p{i}")),
        node_name: Arc::from(NODES[node]),
        priority: match p.priority {
            PriorityM::Listed(i) => pick(&PRIORITIES, i),
            PriorityM::Any(p) => p,
        },
        pod_type: pick(&[PodType::Default, PodType::DaemonSet, PodType::Static], p.pod_type),
        labels: labels.into_iter().collect::<PodLabels>(),
        terminal: flag(0),
        eviction_in_progress: flag(1),
        tolerates_draining_taint: flag(2),
        opted_out: flag(3),
        unmanaged: flag(4),
        emptydir: flag(5),
        owned_by_job: flag(6),
        wait_annotated: flag(7),
    })
}

/// What the invariants read, from the mirror (and, for what the annotations say once read,
/// from the product's parsers, fuzzed on their own by `node_annotations`).
struct Model<'a> {
    w: &'a World,
    o: &'a Objects,
}

impl<'a> Model<'a> {
    fn new(w: &'a World, o: &'a Objects) -> Self {
        Model { w, o }
    }

    fn node_index(&self, name: &str) -> usize {
        NODES.iter().position(|n| *n == name).unwrap_or_else(|| panic!("a decision about an unknown node {name}"))
    }

    fn pool(&self, node: usize) -> usize {
        usize::from(self.w.nodes()[node].pool)
    }

    fn maintenance(&self, name: &str) -> (usize, &MaintenanceM) {
        let i = MAINTENANCES.iter().position(|m| *m == name).expect("a known maintenance");
        (i, &self.w.maintenances()[i])
    }

    fn selects(&self, s: SelectorM, node: usize) -> bool {
        s.selects(node, self.pool(node))
    }

    fn selected(&self, s: SelectorM) -> Vec<usize> {
        (0..self.w.nodes().len()).filter(|n| self.selects(s, *n)).collect()
    }

    /// Nodes `m` released (stored status, phase Released).
    fn released(&self, m: &MaintenanceM) -> BTreeSet<usize> {
        let known = |n: u8| usize::from(n % 6) < self.w.nodes().len();
        m.node_statuses
            .iter()
            .take(6)
            .filter(|(n, p, _)| known(*n) && pick(&PHASES, *p) == "Released")
            .map(|(n, _, _)| usize::from(n % 6))
            .collect()
    }

    fn holders(&self, node: usize) -> BTreeSet<&'static str> {
        self.w.nodes()[node].holders.names()
    }

    fn active(m: &MaintenanceM) -> bool {
        matches!(m.stage % 4, 1 | 2) && !m.deleting
    }

    /// Unavailable for budgets: not Ready, cordoned, or any holders annotation that names
    /// someone (an unreadable one included: read as held, fail safe).
    fn unavailable(&self, node: usize) -> bool {
        let n = &self.w.nodes()[node];
        let held = match &n.holders {
            HoldersM::None => false,
            HoldersM::Valid { .. } => !self.holders(node).is_empty(),
            HoldersM::Unreadable(_) => true,
        };
        !n.ready || n.unschedulable == Some(true) || held
    }

    /// A pause over the node: a budget selecting it with a pause request, or an active
    /// paused maintenance holding it.
    fn paused(&self, node: usize) -> bool {
        let budget = self.w.budgets().iter().any(|b| b.pauses % 3 > 0 && self.selects(b.selector, node));
        let holders = self.holders(node);
        let maintenance = self
            .w
            .maintenances()
            .iter()
            .enumerate()
            .any(|(i, m)| m.paused == Some(true) && Self::active(m) && holders.contains(MAINTENANCES[i]));
        budget || maintenance
    }

    /// A gate that certainly is closed over the node: a pause, a blackout covering now, an
    /// alert gate whose alerts cannot be read or whose matcher does not parse.
    fn gated(&self, node: usize) -> bool {
        self.paused(node)
            || self.w.budgets().iter().filter(|b| self.selects(b.selector, node)).any(|b| {
                let blackout = b
                    .blackout
                    .is_some_and(|(start, hours)| hours > 0 && start <= 0 && i64::from(start) + i64::from(hours) > 0);
                let alerts = b
                    .alerts
                    .is_some_and(|a| pick(&SELECTORS, a) == "{a=1}" || !matches!(self.w.alerts, AlertsM::Firing(_)));
                blackout || alerts
            })
    }

    fn limit(&self, m: &MaintenanceM) -> usize {
        let selected = self.selected(m.selector).len();
        m.max_unavailable.map_or(usize::MAX, |c| c.scaled(selected).unwrap_or(1))
    }

    fn budget_max(&self, b: &BudgetM) -> usize {
        let expected = self.selected(b.selector).len();
        match (b.max_unavailable, b.min_available) {
            (Some(max), None) => max.scaled(expected).map_or(0, |m| m.min(expected)),
            (None, Some(min)) => min.scaled(expected).map_or(0, |m| expected.saturating_sub(m)),
            (None, None) => expected,
            (Some(_), Some(_)) => 0,
        }
    }

    fn check(&self, d: &decide::Decision) {
        let name_of = |m: &NodeMaintenance| m.metadata.name.clone().unwrap_or_default();
        // Every node newly held by this decision, whoever holds it.
        let mut newly: BTreeSet<usize> = BTreeSet::new();
        let mut evicting: BTreeSet<usize> = BTreeSet::new();
        for (nm, md) in &d.maintenances {
            let name = name_of(nm);
            let (_, m) = self.maintenance(&name);
            let released = self.released(m);
            let held_before: BTreeSet<usize> =
                (0..self.w.nodes().len()).filter(|n| self.holders(*n).contains(name.as_str())).collect();
            let new: BTreeSet<usize> = md
                .holds
                .iter()
                .map(|h| self.node_index(h.node.metadata.name.as_deref().unwrap_or_default()))
                .filter(|n| !held_before.contains(n))
                .collect();
            let node_of = |r: &Release| self.node_index(r.node.metadata.name.as_deref().unwrap_or_default());
            // Released before the node writes, and after the status (before the evictions).
            let released_first: BTreeSet<usize> = md.releases.iter().map(node_of).collect();
            let releases: BTreeSet<usize> = md.releases.iter().chain(&md.releases_after_status).map(node_of).collect();
            for r in &releases {
                assert!(held_before.contains(r), "{name} releases {} it does not hold", NODES[*r]);
            }
            if !new.is_empty() {
                assert!(
                    Self::active(m) && m.finalizer && m.paused != Some(true),
                    "{name} holds {new:?} while not active or paused"
                );
                for n in &new {
                    assert!(
                        self.selects(m.selector, *n) && !released.contains(n),
                        "{name} holds {} it does not select",
                        NODES[*n]
                    );
                    assert!(!self.gated(*n), "{name} holds {} under a pause or a closed gate", NODES[*n]);
                }
                let mine: BTreeSet<usize> = self
                    .selected(m.selector)
                    .into_iter()
                    .filter(|n| held_before.contains(n) && !released.contains(n))
                    .collect();
                let after = mine.union(&new).count();
                assert!(after <= self.limit(m), "{name} holds {after} nodes, maxUnavailable allows {}", self.limit(m));
            }
            newly.extend(new.iter().copied());
            let held_after: BTreeSet<usize> =
                held_before.union(&new).copied().filter(|n| !releases.contains(n)).collect();
            for e in md.evictions.iter() {
                let n = self.node_index(e.node.metadata.name.as_deref().unwrap_or_default());
                let node = NODES[n];
                assert!(held_after.contains(&n), "{name} evicts {} on {node}, which it does not hold", e.pod.name);
                assert!(
                    self.selects(m.selector, n) && !released.contains(&n),
                    "{name} evicts on {node}, not selected or released"
                );
                assert!(m.stage % 4 == 2 && !m.deleting && m.finalizer, "{name} evicts on {node} while not draining");
                assert!(!self.paused(n), "{name} evicts on {node} under a pause");
                let started = published_status(e.node).is_some_and(|s| s.drain_start_time.is_some());
                assert!(
                    started || !self.gated(n),
                    "{name} evicts on {node} under a closed gate before its drain started"
                );
                let pod = self
                    .o
                    .pods
                    .iter()
                    .find(|p| p.uid == e.pod.uid)
                    .unwrap_or_else(|| panic!("an unknown pod {}", e.pod.uid));
                assert_eq!(&*pod.node_name, node, "{name} evicts {} as a pod of {node}", e.pod.name);
                let kept = pod.terminal
                    || pod.eviction_in_progress
                    || pod.opted_out
                    || pod.pod_type == PodType::Static
                    || (pod.pod_type == PodType::DaemonSet
                        && (pod.tolerates_draining_taint || self.w.skip_daemonset_pods || !self.w.nodes()[n].taint))
                    || (pod.pod_type == PodType::Default && pod.unmanaged && self.w.block_unmanaged)
                    || (pod.emptydir && self.w.block_emptydir);
                assert!(!kept, "{name} evicts {} on {node}, which the rules keep: {pod:?}", e.pod.name);
                evicting.insert(n);
            }
            for write in &md.node_writes {
                let n = self.node_index(write.node.metadata.name.as_deref().unwrap_or_default());
                let held = held_before.contains(&n) || new.contains(&n);
                assert!(
                    held && !released_first.contains(&n),
                    "{name} writes the state of {}, which it does not hold",
                    NODES[n]
                );
            }
        }
        for (i, b) in self.w.budgets().iter().enumerate() {
            let selected = self.selected(b.selector);
            let taken = selected.iter().filter(|n| newly.contains(n) && !self.unavailable(**n)).count();
            if taken > 0 {
                let down = selected.iter().filter(|n| self.unavailable(**n)).count();
                assert!(
                    down + taken <= self.budget_max(b),
                    "budget b{i}: {down} unavailable and {taken} newly held, it allows {}",
                    self.budget_max(b)
                );
            }
        }
        if let Some(cap) = self.w.max_draining_nodes.filter(|c| *c > 0) {
            let active = self
                .o
                .pods
                .iter()
                .filter(|p| p.eviction_in_progress)
                .map(|p| self.node_index(&p.node_name))
                .collect::<BTreeSet<_>>();
            assert!(
                evicting.len() <= usize::from(cap).max(active.len()),
                "{} nodes evict, --max-draining-nodes {cap}",
                evicting.len()
            );
        }
    }
}
