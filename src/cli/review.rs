//! `review`: the what-if of a NodeMaintenance (issue "Operator experience"). Runs the exact
//! admission pipeline the apiserver would (defaulting, then validation with authorization
//! and warnings) on a manifest, offline or against the cluster, and writes nothing.

use crate::admission::review::Request;
use crate::admission::{Authorizer, AuthzOutcome, ClusterView, Denial, mutate, parse_spec, validate};
use crate::api::{CONTROL_PLANE_LABEL, DrainPlanEntry, GROUP};
use crate::selector::NodeIndex;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Labels that name a node pool on common platforms, tried in order when grouping nodes.
const POOL_LABELS: &[&str] = &[
    "pool",
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "agentpool",
    "node.kubernetes.io/instance-type",
];

/// The outcome of a what-if, as printed (text) or serialized (`-o json`).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhatIf {
    /// `metadata.name` of the maintenance.
    pub name: String,
    /// `CREATE`, or `UPDATE` when reviewed against a stored maintenance.
    pub operation: &'static str,
    /// Who the review was made as (`--as`, or the current user in cluster mode).
    pub user: String,
    /// Whether the apiserver would accept it.
    pub allowed: bool,
    /// Why not: code, reason and message, as the webhook would answer.
    pub denial: Option<DenialView>,
    /// `spec.stage` after defaulting.
    pub stage: Option<String>,
    /// `spec.drainPlan` after defaulting.
    pub drain_plan: Vec<DrainPlanEntry>,
    /// `spec.maxUnavailable`, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// `spec.evacuation`, if set: the drain preview shows which Deployments it
    /// rolls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evacuation: Option<crate::api::Evacuation>,
    /// `spec.waitForCompletion`, if set: the drain preview leaves the pods it selects to
    /// finish (SPEC 4.6).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_for_completion: Option<crate::api::WaitForCompletion>,
    /// Every node the selector picks, grouped (`control-plane`, `pool=general`, ...).
    pub selected: BTreeMap<String, Vec<String>>,
    /// Number of selected nodes.
    pub selected_count: usize,
    /// Number of nodes known.
    pub node_count: usize,
    /// The webhook's warnings.
    pub warnings: Vec<String>,
    /// Whether the user may delete every selected node (SPEC 3.4), and which not.
    pub authorization: AuthorizationView,
    /// In which order it would take its nodes; only when `maxUnavailable` or a
    /// NodeDisruptionBudget limits it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roll_preview: Option<super::roll_preview::RollPreview>,
    /// What the Drain stage would do to the workloads; only when pods are known
    /// (cluster mode, or a dump with Pods).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_preview: Option<super::drain_preview::DrainPreview>,
}

/// A denial as shown to a person.
#[derive(Clone, Debug, Serialize)]
pub struct DenialView {
    /// 400, 403, 422, 503...
    pub code: u16,
    /// `Invalid`, `Forbidden`...
    pub reason: String,
    /// The full message.
    pub message: String,
}

/// The authorization part of a what-if.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationView {
    /// True when every selected node may be deleted by the user.
    pub allowed: bool,
    /// Nodes the user may not delete.
    pub denied_nodes: Vec<String>,
    /// Why it could not be checked, if so.
    pub error: Option<String>,
}

impl From<&Denial> for DenialView {
    fn from(d: &Denial) -> Self {
        DenialView { code: d.code, reason: d.reason.to_owned(), message: d.message.clone() }
    }
}

/// The group the node at `position` of `index` is listed under: `control-plane`,
/// `<label>=<value>` of the first pool label it has (`group_by` first when given), or `other`.
pub fn node_group(index: &NodeIndex, position: usize, group_by: Option<&str>) -> String {
    if index.has_label(position, CONTROL_PLANE_LABEL) {
        return "control-plane".into();
    }
    group_by
        .into_iter()
        .chain(POOL_LABELS.iter().copied())
        .find_map(|k| index.label(position, k).map(|v| format!("{k}={v}")))
        .unwrap_or_else(|| "other".into())
}

/// The JSON text of the `request` of a dry-run review of `object` (CREATE, or UPDATE against
/// `stored`) by `user`, for [`Request::parse`].
fn request_text(operation: &str, object: &Value, stored: Option<&Value>, user: &UserInfo) -> String {
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    json!({
        "uid": "what-if",
        "kind": {"group": GROUP, "version": "v1alpha1", "kind": "NodeMaintenance"},
        "resource": {"group": GROUP, "version": "v1alpha1", "resource": "nodemaintenances"},
        "name": name,
        "operation": operation,
        "userInfo": user,
        "object": object,
        "oldObject": stored,
        "dryRun": true,
    })
    .to_string()
}

/// Reads the `request` built by [`request_text`].
fn request(text: &str) -> Result<Request<'_>, String> {
    Request::parse(text).map_err(|e| format!("cannot build the review: {e}"))
}

/// Runs the admission pipeline on `object` (a NodeMaintenance manifest as JSON) as `user`:
/// CREATE, or UPDATE against `stored`. Defaulting first (its patch applied), then
/// validation with authorization and warnings. Also asks `authz` directly so the report
/// says whether the user may delete the selected nodes even when validation fails first.
///
/// # Errors
/// A message when the manifest is not a NodeMaintenance object or the defaulting patch
/// does not apply.
pub async fn what_if(
    object: &Value,
    stored: Option<&Value>,
    user: &UserInfo,
    view: &dyn ClusterView,
    authz: &dyn Authorizer,
    group_by: Option<&str>,
) -> Result<WhatIf, String> {
    if object.get("kind").and_then(Value::as_str) != Some("NodeMaintenance") {
        return Err("the file is not a NodeMaintenance (kind: NodeMaintenance)".into());
    }
    let operation = if stored.is_some() { "UPDATE" } else { "CREATE" };
    let mut defaulted = object.clone();
    let mutation = mutate(&request(&request_text(operation, object, stored, user))?);
    if let Some(patch) = &mutation.patch {
        json_patch::patch(&mut defaulted, patch).map_err(|e| format!("the defaulting patch does not apply: {e}"))?;
    }
    let decision = match &mutation.denial {
        Some(_) => mutation.clone(),
        None => {
            let text = request_text(operation, &defaulted, stored, user);
            validate(&request(&text)?, view, authz).await
        }
    };
    let nodes = view.node_index();
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    let raw = serde_json::value::to_raw_value(&defaulted).map_err(|e| format!("cannot re-encode the object: {e}"))?;
    let parsed = parse_spec(&raw, &name).ok();
    let mut selected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut names = Vec::new();
    if let Some(p) = &parsed {
        for (i, _) in p.matcher.matches_indexed(&nodes).iter().enumerate().filter(|(_, m)| **m) {
            let node_name = nodes.name(i).to_owned();
            selected.entry(node_group(&nodes, i, group_by)).or_default().push(node_name.clone());
            names.push(node_name);
        }
    }
    let borrowed: Vec<&str> = names.iter().map(String::as_str).collect();
    let authorization = match authz.authorize(&user.into(), &borrowed).await {
        AuthzOutcome::Allowed => AuthorizationView { allowed: true, denied_nodes: vec![], error: None },
        AuthzOutcome::Denied(d) => AuthorizationView { allowed: false, denied_nodes: d, error: None },
        AuthzOutcome::Unavailable(e) => AuthorizationView { allowed: false, denied_nodes: vec![], error: Some(e) },
    };
    Ok(WhatIf {
        name,
        operation,
        user: user.username.clone().unwrap_or_default(),
        allowed: decision.allowed,
        denial: decision.denial.as_ref().map(DenialView::from),
        stage: defaulted.pointer("/spec/stage").and_then(Value::as_str).map(str::to_owned),
        max_unavailable: parsed.as_ref().and_then(|p| p.spec.max_unavailable.clone()),
        evacuation: parsed.as_ref().and_then(|p| p.spec.evacuation),
        wait_for_completion: parsed.as_ref().and_then(|p| p.spec.wait_for_completion.clone()),
        drain_plan: parsed.map(|p| p.spec.drain_plan).unwrap_or_default(),
        selected_count: names.len(),
        node_count: nodes.len(),
        selected,
        warnings: decision.warnings,
        authorization,
        roll_preview: None,
        drain_preview: None,
    })
}

/// Renders a what-if for a person; `verbose` lists the pods of the drain preview.
pub fn render_text(w: &WhatIf, verbose: bool) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let verdict = match &w.denial {
        None => "ALLOWED".to_owned(),
        Some(d) => format!("DENIED ({} {})", d.code, d.reason),
    };
    let _ = writeln!(out, "NodeMaintenance {:?} ({}) as user {:?}: {verdict}", w.name, w.operation, w.user);
    if let Some(d) = &w.denial {
        let _ = writeln!(out, "  {}", d.message);
    }
    let _ = writeln!(out, "Stage: {}", w.stage.as_deref().unwrap_or("?"));
    let _ = writeln!(out, "Drain plan ({} entries, in order):", w.drain_plan.len());
    for (i, e) in w.drain_plan.iter().enumerate() {
        let selector = e
            .pod_selector
            .as_ref()
            .map(|s| format!("  podSelector {}", serde_json::to_string(s).unwrap_or_default()))
            .unwrap_or_default();
        let _ = writeln!(out, "  {:>2}. {:<9} podPriority <= {}{selector}", i + 1, e.pod_type.as_str(), e.pod_priority);
    }
    let _ = writeln!(out, "Selected nodes: {} of {}", w.selected_count, w.node_count);
    for (group, nodes) in &w.selected {
        let _ = writeln!(out, "  {group} ({}): {}", nodes.len(), nodes.join(", "));
    }
    if !w.warnings.is_empty() {
        let _ = writeln!(out, "Warnings:");
        for warning in &w.warnings {
            let _ = writeln!(out, "  - {warning}");
        }
    }
    let a = &w.authorization;
    let line = match (&a.error, a.allowed) {
        (Some(e), _) => format!("cannot be checked: {e}"),
        (None, true) => format!("user {:?} may delete every selected node", w.user),
        (None, false) => format!("user {:?} may not delete {}", w.user, a.denied_nodes.join(", ")),
    };
    let _ = writeln!(out, "Authorization: {line}");
    if let Some(p) = &w.roll_preview {
        out.push_str(&super::roll_preview::render_text(p));
    }
    if let Some(p) = &w.drain_preview {
        out.push_str(&super::drain_preview::render_text(p, verbose));
    }
    out
}
