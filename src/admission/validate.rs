//! The validating endpoint for NodeMaintenance (SPEC 3.2 to 3.5).

use super::authz::{Authorizer, AuthzOutcome, denied_message};
use super::forecast::forecast_warnings;
use super::object::{ParsedSpec, member, parse_object_spec};
use super::review::{Object, Request};
use super::transitions::{check_spec_update, check_stage_statuses};
use super::wait::wait_warnings;
use super::warnings::{budget_warnings, gate_warnings, selection_warnings};
use super::{ClusterView, Decision, Denial, expect_kind};
use crate::api::{GROUP, NodeMaintenanceSpec, Stage};
use crate::selector::{NodeIndex, NodeMatcher};
use k8s_openapi::api::core::v1::NodeSelector;
use kube::core::admission::Operation;
use serde_json::Value;
use std::sync::Arc;

/// Validates a NodeMaintenance CREATE, UPDATE (spec or `status` subresource) or DELETE.
///
/// - CREATE: the object (3.2), then `delete nodes` for every selected node (3.4), then
///   warnings (3.5, and a `waitForCompletion` that may outlast `drainTimeout`, 4.6).
/// - UPDATE with no `spec` change (metadata only): allowed without checks, so finalizers can
///   always be removed.
/// - UPDATE of `spec`: the object, the transition (3.3), authorization of the new selection,
///   and warnings when the selector or stage changed (and about `waitForCompletion` when it
///   or `drainTimeout` changed).
/// - UPDATE of `status`: append-only, ordered `stageStatuses` with Cordon before Drain (3.3);
///   no authorization.
/// - DELETE: allowed in every stage, after authorization of the stored selection.
///
/// Returns the decision; denials carry 400, 403, 422 or 503 (SPEC 3).
pub async fn validate(req: &Request<'_>, view: &dyn ClusterView, authz: &dyn Authorizer) -> Decision {
    if let Err(d) = expect_kind(req, GROUP, "NodeMaintenance") {
        return Decision::deny(d);
    }
    match (&req.operation, req.sub_resource.as_deref()) {
        (Operation::Update, Some("status")) => validate_status(req),
        (_, Some(other)) => Decision::deny(Denial::bad_request(format!("subresource {other:?} is not reviewed here"))),
        (Operation::Create, None) => validate_create(req, view, authz).await.unwrap_or_else(Decision::deny),
        (Operation::Update, None) => validate_update(req, view, authz).await.unwrap_or_else(Decision::deny),
        (Operation::Delete, None) => validate_delete(req, view, authz).await.unwrap_or_else(Decision::deny),
        (op, None) => Decision::deny(Denial::bad_request(format!("operation {op:?} is not reviewed here"))),
    }
}

fn object<'r, 'a>(v: &'r Option<Object<'a>>, what: &str) -> Result<&'r Object<'a>, Denial> {
    v.as_ref().filter(|o| o.is_object()).ok_or_else(|| Denial::bad_request(format!("request has no {what}")))
}

async fn validate_create(
    req: &Request<'_>,
    view: &dyn ClusterView,
    authz: &dyn Authorizer,
) -> Result<Decision, Denial> {
    let parsed = parse_object_spec(object(&req.object, "object")?, &req.name)?;
    let nodes = synced_nodes(view)?;
    let selection = nodes.select(&parsed.matcher);
    authorize(req, &selection.names, authz).await?;
    let object = object(&req.object, "object")?;
    let mut warnings = nodes.warnings(&req.name, &parsed.spec, object, &selection, view);
    warnings.extend(wait_warnings(&parsed.spec));
    Ok(Decision::allow_with_warnings(warnings))
}

async fn validate_update(
    req: &Request<'_>,
    view: &dyn ClusterView,
    authz: &dyn Authorizer,
) -> Result<Decision, Denial> {
    let new = object(&req.object, "object")?;
    let old = object(&req.old_object, "oldObject")?;
    let (new_spec, old_spec) = (member(new, "spec"), member(old, "spec"));
    let (new_spec, old_spec) = (new_spec.as_ref(), old_spec.as_ref());
    if new_spec == old_spec {
        return Ok(Decision::allow());
    }
    let parsed = parse_object_spec(new, &req.name)?;
    let old_stage = stored_stage(old_spec);
    let errs = check_spec_update(
        old_spec.unwrap_or(&Value::Null),
        new_spec.unwrap_or(&Value::Null),
        old_stage,
        parsed.spec.stage,
    );
    if !errs.is_empty() {
        return Err(Denial::invalid(&req.name, errs));
    }
    let nodes = synced_nodes(view)?;
    let selection = nodes.select(&parsed.matcher);
    authorize(req, &selection.names, authz).await?;
    let changed = |field: &str| old_spec.and_then(|s| s.get(field)) != new_spec.and_then(|s| s.get(field));
    let mut warnings = Vec::new();
    if changed("nodeSelector") || old_stage != parsed.spec.stage {
        warnings.extend(nodes.warnings(&req.name, &parsed.spec, new, &selection, view));
    }
    if changed("waitForCompletion") || changed("drainTimeout") {
        warnings.extend(wait_warnings(&parsed.spec));
    }
    Ok(Decision::allow_with_warnings(warnings))
}

async fn validate_delete(
    req: &Request<'_>,
    view: &dyn ClusterView,
    authz: &dyn Authorizer,
) -> Result<Decision, Denial> {
    let old = object(&req.old_object, "oldObject")?;
    // A stored object that never passed this webhook may not parse; deleting it must still
    // be possible, so authorization then uses whatever selector can be read.
    let matcher = match parse_object_spec(old, &req.name) {
        Ok(ParsedSpec { matcher, .. }) => Some(matcher),
        Err(_) => member(old, "spec")
            .as_ref()
            .and_then(|s| s.get("nodeSelector"))
            .and_then(|s| serde_json::from_value::<NodeSelector>(s.clone()).ok())
            .and_then(|s| NodeMatcher::compile(&s)),
    };
    let Some(matcher) = matcher else {
        return Ok(Decision::allow_with_warnings(vec![
            "stored nodeSelector is unreadable; deleting without a per-node authorization check".into(),
        ]));
    };
    let nodes = synced_nodes(view)?;
    authorize(req, &nodes.select(&matcher).names, authz).await?;
    Ok(Decision::allow())
}

fn validate_status(req: &Request) -> Decision {
    let new = req.object.as_ref().and_then(|o| member(o, "status"));
    let old = req.old_object.as_ref().and_then(|o| member(o, "status"));
    let errs = check_stage_statuses(old.as_ref(), new.as_ref());
    if errs.is_empty() { Decision::allow() } else { Decision::deny(Denial::invalid(&req.name, errs)) }
}

fn stored_stage(spec: Option<&Value>) -> Stage {
    spec.and_then(|s| s.get("stage")).and_then(Value::as_str).and_then(Stage::parse).unwrap_or_default()
}

/// The Nodes to authorize against, or 503 while the view has not synced: an empty cache
/// would select no node and so authorize nothing (fail closed, SPEC 3.4).
fn synced_nodes(view: &dyn ClusterView) -> Result<Nodes, Denial> {
    if view.synced() {
        Ok(Nodes(view.node_index()))
    } else {
        Err(Denial::unavailable(
            "the Node and NodeMaintenance caches have not synced with the apiserver yet; retry shortly",
        ))
    }
}

/// The Nodes of the view, indexed for selection.
struct Nodes(Arc<NodeIndex>);

/// What a selector picked: per node of the index whether it is selected, and the names.
struct Selection<'a> {
    names: Vec<&'a str>,
    mask: Vec<bool>,
}

impl Nodes {
    fn select(&self, matcher: &NodeMatcher) -> Selection<'_> {
        let mask = matcher.matches_indexed(&self.0);
        let names = mask.iter().enumerate().filter(|(_, m)| **m).map(|(i, _)| self.0.name(i)).collect();
        Selection { names, mask }
    }

    /// The selection warnings (SPEC 3.5), the budget warnings of `spec`, the gates its
    /// nodes all wait behind now (SPEC 4.6) and the forecast's (SPEC 4.7, with the basis of
    /// `object`'s status).
    fn warnings(
        &self,
        name: &str,
        spec: &NodeMaintenanceSpec,
        object: &Object,
        selection: &Selection,
        view: &dyn ClusterView,
    ) -> Vec<String> {
        let budgets = view.budgets();
        let now = jiff::Timestamp::now();
        let mut out = selection_warnings(name, &self.0, &selection.mask, &view.maintenances());
        out.extend(budget_warnings(spec.max_unavailable.as_ref(), &self.0, &selection.mask, &budgets));
        out.extend(gate_warnings(&self.0, &selection.mask, &budgets, now));
        let status = || object.member("status").and_then(|s| serde_json::from_str(s).ok());
        out.extend(forecast_warnings(name, spec, status, &self.0, &selection.mask, view, now));
        out
    }
}

async fn authorize(req: &Request<'_>, selected: &[&str], authz: &dyn Authorizer) -> Result<(), Denial> {
    let names: Vec<&str> = selected.iter().copied().filter(|n| !n.is_empty()).collect();
    match authz.authorize(&req.user_info, &names).await {
        AuthzOutcome::Allowed => Ok(()),
        AuthzOutcome::Denied(denied) => Err(Denial::forbidden(denied_message(&req.user_info, &denied))),
        AuthzOutcome::Unavailable(cause) => Err(Denial::unavailable(format!(
            "cannot check whether user {:?} may delete the selected nodes: {cause}",
            req.user_info.username.as_deref().unwrap_or("")
        ))),
    }
}
