//! Node state, the controller's side (SPEC 4.1-4.3): holding and releasing nodes (cordon
//! with the holders annotation, uncordon when the last live holder leaves) and the Node
//! conditions (`MaintenanceInProgress=True` on nodes held without being drained; the
//! drainer sets Draining/Drained). Every write is skipped when the node already shows its
//! result. The pure decisions are in [`holders`] (what to change) and [`conditions`] (which
//! conditions); what is recorded on a Node is read back by [`crate::api::node`].

pub mod conditions;
pub mod holders;

use super::context::{Context, Result, Write, ctx_err};
use super::effects::{self, apply_node_change, set_draining_taint};
use super::events::MaintenanceEvent;
use super::eviction_requests::withdraw_on_node;
use super::status::recorded;
use crate::api::node::{Holders, held_by, is_unschedulable};
use crate::api::{NodeMaintenance, Stage};
use conditions::NodePhase;
use holders::{NodeChange, hold, release};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::BTreeSet;
use std::sync::Arc;

/// Whether maintenance `name` currently holds nodes by its own stage: exists, not being
/// deleted, and in Cordon or Drain.
fn is_live(store: &Store<NodeMaintenance>, name: &str) -> bool {
    store.state().iter().any(|m| m.name_any() == name && m.is_active())
}

/// SPEC 4.1 Cordon: hold and cordon every selected node, concurrently within
/// `--max-concurrent-writes`; an uncordon race gets an Event.
///
/// # Errors
/// The first node write that failed (the other nodes are still cordoned).
pub(super) async fn cordon(nm: &NodeMaintenance, ctx: &Context, selected: &[Arc<Node>]) -> Result<()> {
    let name = nm.name_any();
    let changes = selected.iter().filter_map(|node| hold(node, &name).map(|change| (node, change)));
    first_error(ctx.writes.each(changes, |(node, change)| cordon_node(nm, ctx, node, change)).await)
}

async fn cordon_node(nm: &NodeMaintenance, ctx: &Context, node: &Node, change: NodeChange) -> Result<()> {
    let name = nm.name_any();
    let node_name = node.name_any();
    ctx.writes
        .run(apply_node_change(&ctx.client, node, &change))
        .await
        .map_err(ctx_err(Write::Cordon(node_name.clone())))?;
    ctx.holds_in_flight.add(&node_name, &name);
    if change.recordoned {
        ctx.event(nm, MaintenanceEvent::recordoned(node, &name)).await;
    } else if !is_unschedulable(node) {
        ctx.event(nm, MaintenanceEvent::cordoned(node)).await;
    }
    Ok(())
}

/// The first error of several concurrent steps, after all of them ran.
fn first_error(results: Vec<Result<()>>) -> Result<()> {
    results.into_iter().collect()
}

/// Releases the nodes this maintenance holds but may no longer: nodes it no
/// longer selects (their labels changed) and nodes of a rolling maintenance whose work was
/// signalled done (released in its status). `keep` are the nodes it may hold.
pub(super) async fn release_unheld(
    nm: &NodeMaintenance,
    ctx: &Context,
    keep: &BTreeSet<String>,
    now: &Time,
) -> Result<()> {
    let name = nm.name_any();
    let nodes = ctx.nodes.state();
    let gone = nodes.iter().filter(|n| held_by(n, &name) && !keep.contains(&n.name_any()));
    first_error(ctx.writes.each(gone, |node| release_node(nm, ctx, node, now)).await)
}

/// SPEC 4.1 Complete and 4.2 deletion: releases every node this maintenance holds (found by
/// the node annotations, so nodes that left the selection are released too and nodes that
/// no longer exist are simply done).
pub(super) async fn release_all(nm: &NodeMaintenance, ctx: &Context, now: &Time) -> Result<()> {
    let name = nm.name_any();
    let nodes = ctx.nodes.state();
    let held = nodes.iter().filter(|n| held_by(n, &name));
    first_error(ctx.writes.each(held, |node| release_node(nm, ctx, node, now)).await)
}

async fn release_node(nm: &NodeMaintenance, ctx: &Context, node: &Node, now: &Time) -> Result<()> {
    let name = nm.name_any();
    let node_name = node.name_any();
    let live = |m: &str| is_live(&ctx.maintenances, m);
    let Some(change) = release(node, &name, live) else { return Ok(()) };
    let drainers_left = change.holders.as_ref().is_some_and(|h| {
        let all = ctx.maintenances.state();
        h.maintenances.iter().any(|m| all.iter().any(|o| &o.name_any() == m && o.is_draining()))
    });
    // Taint first: a crash after it leaves the node held (and retried), never a stray taint.
    let mut current = node.clone();
    if !drainers_left
        && let Some(updated) = ctx
            .writes
            .run(set_draining_taint(&ctx.client, node, false))
            .await
            .map_err(ctx_err(Write::Untaint(node_name.clone())))?
    {
        current = updated;
    }
    if !drainers_left {
        withdraw_on_node(ctx, &node_name).await.map_err(ctx_err(Write::WithdrawEvictionRequests(node_name.clone())))?;
    }
    let change = release(&current, &name, live).unwrap_or(change);
    // The last holder going: conditions False first, then the release patch (which also
    // removes the status annotation). A crash in between leaves the node held, so a later
    // reconcile releases it again; never a released node with our traces on it.
    let last = change.holders.is_none();
    if last && !conditions::has_no_conditions_of_ours(node) {
        set_conditions(ctx, node, NodePhase::Released, now).await?;
    }
    ctx.writes
        .run(apply_node_change(&ctx.client, &current, &change))
        .await
        .map_err(ctx_err(Write::Release(node_name.clone())))?;
    if last && is_unschedulable(&current) && !change.unschedulable {
        ctx.event(nm, MaintenanceEvent::uncordoned(node)).await;
    }
    Ok(())
}

/// Whether some holder of `holders` has `Drain` recorded in its `status.stageStatuses`: then
/// that drainer owns the node's conditions (Draining/Drained), not the Held rule.
fn has_drainer(holders: &Holders, maintenances: &[Arc<NodeMaintenance>]) -> bool {
    maintenances.iter().any(|m| {
        holders.maintenances.contains(&m.name_any())
            && m.status.as_ref().is_some_and(|s| recorded(&s.stage_statuses, Stage::Drain))
    })
}

/// SPEC 4.3 (KEP-5683 conditions) for nodes held but not drained (Cordon, or Drain still
/// waiting for the cordon): `MaintenanceInProgress=True` (reason `AdminRequested`) on every
/// selected node this maintenance holds, unless one of the node's holders has `Drain`
/// recorded (the drainer sets Draining/Drained). The rule depends only on the node and the
/// recorded stages, so maintenances sharing a node agree and never flap the conditions.
/// Writes only conditions that are not already current.
pub(super) async fn mark_held(nm: &NodeMaintenance, ctx: &Context, selected: &[Arc<Node>], now: &Time) -> Result<()> {
    let name = nm.name_any();
    let maintenances = ctx.maintenances.state();
    let held = selected.iter().filter(|node| {
        Holders::of(node).is_some_and(|h| h.maintenances.contains(&name) && !has_drainer(&h, &maintenances))
    });
    first_error(ctx.writes.each(held, |node| set_conditions(ctx, node, NodePhase::Held, now)).await)
}

/// Sets the node's KEP-5683 conditions for `phase` (their messages name the maintenances of
/// its holders annotation), unless it already shows them.
///
/// # Errors
/// [`super::context::ReconcileError`] when the status write fails.
pub(super) async fn set_conditions(ctx: &Context, node: &Node, phase: NodePhase, now: &Time) -> Result<()> {
    let holders =
        Holders::of(node).map(|h| h.maintenances.into_iter().collect::<Vec<_>>().join(", ")).unwrap_or_default();
    let wanted = conditions::conditions(node, phase, &holders, now);
    if conditions::conditions_current(node, &wanted) {
        return Ok(());
    }
    let node_name = node.name_any();
    ctx.writes
        .run(effects::set_node_conditions(&ctx.client, &node_name, &wanted))
        .await
        .map_err(ctx_err(Write::NodeConditions(node_name.clone())))
}
