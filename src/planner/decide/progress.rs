//! Where each selected node of a maintenance stands: its `nodeStatuses` entry
//! with a phase, the release of a rolling maintenance's node when its work is signalled
//! done, the times its part began and ended (what the forecast's basis measures, SPEC 4.7),
//! and the counts. Pure functions over what the decision observed.

use super::status::idle_node_status;
use crate::api::{NodeCounts, NodeMaintenanceNodeStatus, NodePhase};
use crate::planner::holds::{ReleaseCause, ReleaseInput, Wait, release_cause};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// What the decision observed of one selected node.
#[derive(Clone, Debug, Default)]
pub struct NodeFacts<'a> {
    /// The node's name.
    pub name: &'a str,
    /// Why it is not held, when it waits.
    pub wait: Option<&'a Wait>,
    /// Whether this maintenance holds it and it is observed unschedulable.
    pub cordoned: bool,
    /// Its entry from the drain planner (Drain stage, node planned), and whether it is drained.
    pub planned: Option<(NodeMaintenanceNodeStatus, bool)>,
    /// Its `nodemaintenance.k8s.io/done` annotation.
    pub done: Option<&'a str>,
    /// Its boot ID now.
    pub boot_id: Option<&'a str>,
    /// Whether it is Ready.
    pub ready: bool,
    /// Its entry in the stored status.
    pub stored: Option<&'a NodeMaintenanceNodeStatus>,
}

/// How the maintenance works its nodes.
#[derive(Clone, Copy, Debug)]
pub struct Mode<'a> {
    /// The maintenance's name (what the done annotation must name).
    pub maintenance: &'a str,
    /// Whether the Drain stage is recorded (its nodes are drained, not only cordoned).
    pub draining: bool,
    /// Rolling (`spec.maxUnavailable` set): nodes are released when their work is done.
    pub rolling: bool,
    /// `releaseNodesOn: Reboot`.
    pub reboot_releases: bool,
    /// The decision's now: the `heldTime` of a node found held for the first time, the
    /// `finishedTime` of one whose part is done now.
    pub now: &'a Time,
}

/// The node's entry. A node released before stays released; a held node at the end of the
/// stage whose done signal came (rolling) becomes Released now: the decision after the
/// status is written gives it back (so a crash in between leaves it held, never lost).
/// A held node keeps the `heldTime` of the decision that first found it held; its
/// `finishedTime` is the release, or for a group maintenance since when it is drained.
pub fn node_entry(mode: Mode<'_>, f: NodeFacts<'_>) -> NodeMaintenanceNodeStatus {
    if let Some(stored) = f.stored.filter(|s| s.phase == Some(NodePhase::Released)) {
        return stored.clone();
    }
    if let Some(wait) = f.wait {
        let mut message = wait.to_string();
        if f.done == Some(mode.maintenance) {
            message.push_str(" Its done annotation is ignored: this maintenance does not hold the node.");
        }
        return entry(f.name, NodePhase::Waiting, &message);
    }
    let (mut status, phase, at_end) = match (f.planned, f.cordoned) {
        (Some((planned, drained)), _) => {
            let phase = if drained { NodePhase::Drained } else { NodePhase::Draining };
            (planned, phase, drained)
        }
        (None, true) => (entry(f.name, NodePhase::Cordoned, "Cordoned."), NodePhase::Cordoned, !mode.draining),
        (None, false) => (entry(f.name, NodePhase::Cordoning, "Cordoning."), NodePhase::Cordoning, false),
    };
    status.phase = Some(phase);
    let stored_held = f.stored.filter(|s| s.phase != Some(NodePhase::Waiting)).and_then(|s| s.held_time.clone());
    status.held_time = Some(stored_held.unwrap_or_else(|| mode.now.clone()));
    if !mode.rolling {
        if phase == NodePhase::Drained {
            let since = f.stored.filter(|s| s.phase == Some(NodePhase::Drained)).and_then(|s| s.finished_time.clone());
            status.finished_time = Some(since.unwrap_or_else(|| mode.now.clone()));
        }
        return status;
    }
    let stored_boot = f.stored.and_then(|s| s.boot_id.as_deref());
    if mode.reboot_releases {
        status.boot_id = stored_boot.or(f.boot_id.filter(|_| at_end)).map(str::to_owned);
    }
    let input = ReleaseInput {
        at_end,
        done: f.done,
        reboot_releases: mode.reboot_releases,
        recorded_boot_id: stored_boot,
        boot_id: f.boot_id,
        ready: f.ready,
    };
    match release_cause(mode.maintenance, &input) {
        Some(cause) => {
            let why = match cause {
                ReleaseCause::DoneAnnotation => "Released: its done annotation names this maintenance.",
                ReleaseCause::Reboot => "Released: it rebooted (new boot ID) and is Ready.",
            };
            NodeMaintenanceNodeStatus {
                held_time: status.held_time,
                finished_time: Some(mode.now.clone()),
                ..entry(f.name, NodePhase::Released, why)
            }
        }
        None => status,
    }
}

fn entry(name: &str, phase: NodePhase, message: &str) -> NodeMaintenanceNodeStatus {
    NodeMaintenanceNodeStatus { phase: Some(phase), ..idle_node_status(name, message) }
}

/// How many of `entries` are in each phase.
pub fn counts(entries: &[NodeMaintenanceNodeStatus]) -> NodeCounts {
    let mut c = NodeCounts::default();
    for e in entries {
        let slot = match e.phase {
            Some(NodePhase::Waiting) => &mut c.waiting,
            Some(NodePhase::Cordoning | NodePhase::Cordoned) | None => &mut c.cordoned,
            Some(NodePhase::Draining) => &mut c.draining,
            Some(NodePhase::Drained) => &mut c.drained,
            Some(NodePhase::Released) => &mut c.released,
        };
        *slot += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROLLING: Mode<'static> = Mode {
        maintenance: "m",
        draining: true,
        rolling: true,
        reboot_releases: true,
        now: &Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    };

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    fn planned(drained: bool) -> Option<(NodeMaintenanceNodeStatus, bool)> {
        Some((idle_node_status("n", if drained { "Drained." } else { "Draining" }), drained))
    }

    #[test]
    fn a_drained_node_is_released_by_its_done_annotation_only() {
        let f = NodeFacts { name: "n", cordoned: true, planned: planned(true), done: Some("m"), ..Default::default() };
        assert_eq!(node_entry(ROLLING, f.clone()).phase, Some(NodePhase::Released));
        let early = NodeFacts { planned: planned(false), ..f.clone() };
        assert_eq!(node_entry(ROLLING, early).phase, Some(NodePhase::Draining), "not before it is drained");
        let other = NodeFacts { done: Some("x"), ..f.clone() };
        assert_eq!(node_entry(ROLLING, other).phase, Some(NodePhase::Drained));
        let group = Mode { rolling: false, ..ROLLING };
        assert_eq!(node_entry(group, f).phase, Some(NodePhase::Drained), "group maintenances release at Complete");
    }

    #[test]
    fn a_reboot_after_the_drain_releases_once_ready() {
        let drained = NodeFacts {
            name: "n",
            cordoned: true,
            planned: planned(true),
            boot_id: Some("a"),
            ready: true,
            ..Default::default()
        };
        let first = node_entry(ROLLING, drained.clone());
        assert_eq!((first.phase, first.boot_id.as_deref()), (Some(NodePhase::Drained), Some("a")), "boot ID recorded");
        let rebooting = NodeFacts { boot_id: Some("b"), ready: false, stored: Some(&first), ..drained.clone() };
        assert_eq!(node_entry(ROLLING, rebooting.clone()).phase, Some(NodePhase::Drained));
        let back = NodeFacts { ready: true, ..rebooting.clone() };
        let released = node_entry(ROLLING, back);
        assert_eq!(released.phase, Some(NodePhase::Released));
        let later = NodeFacts { stored: Some(&released), ..NodeFacts::default() };
        assert_eq!(node_entry(ROLLING, later), released, "released stays released");
    }

    #[test]
    fn waiting_nodes_say_why_and_counts_add_up() {
        let wait = Wait::Turn { held: 1, limit: 1 };
        let f = NodeFacts { name: "n", wait: Some(&wait), done: Some("m"), ..Default::default() };
        let e = node_entry(ROLLING, f.clone());
        assert_eq!(e.phase, Some(NodePhase::Waiting));
        assert!(e.drain_message.unwrap().contains("done annotation is ignored"));
        let cordon = Mode { draining: false, ..ROLLING };
        let held = NodeFacts { name: "h", cordoned: true, done: Some("m"), ..Default::default() };
        let entries = vec![node_entry(ROLLING, f), node_entry(cordon, held)];
        assert_eq!(entries[1].phase, Some(NodePhase::Released), "Cordon stage ends at the cordon");
        assert_eq!(counts(&entries), NodeCounts { waiting: 1, released: 1, ..Default::default() });
    }

    /// SPEC 4.7's basis: a node's time under the maintenance runs from the decision that
    /// first found it held to its release (rolling) or, for a group maintenance, since when
    /// it is drained; both are kept from the stored status, so a steady state writes nothing.
    #[test]
    fn held_and_finished_times_are_recorded_once() {
        let (t0, t1, t2) = (t("2026-12-04T22:00:00Z"), t("2026-12-04T22:30:00Z"), t("2026-12-04T23:10:00Z"));
        let at = |now| Mode { now, ..ROLLING };
        let draining = NodeFacts { name: "n", cordoned: true, planned: planned(false), ..Default::default() };
        let first = node_entry(at(&t0), draining.clone());
        assert_eq!((first.held_time.as_ref(), first.finished_time.as_ref()), (Some(&t0), None));
        let again = node_entry(at(&t1), NodeFacts { stored: Some(&first), ..draining.clone() });
        assert_eq!(again, first, "nothing moves while it drains");
        let done = NodeFacts { planned: planned(true), done: Some("m"), stored: Some(&again), ..draining.clone() };
        let released = node_entry(at(&t2), done);
        assert_eq!(released.phase, Some(NodePhase::Released));
        assert_eq!((released.held_time.as_ref(), released.finished_time.as_ref()), (Some(&t0), Some(&t2)));

        let group = |now| Mode { rolling: false, now, ..ROLLING };
        let drained = NodeFacts { planned: planned(true), stored: Some(&first), ..draining.clone() };
        let d1 = node_entry(group(&t1), drained.clone());
        assert_eq!((d1.held_time.as_ref(), d1.finished_time.as_ref()), (Some(&t0), Some(&t1)));
        let d2 = node_entry(group(&t2), NodeFacts { stored: Some(&d1), ..drained.clone() });
        assert_eq!(d2, d1, "drained since t1");
        let back = node_entry(group(&t2), NodeFacts { planned: planned(false), stored: Some(&d1), ..drained });
        assert_eq!(back.finished_time, None, "draining again: not finished");

        let wait = Wait::Turn { held: 1, limit: 1 };
        let waiting = node_entry(at(&t2), NodeFacts { name: "n", wait: Some(&wait), ..Default::default() });
        assert_eq!(waiting.held_time, None);
    }
}
