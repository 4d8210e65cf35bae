//! `forecast`: when will a maintenance finish (SPEC 4.7)? The planner's forecast
//! ([`crate::planner::forecast`]) of a stored maintenance or of a manifest not applied yet, over
//! one snapshot of the cluster (a LIST each, or a file), printed as a text timeline, JSON, or
//! a Gantt chart in SVG ([`gantt`]).

pub mod gantt;

use super::{ClusterArgs, emit, read_input};
use crate::api::{NodeMaintenance, parse_drain_timeout};
use crate::cluster::standalone::StaticView;
use crate::gates::{EdgeKind, GateEdge};
use crate::planner::forecast::{Forecast, NodeForecast, NodeState, from_cluster};
use crate::planner::from_cluster::Nodes;
use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use k8s_openapi::jiff::Timestamp;
use std::fmt::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// How `forecast` prints.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ForecastOutput {
    /// A timeline, one line per node, grouped by the window it starts in.
    Text,
    /// The forecast as JSON (camelCase).
    Json,
    /// A Gantt chart (SVG): nodes by time, windows and blackouts shaded.
    Svg,
}

/// `forecast NAME` or `forecast -f FILE`.
#[derive(Args)]
pub struct ForecastArgs {
    /// The NodeMaintenance to forecast (in the cluster, or in --nodes-file).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    name: Option<String>,
    /// A NodeMaintenance manifest not applied yet (YAML or JSON; `-` for stdin): forecast as if
    /// it started now.
    #[arg(short = 'f', long)]
    file: Option<PathBuf>,
    /// Offline: Nodes, NodeMaintenances and NodeDisruptionBudgets as `kubectl get
    /// nodes,nm,ndb -o yaml` prints them. Without it the cluster is read (nothing is written).
    #[arg(long)]
    nodes_file: Option<PathBuf>,
    /// How long a node takes from its start to its release (a Go duration: `90m`, `2h30m`),
    /// used until one of the maintenance's nodes has finished (then those are measured).
    #[arg(long, value_parser = parse_drain_timeout)]
    node_duration: Option<std::time::Duration>,
    /// Forecast as of this instant (RFC 3339) instead of now.
    #[arg(long, value_parser = parse_instant)]
    at: Option<Timestamp>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = ForecastOutput::Text)]
    output: ForecastOutput,
    #[command(flatten)]
    cluster: ClusterArgs,
}

fn parse_instant(text: &str) -> Result<Timestamp, String> {
    text.parse().map_err(|e| format!("not an RFC 3339 instant such as 2026-12-01T10:00:00Z: {e}"))
}

/// Runs `forecast`: reads the snapshot and the maintenance, forecasts, prints. Exit 0.
///
/// # Errors
/// The file or the cluster cannot be read, the maintenance is not found, or the manifest is
/// not a NodeMaintenance.
pub async fn run(args: ForecastArgs) -> anyhow::Result<ExitCode> {
    let snapshot = match &args.nodes_file {
        Some(file) => StaticView::load(file).context("loading --nodes-file")?,
        None => super::cluster_snapshot(&super::client(args.cluster.clone()).await?).await?,
    };
    let maintenance: NodeMaintenance = match (&args.name, &args.file) {
        (Some(name), _) => {
            let found = snapshot.maintenances.iter().find(|m| m.metadata.name.as_deref() == Some(name.as_str()));
            let Some(found) = found else { bail!("NodeMaintenance {name:?} not found") };
            (**found).clone()
        }
        (None, Some(file)) => {
            let value = read_input(file)?;
            if value.get("kind").and_then(serde_json::Value::as_str) != Some("NodeMaintenance") {
                bail!("{}: not a NodeMaintenance (kind: NodeMaintenance)", file.display());
            }
            serde_json::from_value(value).with_context(|| format!("{}: not a valid NodeMaintenance", file.display()))?
        }
        (None, None) => bail!("give a NodeMaintenance name or -f FILE"),
    };
    let now = args.at.unwrap_or_else(Timestamp::now);
    let nodes = Nodes::new(&snapshot.nodes);
    let statuses = from_cluster::stored_statuses(&maintenance);
    let f = from_cluster::forecast_alone(
        &maintenance,
        statuses,
        &nodes,
        &snapshot.budgets,
        &snapshot.maintenances,
        args.node_duration,
        now,
    );
    match args.output {
        ForecastOutput::Text => emit(&render_text(&f)),
        ForecastOutput::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&f)?)),
        ForecastOutput::Svg => emit(&gantt::render_svg(&f)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// `Fri 2026-12-04 21:00Z`.
fn when(t: Timestamp) -> String {
    t.strftime("%a %Y-%m-%d %H:%MZ").to_string()
}

/// The group a node's line is printed under.
fn heading(n: &NodeForecast, edges: &[GateEdge]) -> String {
    match (n.state, n.start, n.window_opened) {
        (NodeState::Done, ..) => "Done".to_owned(),
        (NodeState::Started, ..) => "Started".to_owned(),
        (_, Some(_), Some(opened)) => {
            let edge = edges.iter().find(|e| e.at == opened && e.kind == EdgeKind::WindowOpens);
            edge.map_or_else(
                || format!("Window opening {}", when(opened)),
                |e| format!("Window opening {} ({}, NodeDisruptionBudget {})", when(opened), e.local, e.budget),
            )
        }
        (_, Some(_), None) => "Without waiting for a window to open".to_owned(),
        (_, None, _) if n.never.is_some() => "Never (within a year)".to_owned(),
        (_, None, _) => "Not foreseen (no basis for the releases they wait for)".to_owned(),
    }
}

fn edge_text(e: &GateEdge) -> String {
    let what = match e.kind {
        EdgeKind::WindowOpens => "window opens",
        EdgeKind::WindowCloses => "window closes",
        EdgeKind::BlackoutStarts => "blackout starts",
        EdgeKind::BlackoutEnds => "blackout ends",
    };
    let why = if e.reasons.is_empty() { String::new() } else { format!(": {}", e.reasons.join("; ")) };
    let blackout = if e.in_blackout { ", in the blackout" } else { "" };
    format!("{}  NodeDisruptionBudget {} {what} ({}{blackout}){why}", when(e.at), e.budget, e.local)
}

/// Renders a forecast for a person: the basis, one line per node grouped by the window it
/// starts in, the completion (expected and late), the window and blackout edges the timeline
/// crosses, and the assumptions.
pub fn render_text(f: &Forecast) -> String {
    let mut out = String::new();
    let pace = f.nodes_at_once.map_or_else(|| "every node at once".to_owned(), |n| format!("{n} at a time"));
    let _ = writeln!(out, "Forecast of NodeMaintenance {:?} as of {} ({pace})", f.maintenance, when(f.computed_at));
    let _ = writeln!(out, "Basis: {}", f.basis);
    let width = f.nodes.iter().map(|n| n.node.len()).max().unwrap_or(0);
    let mut group = None;
    for n in &f.nodes {
        let title = heading(n, &f.edges);
        if group.as_ref() != Some(&title) {
            let _ = writeln!(out, "{title}:");
            group = Some(title);
        }
        let show = |t: Option<Timestamp>| t.map_or_else(|| "?".to_owned(), when);
        let line = match (n.state, n.start, &n.never) {
            (NodeState::Done, _, _) => n.release.map_or_else(|| "done".to_owned(), |t| format!("done {}", when(t))),
            (_, None, Some(why)) => why.clone(),
            (_, None, None) => "waits for a release".to_owned(),
            (_, Some(start), _) => {
                let late = match (n.late_release, n.late_start) {
                    (r, s) if r == n.release && s == n.start => String::new(),
                    (r, s) if s == n.start => format!("   late -> {}", show(r)),
                    (r, s) => format!("   late {} -> {}", show(s), show(r)),
                };
                format!("{} -> {}{late}", when(start), show(n.release))
            }
        };
        let _ = writeln!(out, "  {:<width$}  {line}", n.node);
    }
    let completion = match (&f.never, f.completion_time, f.late_completion_time) {
        (Some(never), ..) => format!(
            "never: {} node{} cannot start within a year ({}): {}",
            never.nodes,
            if never.nodes == 1 { "" } else { "s" },
            never.reason,
            never.message
        ),
        (None, Some(done), Some(late)) if late != done => format!("{} (late {})", when(done), when(late)),
        (None, Some(done), _) => when(done),
        (None, None, _) => "not foreseen: no basis (give --node-duration until a node has finished)".to_owned(),
    };
    let _ = writeln!(out, "Completion: {completion}");
    if !f.edges.is_empty() {
        let _ = writeln!(out, "Crossed windows and blackouts:");
        for e in &f.edges {
            let _ = writeln!(out, "  {}", edge_text(e));
        }
    }
    if let Some(b) = f.next_blackout.as_ref().filter(|b| !f.edges.contains(b)) {
        let _ = writeln!(out, "Next blackout: {}", edge_text(b));
    }
    let _ = writeln!(out, "Assumptions:");
    for a in &f.assumptions {
        let _ = writeln!(out, "  - {a}");
    }
    out
}
