//! Which Deployments the drain would roll instead of waiting: the controller's own
//! decision ([`crate::planner::evacuation::decide`]) over the pods on the selected nodes, as
//! it would take it when the pod's eviction is refused (a PodDisruptionBudget that allows no
//! disruption even with every pod healthy) or its Deployment has one replica. The pods of
//! a rolled Deployment then leave the simulation without asking their budgets: the
//! Deployment surges their replacements first.

use super::{PreviewInput, RolledDeployment};
use crate::api::Evacuation;
use crate::planner::evacuation::{Facts, Verdict, Workload, decide, never_allows_a_disruption};
use crate::planner::{PodView, opted_out};
use crate::selector::PodSelector;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::collections::BTreeMap;

/// The pod's Deployment by the `pod-template-hash` naming convention (a ReplicaSet
/// `<deployment>-<hash>`), when it is among `deployments`.
fn deployment_of<'a>(pod: &Pod, deployments: &'a [Deployment]) -> Option<&'a Deployment> {
    let meta = &pod.metadata;
    let rs = meta.owner_references.iter().flatten().find(|o| o.controller == Some(true) && o.kind == "ReplicaSet")?;
    let hash = meta.labels.as_ref()?.get("pod-template-hash")?;
    let name = rs.name.strip_suffix(hash.as_str())?.strip_suffix('-')?;
    deployments.iter().find(|d| d.metadata.namespace == meta.namespace && d.metadata.name.as_deref() == Some(name))
}

/// Fills `input.rolled` (pods moved by a rollout, `namespace/name`) and
/// `input.evacuations` (the Deployments, why, and the pods not evacuated and why) for the
/// reviewed maintenance's choice `mode` (its `spec.evacuation`, else the controller's default).
pub fn plan_rollouts(
    input: &mut PreviewInput,
    mode: Evacuation,
    pods: &[Pod],
    deployments: &[Deployment],
    pdbs: &[PodDisruptionBudget],
) {
    let mine = &input.reviewed.nodes;
    let mut rolled: BTreeMap<(String, String), RolledDeployment> = BTreeMap::new();
    for pod in pods {
        let Some(view) = PodView::from_pod(pod, false) else { continue };
        let leaving = view.pod_type == crate::api::PodType::Default && !view.terminal && !view.eviction_in_progress;
        if !leaving || opted_out(pod) || !mine.iter().any(|n| **n == *view.node_name) {
            continue;
        }
        let deployment = deployment_of(pod, deployments);
        let owner = pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true));
        let workload = match (deployment, owner) {
            (Some(d), _) => Workload::Deployment(d),
            (None, Some(o)) => Workload::Other(&o.kind, &o.name),
            (None, None) => Workload::Bare,
        };
        let refused_by = pdbs.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(&*view.namespace)
                && never_allows_a_disruption(p)
                && p.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .and_then(PodSelector::compile)
                    .is_some_and(|s| s.matches(|k| view.labels.get(k)))
        });
        let facts = Facts { mode, maintenance: "", workload, refused_by, started_here: false };
        let opted = || {
            let d = deployment?;
            pods.iter()
                .find(|p| opted_out(p) && deployment_of(p, deployments).is_some_and(|o| std::ptr::eq(o, d)))
                .map(|p| format!("{}/{}", view.namespace, p.metadata.name.as_deref().unwrap_or_default()))
        };
        let name = format!("{}/{}", view.namespace, view.name);
        match decide(&facts, opted) {
            Verdict::Roll(need) => {
                let d = deployment.map(|d| d.metadata.name.clone().unwrap_or_default()).unwrap_or_default();
                let entry = rolled.entry((view.namespace.to_string(), d.clone())).or_insert_with(|| RolledDeployment {
                    namespace: view.namespace.to_string(),
                    name: d,
                    why: need.to_string(),
                    pods: Vec::new(),
                });
                entry.pods.push(name.clone());
                input.rolled.insert(name);
            }
            Verdict::NotEvacuated(why) => input.not_rolled.push(format!("{name} ({why})")),
            _ => {}
        }
    }
    input.rolled_instead = rolled.into_values().collect();
}
