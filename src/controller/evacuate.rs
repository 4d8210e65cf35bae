//! Evacuation by rollout (KEP-4212 Story 2): a pod whose eviction would be
//! downtime (its Deployment has one replica) or would wait forever (its PodDisruptionBudget
//! allows no disruption even with every pod healthy) is moved by its Deployment's own
//! rollout, started as `kubectl rollout restart` does: new pods surge onto schedulable nodes
//! (the maintained ones are cordoned) and the Deployment removes the old ones once the new
//! are available. Nothing is forced: a rollout that fails is reported and the drain waits.
//!
//! At most one rollout per Deployment and maintenance: the pod-template annotation that
//! starts it names the maintenance and its uid ([`EVACUATED_FOR_ANNOTATION`]), so the fact
//! survives a restart of the controller, and the patch is conditional on the
//! resourceVersion the decision read. The decision itself is pure ([`crate::planner::evacuation`]); what
//! the controller keeps between decisions is the [`super::evacuation_memory::EvacuationMemory`].

use super::context::Context;
use super::memory::locked;
use crate::api::{EVACUATED_AT_ANNOTATION, EvacuationStatus, NodeMaintenance, RolloutState};
use crate::cluster::deployments::{WorkloadCaches, replica_set};
use crate::cluster::writes::start_rollout;
use crate::planner::DrainDecision;
use crate::planner::decide::events::MaintenanceEvent;
use crate::planner::evacuation::{
    EvacuationPlan, Facts, Rollout, Verdict, Workload, decide, rolled_for, rollout_state,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use std::collections::HashSet;
use std::sync::Arc;

/// `<name>/<uid>`: how the pod-template annotation names a maintenance.
fn maintenance_key(nm: &NodeMaintenance) -> String {
    format!("{}/{}", nm.name_any(), nm.metadata.uid.as_deref().unwrap_or_default())
}

/// Decides, for every pod the planning pass would evict from this maintenance's `selected`
/// nodes, whether a rollout moves it instead ([`decide`]), from the caches only.
/// Returns the plan; [`carry_out`] starts its rollouts once the status is published.
pub fn plan(nm: &NodeMaintenance, ctx: &Context, decision: &DrainDecision, selected: &[Arc<Node>]) -> EvacuationPlan {
    let ev = &ctx.evacuator;
    let key = maintenance_key(nm);
    let nm_uid = nm.metadata.uid.clone().unwrap_or_default();
    let mode = nm.spec.evacuation.unwrap_or(ctx.options.evacuation);
    let mut plan = EvacuationPlan { statuses: statuses(&ev.caches, &key), ..Default::default() };
    let mut rolled = HashSet::new();
    for node in selected {
        let node_name = node.name_any();
        let Some(np) = decision.node(&node_name) else { continue };
        for pod in &np.evict {
            let owner = ctx.pods.owner(&pod.namespace, &pod.name);
            let deployment = owner.as_ref().and_then(|o| deployment_of(&ev.caches, &pod.namespace, o));
            let workload = match (&owner, &deployment) {
                (_, Some((d, _))) => Workload::Deployment(d),
                (Some(o), None) if o.kind.is_some() => {
                    Workload::Other(o.kind.as_deref().unwrap_or_default(), o.name.as_deref().unwrap_or_default())
                }
                _ => Workload::Bare,
            };
            let refused_by = ctx
                .evictions
                .refused_by_pdb(&pod.uid)
                .and_then(|pdb| ev.caches.pdbs.get(&ObjectRef::new(&pdb).within(&pod.namespace)));
            let d_uid = deployment.as_ref().and_then(|(d, _)| d.metadata.uid.clone()).unwrap_or_default();
            let started_here = locked(&ev.started).contains(&(nm_uid.clone(), d_uid.clone()));
            let facts = Facts { mode, maintenance: &key, workload, refused_by: refused_by.as_deref(), started_here };
            let verdict = decide(&facts, || {
                let (d, _) = deployment.as_ref()?;
                opted_out_pod(ctx, &pod.namespace, &d.name_any())
            });
            let named = || deployment.as_ref().map(|(d, _)| format!("{}/{}", pod.namespace, d.name_any()));
            match verdict {
                Verdict::Evict => {}
                Verdict::NotEvacuated(why) => {
                    let note = format!("not evacuated by rollout: {}/{} ({why})", pod.namespace, pod.name);
                    plan.not_evacuated.push((node.clone(), note.clone()));
                    plan.say(&node_name, note);
                }
                Verdict::Roll(need) => {
                    plan.withheld.insert(pod.uid.clone());
                    let name = named().unwrap_or_default();
                    plan.say(&node_name, format!("starting a rollout of Deployment {name} ({need})"));
                    if let Some((d, rs)) = deployment.as_ref().filter(|_| rolled.insert(d_uid.clone())) {
                        let (deployment, replica_set) = (d.clone(), rs.clone());
                        plan.rollouts.push(Rollout {
                            deployment,
                            replica_set,
                            pod: pod.clone(),
                            node: node.clone(),
                            need,
                        });
                    }
                }
                Verdict::Wait(state, words) => {
                    plan.withheld.insert(pod.uid.clone());
                    let name = named().unwrap_or_default();
                    let note = match state {
                        RolloutState::RolloutFailed => format!("rollout of Deployment {name} failed: {words}"),
                        _ => format!("evacuating by rollout of Deployment {name}: {words}"),
                    };
                    plan.say(&node_name, note);
                }
            }
        }
    }
    plan
}

/// The pod's Deployment from the caches, with the pod's ReplicaSet name: a pod of
/// ReplicaSet `<deployment>-<pod-template-hash>` (how the Deployment controller names them),
/// when that Deployment exists. Checked against the ReplicaSet's ownerReference before a
/// rollout starts.
fn deployment_of(
    caches: &WorkloadCaches,
    namespace: &str,
    owner: &crate::cluster::pods::PodOwner,
) -> Option<(Arc<Deployment>, String)> {
    if owner.kind.as_deref() != Some("ReplicaSet") {
        return None;
    }
    let (rs, hash) = (owner.name.as_deref()?, owner.template_hash.as_deref()?);
    let name = rs.strip_suffix(hash)?.strip_suffix('-')?;
    let d = caches.deployments.get(&ObjectRef::new(name).within(namespace))?;
    Some((d, rs.to_owned()))
}

/// A pod of Deployment `namespace/name` that opted out of eviction, `namespace/pod`: its
/// rollout would replace that pod too, so the opt-out wins.
fn opted_out_pod(ctx: &Context, namespace: &str, name: &str) -> Option<String> {
    let prefix = format!("{name}-");
    // A ReplicaSet of the Deployment is `<name>-<hash>`, the hash without dashes.
    let owned =
        ctx.pods.owned_by_replica_sets(namespace, |rs| rs.strip_prefix(&prefix).is_some_and(|h| !h.contains('-')));
    owned.into_iter().find(|(_, o)| o.opted_out).map(|(pod, _)| format!("{namespace}/{pod}"))
}

/// `status.evacuations`: every cached Deployment whose pod template names this maintenance
/// (`key`), with where its rollout stands now.
fn statuses(caches: &WorkloadCaches, key: &str) -> Vec<EvacuationStatus> {
    let mut out: Vec<EvacuationStatus> = caches
        .deployments
        .state()
        .iter()
        .filter(|d| rolled_for(d) == Some(key))
        .map(|d| {
            let (reason, message) = rollout_state(d);
            let at =
                d.spec.template.metadata.as_ref().and_then(|m| m.annotations.as_ref()?.get(EVACUATED_AT_ANNOTATION));
            EvacuationStatus {
                namespace: d.namespace().unwrap_or_default(),
                name: d.name_any(),
                reason,
                message: Some(message),
                start_time: at.and_then(|t| t.parse().ok()).map(Time),
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    out
}

/// Carries out the plan once the status that announces it is written: starts its rollouts,
/// emits one `NotEvacuated` Warning per pod note, and for every rollout whose state changed
/// since `previous` (the stored `status.evacuations`) the `EvacuatedByRollout` or
/// `RolloutFailed` Event and metric. Deriving those from the stored status means a restart
/// repeats none. Failed writes are logged and tried again on the next pass.
pub async fn carry_out(
    nm: &NodeMaintenance,
    ctx: &Context,
    plan: &EvacuationPlan,
    previous: &[EvacuationStatus],
    now: &Time,
) {
    for r in &plan.rollouts {
        start(nm, ctx, r, now).await;
    }
    let name = nm.name_any();
    for (node, note) in &plan.not_evacuated {
        if locked(&ctx.evacuator.reported).insert((name.clone(), note.clone())) {
            ctx.event(nm, MaintenanceEvent::not_evacuated(node, note)).await;
        }
    }
    for s in &plan.statuses {
        let before = previous.iter().find(|p| p.namespace == s.namespace && p.name == s.name).map(|p| p.reason);
        if before == Some(s.reason) {
            continue;
        }
        match s.reason {
            RolloutState::EvacuatedByRollout => {
                ctx.metrics.rollouts_finished.inc();
                ctx.event(nm, MaintenanceEvent::evacuated_by_rollout(s)).await;
            }
            RolloutState::RolloutFailed => {
                ctx.metrics.rollouts_failed.inc();
                ctx.event(nm, MaintenanceEvent::rollout_failed(s)).await;
            }
            RolloutState::RollingOut => {}
        }
    }
}

/// Starts one rollout: checks that the pod's ReplicaSet is the Deployment's (the caches
/// matched them by name), then sets the pod-template annotations with a merge patch
/// conditional on the resourceVersion the decision read (a Deployment changed since, by a
/// restarted controller too, is decided again on the next pass).
async fn start(nm: &NodeMaintenance, ctx: &Context, r: &Rollout, now: &Time) {
    let d = &r.deployment;
    let (namespace, name) = (d.namespace().unwrap_or_default(), d.name_any());
    let rs = match ctx.pacer.run(replica_set(&ctx.client, &namespace, &r.replica_set)).await {
        Ok(rs) => rs,
        Err(e) => {
            tracing::warn!(deployment = %format!("{namespace}/{name}"), error = %e, "cannot read the pod's ReplicaSet");
            return;
        }
    };
    let owned =
        rs.owner_references().iter().any(|o| o.controller == Some(true) && Some(&o.uid) == d.meta().uid.as_ref());
    if !owned {
        tracing::info!(replica_set = %r.replica_set, deployment = %name, "ReplicaSet not owned by the Deployment; not rolled");
        return;
    }
    match ctx.pacer.run(start_rollout(&ctx.client, d, &now.0.to_string(), &maintenance_key(nm))).await {
        Ok(_) => {
            let key = (nm.metadata.uid.clone().unwrap_or_default(), d.metadata.uid.clone().unwrap_or_default());
            locked(&ctx.evacuator.started).insert(key);
            ctx.metrics.rollouts_started.inc();
            ctx.event(nm, MaintenanceEvent::evacuating_by_rollout(d, &r.pod, &r.node, &r.need)).await;
        }
        Err(e) => {
            tracing::info!(deployment = %format!("{namespace}/{name}"), error = %e, "rollout not started; decided again next pass")
        }
    }
}
