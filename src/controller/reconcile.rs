//! One reconcile of one NodeMaintenance (SPEC 4): decide from the caches, then carry out
//! the decision with the smallest writes. Every step is idempotent and reads its state from
//! the API objects (node annotations, status), so a restart at any point converges.

use super::context::{Context, Result, Write, ctx_err};
use super::deadline;
use super::drain::{drain, evict_all};
use super::effects::{set_finalizer, write_status};
use super::evacuate;
use super::events::MaintenanceEvent;
use super::janitor;
use super::nodes::{cordon, mark_held, release_all, release_unheld};
use super::status::{self, record_stage, recorded};
use super::{progress, rolling};
use crate::api::node::{boot_id, held_by, is_ready, is_unschedulable};
use crate::api::{
    DONE_ANNOTATION, FINALIZER, NodeMaintenance, NodeMaintenanceNodeStatus, NodeMaintenanceStatus, NodePhase,
    ReleaseTrigger, Stage,
};
use crate::planner::DrainReason;
use crate::planner::holds::{Allotment, Wait};
use crate::selector::matching;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// Reconciles one NodeMaintenance (SPEC 4.1 to 4.3) with the hold `allotment` of the jobs
/// due together (which nodes it may hold, what waits and why: [`rolling::allotment`]).
/// Returns when to look again (`None`: at the next change only).
///
/// # Errors
/// [`super::context::ReconcileError`] naming the write that failed; the loop retries the
/// maintenance after its backoff (`schedule.rs`).
pub async fn reconcile(nm: &NodeMaintenance, ctx: &Context, allotment: &Allotment) -> Result<Option<Duration>> {
    let name = nm.name_any();
    let now = status::now();
    let recorded_stages = nm.status.as_ref().map(|s| s.stage_statuses.clone()).unwrap_or_default();
    // Deletion first: once the finalizer is gone nothing may cordon a node again (SPEC 4.2).
    // kube-runtime's `finalizer` helper is not used: it adds its finalizer to every live
    // object before the first `Apply`, and SPEC 4.2 keeps it off Idle maintenances (they hold
    // nothing, and must stay deletable while the controller is down or uninstalled). Its
    // `Cleanup` could record `Complete` as this code does; that was never the obstacle.
    if nm.metadata.deletion_timestamp.is_some() {
        if !nm.finalizers().iter().any(|f| f == FINALIZER) {
            return Ok(None);
        }
        release_all(nm, ctx, &now).await?;
        let selected = selected_nodes(nm, &ctx.nodes).len();
        let st = status::complete_status(nm.status.as_ref(), nm.metadata.generation, selected, &now);
        if ctx.writes.run(write_status(&ctx.client, nm, &st)).await.map_err(ctx_err(Write::RecordComplete))? {
            // The finalizer goes from the version that shows Complete (its removal is
            // conditional too); the status write's watch event brings it.
            return Ok(Some(FRESH_COPY_REQUEUE));
        }
        ctx.writes.run(set_finalizer(&ctx.client, nm, false)).await.map_err(ctx_err(Write::RemoveFinalizer))?;
        janitor::forget(ctx, &name);
        tracing::info!(maintenance = %name, "maintenance deleted; nodes released");
        return Ok(None);
    }
    let selected = selected_nodes(nm, &ctx.nodes);
    if nm.spec.stage == Stage::Complete {
        if ctx.writes.run(set_finalizer(&ctx.client, nm, true)).await.map_err(ctx_err(Write::AddFinalizer))? {
            return Ok(Some(FRESH_COPY_REQUEUE));
        }
        release_all(nm, ctx, &now).await?;
        let st = status::complete_status(nm.status.as_ref(), nm.metadata.generation, selected.len(), &now);
        ctx.writes.run(write_status(&ctx.client, nm, &st)).await.map_err(ctx_err(Write::Status))?;
        return Ok(Some(ctx.options.idle_requeue));
    }
    let mut st = NodeMaintenanceStatus {
        observed_generation: nm.metadata.generation,
        stage_statuses: recorded_stages.clone(),
        selected_nodes: Some(i32::try_from(selected.len()).unwrap_or(i32::MAX)),
        ..Default::default()
    };
    let previous_drained = nm.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == status::DRAINED));
    let mut requeue = ctx.options.idle_requeue;
    let mut plan = None;
    let mut in_the_way = None;
    let mut evictions = Vec::new();
    let mut evacuation = evacuate::EvacuationPlan::default();
    // Nodes this maintenance may keep holding once this status is written (a node released
    // by its done signal is given back right after the status says so).
    let mut keep = None;
    // Nodes whose evictions a gate holds, and what the drain waits for when every node left
    // waits for a gate.
    let mut gated = BTreeMap::new();
    let mut gate_waits = None;
    // A window or blackout edge ahead, after which its nodes may start (or must wait).
    let mut edge = None;
    // The end of a wait for pods left to finish, after which they may have to be evicted.
    let mut wait_deadline = None;
    if nm.spec.stage.is_active() {
        if ctx.writes.run(set_finalizer(&ctx.client, nm, true)).await.map_err(ctx_err(Write::AddFinalizer))? {
            return Ok(Some(FRESH_COPY_REQUEUE));
        }
        // Which nodes this maintenance may hold now (rolling, NodeDisruptionBudgets);
        // without maxUnavailable or budgets, every selected node.
        edge = rolling::until_next_edge(allotment);
        let mine = allotment.maintenances.get(&name).cloned().unwrap_or_default();
        release_unheld(nm, ctx, &mine.hold, &now).await?;
        let hold: Vec<Arc<Node>> = selected.iter().filter(|n| mine.hold.contains(&n.name_any())).cloned().collect();
        cordon(nm, ctx, &hold).await?;
        st.stage_statuses = record_stage(&st.stage_statuses, Stage::Cordon, &now);
        let is_cordoned = |n: &Node| held_by(n, &name) && is_unschedulable(n);
        let cordoned = hold.iter().all(|n| is_cordoned(n)) && (!hold.is_empty() || mine.waiting.is_empty());
        let draining = nm.spec.stage == Stage::Drain
            && (recorded(&recorded_stages, Stage::Drain) || (cordoned && recorded(&recorded_stages, Stage::Cordon)));
        let mut planned = BTreeMap::new();
        if draining {
            st.stage_statuses = record_stage(&st.stage_statuses, Stage::Drain, &now);
            let outcome = drain(nm, ctx, &hold, &allotment.node_gates, &now).await?;
            planned = outcome.node_statuses;
            in_the_way = outcome.in_the_way;
            evictions = outcome.evictions;
            evacuation = outcome.evacuation;
            wait_deadline = outcome.wait_deadline;
            st.evacuations = evacuation.statuses.clone();
            plan = outcome.decision.maintenance(&name).cloned();
            gated = outcome.gated;
        } else {
            mark_held(nm, ctx, &hold, &now).await?;
        }
        let mode = progress::Mode {
            maintenance: &name,
            draining,
            rolling: nm.spec.max_unavailable.is_some(),
            reboot_releases: nm.spec.release_nodes_on == Some(ReleaseTrigger::Reboot),
        };
        let stored = nm.status.as_ref().map(|s| s.node_statuses.as_slice()).unwrap_or_default();
        st.node_statuses = selected
            .iter()
            .map(|n| {
                let node = n.name_any();
                let facts = progress::NodeFacts {
                    name: &node,
                    wait: mine.waiting.get(&node),
                    cordoned: mine.hold.contains(&node) && is_cordoned(n),
                    planned: planned.remove(&node),
                    done: n.annotations().get(DONE_ANNOTATION).map(String::as_str),
                    boot_id: boot_id(n),
                    ready: is_ready(n),
                    stored: stored.iter().find(|s| s.node_ref.name == node),
                };
                progress::node_entry(mode, &facts)
            })
            .collect();
        st.node_counts = Some(progress::counts(&st.node_statuses));
        let released_now: BTreeSet<&str> = st
            .node_statuses
            .iter()
            .filter(|s| s.phase == Some(NodePhase::Released) && mine.hold.contains(&s.node_ref.name))
            .map(|s| s.node_ref.name.as_str())
            .collect();
        if !released_now.is_empty() {
            keep = Some(mine.hold.iter().filter(|n| !released_now.contains(n.as_str())).cloned().collect());
        }
        let finished =
            st.node_statuses.iter().all(|s| matches!(s.phase, Some(NodePhase::Drained | NodePhase::Released)));
        // Pods left to finish end by themselves (a Pod event) or at the wait's deadline (the
        // requeue below): with every node draining or done, nothing to look at before either.
        let waits_only = plan.as_ref().is_some_and(|p| p.reason == DrainReason::WaitingForCompletion)
            && st
                .node_statuses
                .iter()
                .all(|s| matches!(s.phase, Some(NodePhase::Draining | NodePhase::Drained | NodePhase::Released)));
        requeue =
            if (finished || waits_only) && draining { ctx.options.idle_requeue } else { ctx.options.busy_requeue };
        if let Some(p) = plan.as_mut() {
            // Drained over every selected node: released ones count as done, waiting ones not.
            p.drained = finished;
        }
        gate_waits = gate_waits_of(&st.node_statuses, &mine.waiting, &gated);
        // The stall clock starts again when a wait (for pods to finish, for a gate) ends.
        let stored = nm.status.as_ref().and_then(|s| s.drain_status.as_ref());
        let resumed = status::waits(previous_drained)
            && gate_waits.is_none()
            && plan.as_ref().is_some_and(|p| p.reason != DrainReason::WaitingForCompletion);
        st.drain_status = plan.as_ref().map(|p| status::drain_status(p, stored, resumed, &now));
        if nm.spec.stage == Stage::Cordon && mine.waiting.is_empty() && cordoned {
            requeue = ctx.options.idle_requeue;
        }
    }
    st.conditions = vec![status::drained_condition(
        previous_drained,
        nm.spec.stage,
        plan.as_ref(),
        in_the_way.as_deref(),
        gate_waits.as_deref(),
        nm.metadata.generation,
        &now,
    )];
    tracing::debug!(maintenance = %name, counts = ?st.node_counts, "reconciled");
    let previous_released =
        nm.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == status::NODES_RELEASED));
    if nm.spec.max_unavailable.is_some() && nm.spec.stage.is_active() {
        st.conditions.push(status::released_condition(
            previous_released,
            st.node_counts.as_ref(),
            nm.metadata.generation,
            &now,
        ));
    }
    let previous_paused = nm.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == status::PAUSED));
    st.conditions.extend(status::paused_condition(nm, previous_paused, &now));
    if nm.spec.stage == Stage::Drain {
        requeue = deadline::report(&nm.spec, &mut st, &now, requeue);
    }
    if let Some(edge) = edge {
        requeue = requeue.min(edge);
    }
    if let Some(at) = wait_deadline {
        requeue = requeue.min(deadline::until(at));
    }
    if plan.as_ref().is_some_and(|p| p.drained) && previous_drained.is_none_or(|c| c.status != "True") {
        ctx.event(nm, MaintenanceEvent::drained(selected.len())).await;
    }
    ctx.writes.run(write_status(&ctx.client, nm, &st)).await.map_err(ctx_err(Write::Status))?;
    if let Some(keep) = &keep {
        // Recorded as released: give them back now (a crash before this leaves them held,
        // and the next reconcile releases them, since the stored status says so).
        release_unheld(nm, ctx, keep, &now).await?;
    }
    if let Some(c) = st.conditions.iter().find(|c| c.type_ == status::NODES_RELEASED && c.status == "True")
        && previous_released.is_none_or(|p| p.status != "True")
    {
        ctx.event(nm, MaintenanceEvent::all_nodes_released(&c.message)).await;
    }
    // After the write: a failed write reports the timeout again on the next try.
    if let Some(c) = st.conditions.first().filter(|c| deadline::newly_timed_out(previous_drained, Some(c))) {
        ctx.metrics.drain_timeouts.inc();
        ctx.event(nm, MaintenanceEvent::drain_timed_out(&c.message)).await;
    }
    let stored_evacuations = nm.status.as_ref().map(|s| s.evacuations.as_slice()).unwrap_or_default();
    evacuate::carry_out(nm, ctx, &evacuation, stored_evacuations, &now).await;
    if evict_all(nm, ctx, &evictions).await {
        // More are due: the next round right away (the status of this one is out).
        return Ok(Some(MORE_EVICTIONS_REQUEUE));
    }
    Ok(Some(requeue))
}
/// Requeue after a write to the maintenance itself (finalizer, Complete status): the next
/// writes are conditional on its resourceVersion, so they wait for the fresh copy that the
/// write's own watch event brings (usually first; this is the safety net).
const FRESH_COPY_REQUEUE: Duration = Duration::from_millis(200);

/// Requeue when a Drain reconcile left due evictions for the next round.
const MORE_EVICTIONS_REQUEUE: Duration = Duration::from_millis(100);

/// What a drain waits for when every selected node not yet drained or released waits for
/// a gate of its NodeDisruptionBudget or a pause (SPEC 4.6): not held for that reason
/// (`waiting`), or held and kept from evicting (`gated`). `None` when some node waits for
/// something else, or none waits: then the drain may be stalled.
fn gate_waits_of(
    statuses: &[NodeMaintenanceNodeStatus],
    waiting: &BTreeMap<String, Wait>,
    gated: &BTreeMap<String, String>,
) -> Option<String> {
    let mut why = BTreeSet::new();
    for s in statuses.iter().filter(|s| !matches!(s.phase, Some(NodePhase::Drained | NodePhase::Released))) {
        let name = &s.node_ref.name;
        match (waiting.get(name), gated.get(name)) {
            (Some(w @ (Wait::Gate { .. } | Wait::Paused)), _) => why.insert(w.to_string()),
            (None, Some(message)) => why.insert(message.clone()),
            _ => return None,
        };
    }
    (!why.is_empty()).then(|| why.into_iter().collect::<Vec<_>>().join(" "))
}

/// Nodes the maintenance's selector matches now (an invalid selector matches none).
pub(super) fn selected_nodes(nm: &NodeMaintenance, nodes: &Store<Node>) -> Vec<Arc<Node>> {
    matching(&nm.spec.node_selector, &nodes.state())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{GateReason, NodeRef};
    use crate::planner::gates::GateClosure;

    fn node(name: &str, phase: NodePhase) -> NodeMaintenanceNodeStatus {
        NodeMaintenanceNodeStatus { node_ref: NodeRef { name: name.into() }, phase: Some(phase), ..Default::default() }
    }

    #[test]
    fn a_drain_waits_for_gates_only_when_every_node_left_does() {
        let window = Wait::Gate {
            name: "w".into(),
            closed: vec![GateClosure { reason: GateReason::OutsideMaintenanceWindow, message: "Window shut".into() }],
        };
        let waiting = BTreeMap::from([("a".to_owned(), window), ("b".to_owned(), Wait::Turn { held: 1, limit: 1 })]);
        let gated = BTreeMap::from([("c".to_owned(), "Paused (spec.paused of NodeMaintenance m).".to_owned())]);
        let done = node("d", NodePhase::Released);
        let statuses = [node("a", NodePhase::Waiting), node("c", NodePhase::Draining), done.clone()];
        assert_eq!(
            gate_waits_of(&statuses, &waiting, &gated).as_deref(),
            Some("Paused (spec.paused of NodeMaintenance m). Window shut.")
        );
        let turn = [node("a", NodePhase::Waiting), node("b", NodePhase::Waiting)];
        assert_eq!(gate_waits_of(&turn, &waiting, &gated), None, "a wait for a place may be a stall");
        let draining = [node("a", NodePhase::Waiting), node("e", NodePhase::Draining)];
        assert_eq!(gate_waits_of(&draining, &waiting, &gated), None, "a draining node may be stalled");
        assert_eq!(gate_waits_of(&[done], &waiting, &gated), None, "nothing waits");
    }
}
