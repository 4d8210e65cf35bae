//! `watch` and `status`: a maintenance's progress for people (issue "Operator experience").
//! `watch` follows a watch of the object (not polling): progress bars on a terminal, plain
//! lines (only what changed) otherwise; `status` prints the same once.

use crate::api::{NodeMaintenance, NodePhase, Stage};
use futures::StreamExt;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::io::Write;

/// When `watch` stops by itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Until {
    /// The `Drained` condition is True.
    Drained,
    /// `Complete` is recorded in `status.stageStatuses`.
    Complete,
    /// The object is gone.
    Deleted,
}

/// Errors of `watch` and `status`.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The API call failed.
    #[error("reading NodeMaintenance {name:?}: {source}")]
    Api {
        /// The maintenance.
        name: String,
        /// The cause.
        source: kube::Error,
    },
    /// Writing to the output failed.
    #[error("writing output: {0}")]
    Io(#[from] std::io::Error),
}

/// One line about the whole maintenance: stage and since when, Drained, counts, message,
/// and how many nodes wait, are held and were released.
pub fn summary_line(nm: &NodeMaintenance) -> String {
    let name = nm.metadata.name.as_deref().unwrap_or_default();
    let status = nm.status.clone().unwrap_or_default();
    let since = status
        .stage_statuses
        .last()
        .and_then(|s| s.start_timestamp.as_ref().map(|t| format!(" ({} started {})", s.name, t.0)))
        .unwrap_or_default();
    let drained = status.conditions.iter().find(|c| c.type_ == "Drained").map_or("Unknown", |c| c.status.as_str());
    // A paused maintenance looks stuck otherwise: say so next to the stage.
    let paused = if status.conditions.iter().any(|c| c.type_ == "Paused" && c.status == "True") {
        ", paused (spec.paused)"
    } else {
        ""
    };
    let d = status.drain_status.unwrap_or_default();
    let message = d.drain_message.unwrap_or_default();
    let phases = status.node_counts.as_ref().map_or_else(String::new, |c| {
        let held = c.cordoned + c.draining + c.drained;
        format!("; {} waiting, {held} held, {} released", c.waiting, c.released)
    });
    format!(
        "{name}: stage {}{since}{paused}; Drained={drained}; nodes {}; pending {}; evicting {}; {message}",
        nm.spec.stage,
        status.selected_nodes.unwrap_or_default(),
        d.pods_pending_eviction_request,
        d.active_eviction_requests,
    )
    .trim_end_matches("; ")
    .to_owned()
        + &phases
}

/// One line per node: current drain targets, counts, message (which names blockers by
/// cause, e.g. `blocked by PDB default/web: 2 pods`) and phase (`Draining`, `Released`,
/// ...). A node that waits to be held shows only why (`Waiting for the maintenance window
/// of NodeDisruptionBudget weekend (opens ...).`, `Paused (spec.paused of NodeMaintenance m).`): it has no drain
/// to count.
pub fn node_lines(nm: &NodeMaintenance) -> BTreeMap<String, String> {
    let status = nm.status.clone().unwrap_or_default();
    status
        .node_statuses
        .iter()
        .map(|n| {
            if n.phase == Some(NodePhase::Waiting) {
                let why = n.drain_message.as_deref().unwrap_or("waiting");
                return (n.node_ref.name.clone(), format!("{why} [Waiting]"));
            }
            let targets: Vec<String> = n
                .drain_targets
                .iter()
                .map(|t| {
                    let sel = t
                        .pod_selector
                        .as_ref()
                        .map(|s| serde_json::to_string(s).unwrap_or_default())
                        .unwrap_or_default();
                    format!("{}<={}{sel}", t.pod_type, t.pod_priority)
                })
                .collect();
            let targets = if targets.is_empty() { "none".to_owned() } else { targets.join(",") };
            let phase = n.phase.map_or_else(String::new, |p| format!(" [{p:?}]"));
            let line = format!(
                "pending {}; evicting {}; targets {targets}; {}{phase}",
                n.pods_pending_eviction_request,
                n.active_eviction_requests,
                n.drain_message.as_deref().unwrap_or_default()
            );
            (n.node_ref.name.clone(), line)
        })
        .collect()
}

fn reached(nm: &NodeMaintenance, until: Until) -> bool {
    let status = nm.status.clone().unwrap_or_default();
    match until {
        Until::Drained => status.conditions.iter().any(|c| c.type_ == "Drained" && c.status == "True"),
        Until::Complete => status.stage_statuses.iter().any(|s| s.name == Stage::Complete),
        Until::Deleted => false,
    }
}

/// Writes the summary and node lines once (`status`).
///
/// # Errors
/// When the object cannot be read or the output written.
pub async fn status(client: Client, name: &str, out: &mut dyn Write) -> Result<(), WatchError> {
    let nm = Api::<NodeMaintenance>::all(client)
        .get(name)
        .await
        .map_err(|source| WatchError::Api { name: name.to_owned(), source })?;
    writeln!(out, "{}", summary_line(&nm))?;
    for (node, line) in node_lines(&nm) {
        writeln!(out, "  {node}: {line}")?;
    }
    Ok(())
}

/// How `watch` shows progress.
enum View<'a> {
    /// Plain lines, only what changed since the last print.
    Lines { out: &'a mut dyn Write, last_summary: String, last_nodes: BTreeMap<String, String> },
    /// A header and one bar per node; a bar's length is the most pods seen left on the node,
    /// its position how many of those are gone.
    Bars { multi: MultiProgress, header: ProgressBar, bars: BTreeMap<String, (ProgressBar, u64)> },
}

impl View<'_> {
    fn show(&mut self, nm: &NodeMaintenance) -> std::io::Result<()> {
        match self {
            View::Lines { out, last_summary, last_nodes } => {
                let summary = summary_line(nm);
                if summary != *last_summary {
                    writeln!(out, "{summary}")?;
                    *last_summary = summary;
                }
                for (node, line) in node_lines(nm) {
                    if last_nodes.get(&node) != Some(&line) {
                        writeln!(out, "  {node}: {line}")?;
                        last_nodes.insert(node, line);
                    }
                }
                out.flush()
            }
            View::Bars { multi, header, bars } => {
                header.set_message(summary_line(nm));
                let status = nm.status.clone().unwrap_or_default();
                for n in &status.node_statuses {
                    let left = u64::try_from(n.pods_pending_eviction_request + n.active_eviction_requests).unwrap_or(0);
                    let (bar, most) = bars.entry(n.node_ref.name.clone()).or_insert_with(|| {
                        let bar = multi.add(ProgressBar::new(0));
                        bar.set_style(
                            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} pods gone  {msg}")
                                .unwrap_or_else(|_| ProgressStyle::default_bar())
                                .progress_chars("=> "),
                        );
                        bar.set_prefix(n.node_ref.name.clone());
                        (bar, 0)
                    });
                    *most = (*most).max(left);
                    bar.set_length(*most);
                    bar.set_position(*most - left);
                    bar.set_message(n.drain_message.clone().unwrap_or_default());
                }
                Ok(())
            }
        }
    }
}

/// Follows one maintenance through a watch until `until` (or Ctrl-C / deletion when none):
/// bars on a terminal (`tty`), changed lines otherwise. Returns whether `until` was met.
///
/// # Errors
/// When the output cannot be written (watch errors are retried with backoff).
pub async fn watch(
    client: Client,
    name: &str,
    out: &mut dyn Write,
    tty: bool,
    until: Option<Until>,
) -> Result<bool, WatchError> {
    let api = Api::<NodeMaintenance>::all(client);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut view = if tty {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(
            ProgressStyle::with_template("{spinner} {msg}").unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        header.set_message(format!("waiting for NodeMaintenance {name}"));
        View::Bars { multi, header, bars: BTreeMap::new() }
    } else {
        View::Lines { out, last_summary: String::new(), last_nodes: BTreeMap::new() }
    };
    let mut seen = false;
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "watch failed; retrying");
                continue;
            }
        };
        match event {
            watcher::Event::Apply(nm) | watcher::Event::InitApply(nm) => {
                seen = true;
                view.show(&nm)?;
                if until.is_some_and(|u| reached(&nm, u)) {
                    return Ok(true);
                }
            }
            watcher::Event::Delete(_) => {
                if let View::Lines { out, .. } = &mut view {
                    writeln!(out, "{name}: deleted")?;
                }
                return Ok(until == Some(Until::Deleted) || until.is_none());
            }
            watcher::Event::InitDone if !seen && until == Some(Until::Deleted) => return Ok(true),
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests;
