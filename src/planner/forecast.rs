//! The forecast (SPEC 4.7): when will a maintenance finish, under its windows, blackouts,
//! budgets and rolling holds?
//!
//! A simulation forward from now with the rules the controller decides by, not a second model
//! of them: at each instant the budgets' gates are evaluated by [`CompiledGates::evaluate`]
//! (windows in their zones, daylight saving and blackouts included), the holds are allotted by
//! [`allot`] (`spec.maxUnavailable`, every budget's count, pauses and closed gates: the
//! [`super::holds::START_GATES`]), and time moves to the next instant something can change: a
//! node's expected release, or, while a node waits for a gate, the next edge the gates report
//! ([`super::holds::Allotment::next_instant`]). A held node whose start waits for its gates
//! (a group maintenance held in Cordon) starts when [`super::holds::Allotment::node_gates`]
//! no longer closes it; a node that started finishes however its gates move after (SPEC 4.6).
//!
//! What cannot be foreseen is assumed, and said ([`Assumption`]): health and alert gates stay
//! open; other maintenances keep the nodes they hold and start no more; pauses present now
//! stay. A node's time from start to release comes from the [`Basis`]: this maintenance's
//! finished nodes (median for the expected timeline, p90 for the late one), else a duration
//! the caller gives, else none (no invented number: nodes that can start without a release
//! still get their start, the rest no time).
//!
//! Bounded: the simulation looks [`HORIZON`] ahead (a year); a node that cannot start within
//! it never starts, with why ([`Never`]).

pub mod from_cluster;
#[cfg(test)]
mod proptests;
pub mod status;
#[cfg(test)]
mod tests;

use super::holds::{BudgetView, HoldRequest, NodeView, Wait, allot};
use crate::api::{GateReason, scaled_count};
use crate::gates::{AlertsView, CompiledGates, EdgeKind, GateEdge};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

/// How far ahead the forecast looks: 366 days, a year of windows whatever its length. A node
/// that cannot start by then never starts, as far as the forecast can say.
pub const HORIZON: SignedDuration = SignedDuration::from_hours(366 * 24);

/// At most this many instants are simulated for gate edges alone (no node released then):
/// a year of daily windows opening and closing is 730 of them. Each costs an evaluation of
/// every budget's gates (cron searches); windows that open every few minutes, or fire inside
/// a long blackout, would otherwise be stepped through one by one for a year (seconds of CPU
/// per forecast, found by fuzzing). Releases are not counted: each node releases once.
const MAX_EDGE_STEPS: usize = 1_500;

/// At most this many window and blackout edges are listed ([`Forecast::edges`]).
pub const MAX_EDGES: usize = 500;

/// How long a node takes from its start to its release, for the expected and the late
/// timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeDurations {
    /// The expected duration (the median of the finished nodes, or the given one).
    pub median: Duration,
    /// The late bound (the 90th percentile of the finished nodes, or the given one).
    pub late: Duration,
}

/// Where the node durations come from (SPEC 4.7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Basis {
    /// This maintenance's finished nodes: the median and the 90th percentile (nearest rank)
    /// of their times from start to release.
    FinishedNodes {
        /// How many finished nodes were measured (at least 1).
        nodes: usize,
        /// The median, in seconds.
        median_seconds: u64,
        /// The 90th percentile, in seconds.
        p90_seconds: u64,
    },
    /// A duration given by the caller (`--node-duration`): no node has finished yet. The late
    /// timeline is the expected one.
    Given {
        /// The duration, in seconds.
        seconds: u64,
    },
    /// No node has finished and none was given: no release can be foreseen.
    None,
}

impl Basis {
    /// The basis from the times (start to release) of the maintenance's `finished` nodes
    /// when there is at least one, else the `given` duration, else none. Durations are taken
    /// in whole seconds.
    pub fn new(finished: &[Duration], given: Option<Duration>) -> Basis {
        let mut secs: Vec<u64> = finished.iter().map(Duration::as_secs).collect();
        secs.sort_unstable();
        let rank = |p: usize| secs[(secs.len() * p).div_ceil(100).clamp(1, secs.len()) - 1];
        match (secs.is_empty(), given) {
            (false, _) => Basis::FinishedNodes { nodes: secs.len(), median_seconds: rank(50), p90_seconds: rank(90) },
            (true, Some(d)) => Basis::Given { seconds: d.as_secs() },
            (true, None) => Basis::None,
        }
    }

    /// The durations this basis gives; `None` without a basis.
    pub fn durations(&self) -> Option<NodeDurations> {
        let (median, late) = match *self {
            Basis::FinishedNodes { median_seconds, p90_seconds, .. } => (median_seconds, p90_seconds),
            Basis::Given { seconds } => (seconds, seconds),
            Basis::None => return None,
        };
        Some(NodeDurations { median: Duration::from_secs(median), late: Duration::from_secs(late) })
    }
}

/// `1h12m`, `45s`: a duration as the Go durations of the API read.
fn show_duration(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string().replace(' ', "")
}

impl fmt::Display for Basis {
    /// `3 finished nodes (median 1h12m, p90 1h40m)`, `given node duration 2h`, or
    /// `no basis: no node has finished yet`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |s: u64| show_duration(Duration::from_secs(s));
        match *self {
            Basis::FinishedNodes { nodes, median_seconds, p90_seconds } => {
                let noun = if nodes == 1 { "node" } else { "nodes" };
                write!(f, "{nodes} finished {noun} (median {}, p90 {})", show(median_seconds), show(p90_seconds))
            }
            Basis::Given { seconds } => write!(f, "given node duration {}", show(seconds)),
            Basis::None => write!(f, "no basis: no node has finished yet"),
        }
    }
}

/// Where a selected node of the maintenance stands now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeFact {
    /// Its part is done: released (rolling), or drained (group maintenance), at that time
    /// when known.
    Done(Option<Timestamp>),
    /// Started at that time (held and, in Drain, allowed to evict): it finishes whatever
    /// the gates do.
    Started(Timestamp),
    /// Held, its start waiting for its gates (a group maintenance held in Cordon, or a hold
    /// whose drain a gate closed before it began).
    Held,
    /// Not held.
    Waiting,
}

/// A NodeDisruptionBudget over some of the maintenance's nodes, with its gates compiled to be
/// evaluated at every simulated instant.
#[derive(Clone, Debug)]
pub struct BudgetTimeline {
    /// The budget as the allotment reads it (its `gates` are replaced at each instant).
    pub view: BudgetView,
    /// Its gates.
    pub gates: CompiledGates,
    /// It has a health gate (`maxUnhealthy` or `alerts`): assumed open.
    pub health_gate: bool,
}

/// Everything a forecast reads: plain data, built from the cluster by
/// [`from_cluster::ForecastCluster::input`].
#[derive(Clone, Debug)]
pub struct ForecastInput<'a> {
    /// The maintenance, as the allotment reads it; its `released` nodes are done.
    pub request: HoldRequest,
    /// Each selected node's state now, by name (a selected node missing here waits).
    pub facts: BTreeMap<String, NodeFact>,
    /// The Nodes (every one the budgets count), with their holders now.
    pub nodes: Vec<NodeView<'a>>,
    /// Every NodeDisruptionBudget (those over none of the maintenance's nodes are left out),
    /// borrowed from those a decision's forecasts share where it can be.
    pub budgets: Vec<Cow<'a, BudgetTimeline>>,
    /// Where node durations come from.
    pub basis: Basis,
    /// Now (UTC).
    pub now: Timestamp,
}

/// Where a node stands now, as the forecast shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum NodeState {
    /// Done (released, or drained in a group maintenance).
    Done,
    /// Started, not done.
    Started,
    /// Held, waiting for its gates to start.
    Held,
    /// Not held yet.
    Waiting,
}

/// One node's forecast.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeForecast {
    /// The node's name.
    pub node: String,
    /// Where it stands now.
    pub state: NodeState,
    /// When it starts (started: when it did) on the expected timeline; `None` when it
    /// never starts, or when without a basis no release it waits for can be foreseen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<Timestamp>,
    /// When its part is done on the expected timeline: released (rolling), or drained (a
    /// group maintenance gives its nodes back at Complete). Done nodes: when it was, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub release: Option<Timestamp>,
    /// When it starts on the late timeline (p90 durations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_start: Option<Timestamp>,
    /// When its part is done on the late timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_release: Option<Timestamp>,
    /// When the maintenance window it starts in opened (expected timeline); `None` when it
    /// starts in a window open now, or no budget over it has windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_opened: Option<Timestamp>,
    /// Why it never starts within the horizon (its wait's message, as its `drainMessage`
    /// would say it then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never: Option<String>,
}

/// Some nodes never start within the horizon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Never {
    /// How many.
    pub nodes: usize,
    /// Why the first of them waits: a gate's reason (`OutsideMaintenanceWindow`: the windows
    /// never open outside the blackouts; `Paused`, `Blackout`), `WaitingForPlace` (its own
    /// held nodes never finish) or `InsufficientNodes` (a budget's count is held by nodes
    /// that are not given back).
    pub reason: String,
    /// Its wait's message.
    pub message: String,
}

/// What the forecast takes for granted because it cannot foresee it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all_fields = "camelCase")]
pub enum Assumption {
    /// Health and alert gates (`healthGate`) cannot be foreseen: assumed open throughout.
    HealthGatesOpen {
        /// The budgets over the maintenance's nodes with a health gate.
        budgets: Vec<String>,
    },
    /// Other maintenances keep the nodes they hold now and start no more.
    OthersKeepTheirNodes {
        /// Those holding nodes that a budget of this maintenance counts.
        maintenances: Vec<String>,
    },
    /// A group maintenance (no `maxUnavailable`) gives its nodes back at Complete: its nodes
    /// count against their budgets until then, and a node's release is when it is drained.
    GroupReleasesAtComplete,
    /// Pauses present now (a budget's pause request, `spec.paused`) stay.
    PausesStay,
}

impl fmt::Display for Assumption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assumption::HealthGatesOpen { budgets } if budgets.is_empty() => {
                write!(f, "health and alert gates are assumed open (they cannot be foreseen)")
            }
            Assumption::HealthGatesOpen { budgets } => write!(
                f,
                "health and alert gates are assumed open (they cannot be foreseen): NodeDisruptionBudget {}",
                budgets.join(", ")
            ),
            Assumption::OthersKeepTheirNodes { maintenances } => {
                write!(f, "other maintenances keep the nodes they hold and start no more: {}", maintenances.join(", "))
            }
            Assumption::GroupReleasesAtComplete => write!(
                f,
                "without maxUnavailable every node is held until Complete: a node's release is when it is drained"
            ),
            Assumption::PausesStay => write!(f, "pauses present now stay"),
        }
    }
}

/// What the windows and blackouts of a budget over the maintenance's nodes say at the
/// forecast's now: with [`Forecast::edges`], their state at every instant of the timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BudgetNow {
    /// The NodeDisruptionBudget's name.
    pub budget: String,
    /// Whether a window is open now; `None` when it has no windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_open: Option<bool>,
    /// A blackout covers now.
    pub blackout: bool,
}

/// The forecast of one maintenance (SPEC 4.7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forecast {
    /// The maintenance's name.
    pub maintenance: String,
    /// When it was made: the input's now.
    pub computed_at: Timestamp,
    /// How far it looked: `computedAt` + [`HORIZON`], or less when the timeline crossed more
    /// window and blackout edges than a forecast follows (1,500: a year of daily windows; a
    /// node that has not started by then counts as never starting).
    pub horizon: Timestamp,
    /// Where node durations come from.
    pub basis: Basis,
    /// `spec.maxUnavailable` resolved against the selected nodes; `None`: a group maintenance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_at_once: Option<usize>,
    /// Every selected node: done ones first, then by expected start, then those without one.
    pub nodes: Vec<NodeForecast>,
    /// When the last node is done on the expected (median) timeline; `None` when some node
    /// never starts, or without a basis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Timestamp>,
    /// When the last node is done on the late (p90) timeline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_completion_time: Option<Timestamp>,
    /// Set when some node never starts within the horizon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub never: Option<Never>,
    /// The window and blackout edges of the budgets over its nodes that the timeline crosses:
    /// after now up to `edgesUntil`, in time order, at most [`MAX_EDGES`].
    pub edges: Vec<GateEdge>,
    /// The end of the timeline `edges` covers: the late completion; without one (a node never
    /// starts, or no basis), a day past the last instant foreseen, so that the window the last
    /// foreseen start falls in shows whole.
    pub edges_until: Timestamp,
    /// The budgets over its nodes, with what their windows and blackouts say now.
    pub budgets: Vec<BudgetNow>,
    /// The next blackout start on those budgets after now, however far ahead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_blackout: Option<GateEdge>,
    /// What it takes for granted.
    pub assumptions: Vec<Assumption>,
}

/// One node in a simulated timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sim {
    Waiting,
    Held,
    /// Started then; done at the end (`None`: without a basis, never foreseen).
    Running(Timestamp, Option<Timestamp>),
    /// Done then (`None`: done before, time unknown).
    Done(Option<Timestamp>, Option<Timestamp>),
}

/// One simulated timeline: each selected node's place in it and why it still waits at its
/// end, in the order of the request's `selected`.
struct Timeline {
    nodes: Vec<Sim>,
    waits: Vec<Option<Why>>,
    /// How far it was simulated: the horizon, or the instant [`MAX_EDGE_STEPS`] stopped it at.
    until: Timestamp,
}

/// Why a node waits at the end of a timeline.
struct Why {
    /// [`Never::reason`].
    reason: &'static str,
    /// A gate (or a pause) stops it, not a place or a count that releases would free.
    gate: bool,
    /// Its wait's message.
    message: String,
}

impl From<&Wait> for Why {
    fn from(wait: &Wait) -> Self {
        let reason = match wait {
            Wait::Gated(g) => g.reason().map_or("Paused", GateReason::as_str),
            Wait::Turn { .. } => "WaitingForPlace",
            Wait::Budget { .. } => "InsufficientNodes",
        };
        Why { reason, gate: wait.gates().is_some(), message: wait.to_string() }
    }
}

fn after(at: Timestamp, d: Duration) -> Timestamp {
    at.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Simulates `input` forward from its now with each node taking `duration` from start to
/// done (`None`: nodes never finish, so only starts that need no release are foreseen).
fn simulate(input: &ForecastInput<'_>, duration: Option<Duration>) -> Timeline {
    let me = input.request.name.as_str();
    let rolling = input.request.max_unavailable.is_some();
    let now = input.now;
    let until = now.checked_add(HORIZON).unwrap_or(Timestamp::MAX);
    let mut request = input.request.clone();
    let mut nodes = input.nodes.clone();
    let by_name: FxHashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (&*n.name, i)).collect();
    // Each selected node's view, by its place in `selected`.
    let position: Vec<Option<usize>> =
        input.request.selected.iter().map(|n| by_name.get(n.as_str()).copied()).collect();
    let mut views: Vec<BudgetView> = input.budgets.iter().map(|b| b.view.clone()).collect();
    // Whether a node was cordoned before this maintenance held it (its release leaves that
    // cordon); a node held now counts as cordoned by it, as the roll preview takes it.
    let mut cordoned_before = vec![false; position.len()];
    let mut sims: Vec<Sim> = Vec::with_capacity(position.len());
    for (name, &place) in input.request.selected.iter().zip(&position) {
        let fact = input.facts.get(name).copied().unwrap_or(NodeFact::Waiting);
        let fact = match fact {
            NodeFact::Waiting | NodeFact::Held | NodeFact::Started(_) if request.released.contains(name) => {
                NodeFact::Done(None)
            }
            fact => fact,
        };
        let sim = match fact {
            NodeFact::Done(at) => Sim::Done(None, at),
            NodeFact::Started(at) => Sim::Running(at, duration.map(|d| after(at, d).max(now))),
            NodeFact::Held => Sim::Held,
            NodeFact::Waiting => Sim::Waiting,
        };
        let held = matches!(sim, Sim::Running(..) | Sim::Held) || (!rolling && matches!(sim, Sim::Done(..)));
        if rolling && matches!(sim, Sim::Done(..)) {
            request.released.insert(name.clone());
        }
        if let Some(i) = place {
            let view = &mut nodes[i];
            match (held, view.holders.contains(me)) {
                (true, false) => {
                    view.holders.to_mut().insert(me.to_owned());
                    view.unschedulable = true;
                }
                (false, true) => {
                    view.holders.to_mut().remove(me);
                }
                _ => {}
            }
        }
        sims.push(sim);
    }
    let selected = &input.request.selected;
    let no_alerts = AlertsView::Firing(Vec::new());
    let mut at = now;
    let mut edge_steps = 0;
    let (mut last, looked_until) = loop {
        for (k, sim) in sims.iter_mut().enumerate() {
            let Sim::Running(start, Some(end)) = *sim else { continue };
            if end > at {
                continue;
            }
            *sim = Sim::Done(Some(start), Some(end));
            if rolling && let Some(i) = position[k] {
                nodes[i].holders.to_mut().remove(me);
                nodes[i].unschedulable = cordoned_before[k];
                request.released.insert(selected[k].clone());
            }
        }
        for (view, budget) in views.iter_mut().zip(&input.budgets) {
            // No node list: health is assumed (no unhealthy node), and no alert fires.
            view.gates = budget.gates.evaluate(&[], &no_alerts, at);
        }
        let allotment = allot(std::slice::from_ref(&request), &nodes, &views);
        let mine = allotment.maintenances.get(me);
        let mut gated = false;
        for (k, sim) in sims.iter_mut().enumerate() {
            let name = &selected[k];
            let starts = match *sim {
                Sim::Waiting => {
                    gated |= mine.and_then(|m| m.waiting.get(name)).is_some_and(|w| w.gates().is_some());
                    let granted = mine.is_some_and(|m| m.granted.contains(name));
                    if granted && let Some(i) = position[k] {
                        cordoned_before[k] = nodes[i].unschedulable;
                        nodes[i].holders.to_mut().insert(me.to_owned());
                        nodes[i].unschedulable = true;
                    }
                    granted
                }
                Sim::Held => {
                    let closed = allotment.node_gates.get(name).is_some_and(|g| !g.is_open());
                    gated |= closed;
                    !closed
                }
                Sim::Running(..) | Sim::Done(..) => false,
            };
            if starts {
                *sim = Sim::Running(at, duration.map(|d| after(at, d)));
            }
        }
        let release = sims.iter().filter_map(|s| if let Sim::Running(_, end) = s { *end } else { None }).min();
        let edge = if gated { allotment.next_instant() } else { None };
        match [release, edge].into_iter().flatten().filter(|t| *t > at).min() {
            Some(t) if t <= until && release == Some(t) => at = t,
            Some(t) if t <= until && edge_steps < MAX_EDGE_STEPS => {
                edge_steps += 1;
                at = t;
            }
            Some(t) if t <= until => break (allotment, at),
            _ => break (allotment, until),
        }
    };
    // Why the nodes that did not start wait, as the last instant simulated says it.
    let waiting = last.maintenances.remove(me).map(|h| h.waiting).unwrap_or_default();
    let waits = selected
        .iter()
        .zip(&sims)
        .map(|(name, sim)| match sim {
            Sim::Waiting => waiting.get(name).map(Why::from),
            Sim::Held => last.node_gates.get(name).map(|g| Why::from(&Wait::Gated(g.clone()))),
            Sim::Running(..) | Sim::Done(..) => None,
        })
        .collect();
    Timeline { nodes: sims, waits, until: looked_until }
}

/// The node's (start, release) in a timeline.
fn times(sim: &Sim) -> (Option<Timestamp>, Option<Timestamp>) {
    match sim {
        Sim::Running(start, end) => (Some(*start), *end),
        Sim::Done(start, end) => (*start, *end),
        _ => (None, None),
    }
}

/// When every node of a timeline is done; `None` when one is not (never starts, or no basis).
fn completion(timeline: &Timeline, now: Timestamp) -> Option<Timestamp> {
    timeline.nodes.iter().try_fold(now, |latest, sim| match sim {
        Sim::Done(_, end) | Sim::Running(_, end @ Some(_)) => Some(end.map_or(latest, |e| latest.max(e))),
        _ => None,
    })
}

/// Forecasts `input` (SPEC 4.7; see the module documentation): the expected timeline from the
/// median duration of its basis, the late one from the p90, each node's start and release on
/// both, the completion of each, the edges crossed, the next blackout and the assumptions.
/// Pure and deterministic; never panics on input.
pub fn forecast(input: &ForecastInput<'_>) -> Forecast {
    let now = input.now;
    let durations = input.basis.durations();
    let expected = simulate(input, durations.map(|d| d.median));
    let late = durations.filter(|d| d.late != d.median).map(|d| simulate(input, Some(d.late)));
    let late = late.as_ref().unwrap_or(&expected);
    let completion_time = completion(&expected, now);
    let late_completion_time = completion(late, now);
    let foreseen = [&expected, late]
        .iter()
        .flat_map(|t| t.nodes.iter().map(times))
        .flat_map(|(start, end)| [start, end])
        .flatten()
        .max();
    let day = SignedDuration::from_hours(24);
    let edges_until =
        late_completion_time.or_else(|| foreseen.map(|t| t.checked_add(day).unwrap_or(Timestamp::MAX))).unwrap_or(now);
    let mut edges: Vec<GateEdge> =
        input.budgets.iter().flat_map(|b| b.gates.edges(now, edges_until, MAX_EDGES)).collect();
    edges.sort_by(|a, b| (a.at, &a.budget, a.kind).cmp(&(b.at, &b.budget, b.kind)));
    edges.truncate(MAX_EDGES);
    let next_blackout = input.budgets.iter().filter_map(|b| b.gates.next_blackout_start(now)).min_by_key(|e| e.at);
    let budgets = input
        .budgets
        .iter()
        .map(|b| {
            let verdict = b.gates.evaluate(&[], &AlertsView::Firing(Vec::new()), now);
            BudgetNow {
                budget: b.gates.budget().to_owned(),
                window_open: verdict.maintenance_window.map(|w| w.open),
                blackout: verdict.closed.iter().any(|g| g.reason == GateReason::Blackout),
            }
        })
        .collect();

    // The budgets over each node, read only for nodes that start in a window still to open.
    let starts_later = expected.nodes.iter().any(|sim| times(sim).0.is_some_and(|t| t > now));
    let mut covering: FxHashMap<&str, Vec<&str>> = FxHashMap::default();
    for b in input.budgets.iter().filter(|_| starts_later) {
        for n in &b.view.nodes {
            covering.entry(n.as_str()).or_default().push(b.gates.budget());
        }
    }
    let mut nodes: Vec<(NodeForecast, Option<&Why>)> = input
        .request
        .selected
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let (start, release) = times(&expected.nodes[k]);
            let (late_start, late_release) = times(&late.nodes[k]);
            let state = match input.facts.get(name) {
                _ if input.request.released.contains(name) => NodeState::Done,
                Some(NodeFact::Done(_)) => NodeState::Done,
                Some(NodeFact::Started(_)) => NodeState::Started,
                Some(NodeFact::Held) => NodeState::Held,
                Some(NodeFact::Waiting) | None => NodeState::Waiting,
            };
            let window_opened = start.filter(|s| *s > now).and_then(|s| {
                let over = |e: &&GateEdge| covering.get(name.as_str()).is_some_and(|b| b.contains(&e.budget.as_str()));
                edges.iter().rev().filter(over).find(|e| e.kind == EdgeKind::WindowOpens && e.at <= s)
            });
            // Without a basis only a gate can say "never": a node waiting for a place or a
            // count waits for releases that cannot be foreseen.
            let never = expected.waits[k].as_ref().filter(|why| durations.is_some() || why.gate);
            let forecast = NodeForecast {
                node: name.clone(),
                state,
                start,
                release,
                late_start,
                late_release,
                window_opened: window_opened.map(|e| e.at),
                never: never.map(|why| why.message.clone()),
            };
            (forecast, never)
        })
        .collect();
    nodes.sort_by(|(a, _), (b, _)| {
        let key = |n: &NodeForecast| (n.state != NodeState::Done, n.start.is_none(), n.start);
        key(a).cmp(&key(b)).then_with(|| a.node.cmp(&b.node))
    });
    let never_nodes = nodes.iter().filter(|(n, _)| n.never.is_some()).count();
    let never = nodes.iter().find_map(|(_, why)| *why).map(|why| Never {
        nodes: never_nodes,
        reason: why.reason.to_owned(),
        message: why.message.clone(),
    });
    let nodes: Vec<NodeForecast> = nodes.into_iter().map(|(n, _)| n).collect();
    let (completion_time, late_completion_time) =
        if never.is_some() { (None, None) } else { (completion_time, late_completion_time) };
    Forecast {
        maintenance: input.request.name.clone(),
        computed_at: now,
        horizon: expected.until.min(late.until),
        basis: input.basis.clone(),
        nodes_at_once: input
            .request
            .max_unavailable
            .as_ref()
            .map(|v| scaled_count(v, input.request.selected.len()).unwrap_or(1)),
        nodes,
        completion_time,
        late_completion_time,
        never,
        edges,
        edges_until,
        budgets,
        next_blackout,
        assumptions: assumptions(input),
    }
}

fn assumptions(input: &ForecastInput<'_>) -> Vec<Assumption> {
    let me = input.request.name.as_str();
    let budgets = input.budgets.iter().filter(|b| b.health_gate).map(|b| b.gates.budget().to_owned()).collect();
    let mut out = vec![Assumption::HealthGatesOpen { budgets }];
    let counted: BTreeSet<&str> = input.budgets.iter().flat_map(|b| b.view.nodes.iter().map(String::as_str)).collect();
    let others: BTreeSet<String> = input
        .nodes
        .iter()
        .filter(|n| counted.contains(&*n.name))
        .flat_map(|n| n.holders.iter().filter(|h| h.as_str() != me).cloned())
        .collect();
    if !others.is_empty() {
        out.push(Assumption::OthersKeepTheirNodes { maintenances: others.into_iter().collect() });
    }
    if input.request.max_unavailable.is_none() {
        out.push(Assumption::GroupReleasesAtComplete);
    }
    let paused = input.budgets.iter().any(|b| b.gates.paused());
    if input.request.paused || paused {
        out.push(Assumption::PausesStay);
    }
    out
}
