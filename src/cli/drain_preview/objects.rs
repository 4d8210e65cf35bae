//! From the cluster's objects (Pods, PodDisruptionBudgets, ReplicaSets, Nodes,
//! NodeMaintenances) to the preview's plain input: owners resolved, budgets compiled.

use super::*;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// `pod-template-hash`: the label a Deployment's ReplicaSet puts on its pods.
pub(super) const POD_TEMPLATE_HASH: &str = "pod-template-hash";

fn controller_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Owner> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| Owner { kind: o.kind.clone(), name: o.name.clone() })
}

/// Builds the preview's pods from Pods (SPEC 2 pod types via [`PodView::from_pod`]); unbound
/// pods are left out. `replica_sets`: `Some` resolves ReplicaSet owners by the ReplicaSets'
/// controllers, `None` by the `pod-template-hash` convention (see the module documentation).
/// Returns the pods and which resolution was used.
pub fn preview_pods(pods: &[Pod], replica_sets: Option<&[ReplicaSet]>) -> (Vec<PreviewPod>, OwnerResolution) {
    let rs_owner: HashMap<(String, String), Option<Owner>> = replica_sets
        .into_iter()
        .flatten()
        .map(|rs| {
            let key = (rs.metadata.namespace.clone().unwrap_or_default(), rs.metadata.name.clone().unwrap_or_default());
            (key, controller_of(&rs.metadata))
        })
        .collect();
    let resolution =
        if replica_sets.is_some() { OwnerResolution::ReplicaSets } else { OwnerResolution::PodTemplateHash };
    let out = pods
        .iter()
        .filter_map(|pod| {
            let view = PodView::from_pod(pod, false)?;
            let controller = controller_of(&pod.metadata);
            let comes_back = controller.is_some();
            let owner = match controller {
                Some(o) if o.kind == "ReplicaSet" => {
                    resolve_replica_set(o, pod, &view, replica_sets.is_some(), &rs_owner)
                }
                Some(o) => o,
                None => Owner { kind: "Pod".into(), name: view.name.to_string() },
            };
            let empty_dir = pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter(|v| v.empty_dir.is_some())
                .map(|v| v.name.clone())
                .collect();
            Some(PreviewPod { view, owner, comes_back, empty_dir })
        })
        .collect();
    (out, resolution)
}

fn resolve_replica_set(
    rs: Owner,
    pod: &Pod,
    view: &PodView,
    known: bool,
    rs_owner: &HashMap<(String, String), Option<Owner>>,
) -> Owner {
    if known {
        return match rs_owner.get(&(view.namespace.to_string(), rs.name.clone())) {
            Some(Some(d)) if d.kind == "Deployment" => d.clone(),
            _ => rs,
        };
    }
    let hash = pod.metadata.labels.as_ref().and_then(|l| l.get(POD_TEMPLATE_HASH));
    match hash.and_then(|h| rs.name.strip_suffix(h.as_str())).and_then(|d| d.strip_suffix('-')) {
        Some(d) if !d.is_empty() => Owner { kind: "Deployment".into(), name: d.to_owned() },
        _ => rs,
    }
}

/// Builds the budgets from PodDisruptionBudgets (`status.disruptionsAllowed`, 0 without a
/// status, as the Eviction API treats a PDB the disruption controller has not processed).
pub fn budgets(pdbs: &[PodDisruptionBudget]) -> Vec<Budget> {
    pdbs.iter()
        .map(|p| Budget {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            selector: p.spec.as_ref().and_then(|s| s.selector.as_ref()).and_then(PodSelector::compile),
            disruptions_allowed: p.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0),
        })
        .collect()
}

/// The maintenance under review, as [`preview_input`] needs it.
#[derive(Clone, Debug)]
pub struct Reviewed<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// Creation time in Unix seconds: the stored one for an UPDATE, `None` for a CREATE (it
    /// is then the newest maintenance, the one that gives way when plans conflict).
    pub created: Option<i64>,
    /// The defaulted, canonical `spec.drainPlan`.
    pub drain_plan: &'a [DrainPlanEntry],
    /// The nodes its selector picks.
    pub nodes: &'a [String],
    /// `spec.maxUnavailable`, if set.
    pub max_unavailable: Option<&'a IntOrString>,
    /// `spec.waitForCompletion`, if set (SPEC 4.6): the pods it selects are left to finish.
    pub wait_for_completion: Option<&'a crate::api::WaitForCompletion>,
}

/// Builds the simulation's input from a cluster's objects, as the controller's
/// `planner_input` does from its caches (SPEC 4.3): the other Drain-stage maintenances not
/// being deleted (their selectors matched against `nodes`, their stored cursors), the node
/// floors and draining taints the controller persisted on the Nodes, the pods and the
/// PodDisruptionBudgets. `replica_sets` as in [`preview_pods`].
pub fn preview_input(
    reviewed: &Reviewed<'_>,
    nodes: &[std::sync::Arc<k8s_openapi::api::core::v1::Node>],
    maintenances: &[std::sync::Arc<crate::api::NodeMaintenance>],
    pods: &[Pod],
    pdbs: &[PodDisruptionBudget],
    replica_sets: Option<&[ReplicaSet]>,
    options: PlannerOptions,
) -> PreviewInput {
    let others: Vec<MaintenanceInput> = drain_maintenances(maintenances, nodes, Drained::Selected)
        .into_iter()
        .filter(|m| m.name != reviewed.name)
        .collect();
    let mut involved: BTreeSet<String> = reviewed.nodes.iter().cloned().collect();
    involved.extend(others.iter().flat_map(|m| m.nodes.iter().cloned()));
    // The preview plans as if every gate were open.
    let node_inputs = node_inputs(nodes, |n| involved.contains(n), &BTreeMap::new());
    let (pods, resolution) = preview_pods(pods, replica_sets);
    PreviewInput {
        reviewed: MaintenanceInput {
            name: reviewed.name.to_owned(),
            created: reviewed.created.unwrap_or(i64::MAX),
            drain_plan: reviewed.drain_plan.to_vec(),
            drain_plan_index: 0,
            nodes: reviewed.nodes.to_vec(),
            wait_for_completion: reviewed.wait_for_completion.map(completion_wait),
        },
        max_unavailable: reviewed.max_unavailable.cloned(),
        others,
        nodes: node_inputs,
        pods: pods.into_iter().filter(|p| involved.contains(&*p.view.node_name)).collect(),
        budgets: budgets(pdbs),
        options,
        owner_resolution: Some(resolution),
        ..Default::default()
    }
}
