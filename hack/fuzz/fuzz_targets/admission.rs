//! The AdmissionReview endpoints (`/mutate`, `/validate`, `/validate-node`,
//! `/validate-budget`) on raw bytes, through the functions the server's handler calls
//! (`server/routes.rs`): `review::decode`, the endpoint's decision over the fixture nodes
//! (`tests/fixtures/nodes.yaml`) with two maintenances and a standalone authorizer, and
//! `review::encode`; no network. The first byte picks the endpoint, the rest is the body.
//! - a body that does not decode is answered 400 without a uid, or denied with its uid;
//! - an answer is an `AdmissionReview` in the request's version with its uid, `allowed` as
//!   decided, a SPEC 3 code when denied, warnings without control characters, and a
//!   `JSONPatch` only from `/mutate`;
//! - the patch applies to `request.object`, and mutating the patched object again changes
//!   nothing (reinvocation, SPEC 3.1).
#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use node_maintenance::admission::review::{self, Request};
use node_maintenance::admission::{
    Decision, Denial, StandaloneAuthorizer, mutate, validate, validate_budget, validate_node,
};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use node_maintenance::api::{NodeMaintenance, NodeMaintenanceSpec, Stage};
use node_maintenance::cluster::standalone::StaticView;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, LazyLock};

struct Cluster {
    view: StaticView,
    authz: StandaloneAuthorizer,
}

static CLUSTER: LazyLock<Cluster> = LazyLock::new(|| {
    let nodes = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/nodes.yaml");
    let mut view = StaticView::load(&nodes).expect("the fixture nodes");
    let m = |name: &str, stage: Stage, nodes: &[&str]| {
        let by_name = NodeSelectorRequirement {
            key: "metadata.name".into(),
            operator: "In".into(),
            values: Some(nodes.iter().map(|n| (*n).to_owned()).collect()),
        };
        let term = NodeSelectorTerm { match_fields: Some(vec![by_name]), ..Default::default() };
        let spec = NodeMaintenanceSpec {
            stage,
            node_selector: NodeSelector { node_selector_terms: vec![term] },
            ..Default::default()
        };
        Arc::new(NodeMaintenance::new(name, spec))
    };
    // Overlap warnings and /validate-node's holders need maintenances in the view.
    view.maintenances = vec![m("kernel", Stage::Drain, &["worker-1", "worker-2"]), m("firmware", Stage::Cordon, &["gpu-1"])];
    Cluster { view, authz: StandaloneAuthorizer::new(["alice".to_owned()], Vec::<String>::new()) }
});

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Endpoint {
    Mutate,
    Validate,
    ValidateNode,
    ValidateBudget,
}

fn decide(endpoint: Endpoint, req: &Request) -> Decision {
    let c = &*CLUSTER;
    match endpoint {
        Endpoint::Mutate => mutate(req),
        // The standalone authorizer answers at once: no runtime needed.
        Endpoint::Validate => futures::executor::block_on(validate(req, &c.view, &c.authz)),
        Endpoint::ValidateNode => validate_node(req, &c.view),
        Endpoint::ValidateBudget => validate_budget(req),
    }
}

/// The answer as the handler gives it: `None` for HTTP 400, else the 200 body.
fn answer(endpoint: Endpoint, body: &[u8]) -> Option<(Vec<u8>, Option<(String, String, Decision)>)> {
    match review::decode(body) {
        Err(e) => {
            assert!(!e.message.is_empty());
            let uid = e.uid?;
            let d = Decision::deny(Denial::bad_request(e.message.clone()));
            Some((review::encode(&e.api_version, &uid, &d, false), None))
        }
        Ok(rev) => {
            let d = decide(endpoint, &rev.request);
            let bytes = review::encode(&rev.api_version, &rev.request.uid, &d, endpoint == Endpoint::Mutate);
            Some((bytes, Some((rev.api_version.into_owned(), rev.request.uid.into_owned(), d))))
        }
    }
}

fn check(endpoint: Endpoint, body: &[u8]) {
    let Some((bytes, decided)) = answer(endpoint, body) else { return };
    let out: Value =
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("not JSON: {e}: {}", String::from_utf8_lossy(&bytes)));
    assert_eq!(out["kind"], "AdmissionReview", "{out}");
    let r = &out["response"];
    let uid = r["uid"].as_str().expect("response.uid");
    assert!(!uid.is_empty() || decided.is_some(), "{out}");
    let allowed = r["allowed"].as_bool().expect("allowed");
    if let Some((version, want, d)) = &decided {
        assert_eq!(out["apiVersion"], version.as_str());
        assert_eq!(uid, want);
        assert_eq!(allowed, d.allowed);
    }
    if !allowed {
        let code = r["status"]["code"].as_u64().expect("a denial's code");
        assert!([400, 403, 422, 500, 503].contains(&code), "code {code}");
        assert!(r["status"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{out}");
    }
    for w in r["warnings"].as_array().into_iter().flatten() {
        assert!(!w.as_str().expect("a warning").chars().any(char::is_control), "{w}");
    }
    let Some(patch) = r["patch"].as_str() else { return };
    assert_eq!(endpoint, Endpoint::Mutate, "a patch from {endpoint:?}");
    assert!(allowed && r["patchType"] == "JSONPatch", "{out}");
    let raw = base64::engine::general_purpose::STANDARD.decode(patch).expect("base64");
    let patch: json_patch::Patch = serde_json::from_slice(&raw).expect("RFC 6902");
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else { return };
    let mut object = review["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap_or_else(|e| panic!("the patch does not apply: {e}"));
    review["request"]["object"] = object;
    let again = serde_json::to_vec(&review).expect("writes");
    let (_, second) = answer(Endpoint::Mutate, &again).expect("the patched review decodes");
    let (_, _, d) = second.expect("the patched review decodes");
    assert!(
        d.allowed && d.patch.as_ref().is_none_or(|p| p.0.is_empty()),
        "mutating the patched object again changes it: {d:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else { return };
    let endpoint =
        [Endpoint::Mutate, Endpoint::Validate, Endpoint::ValidateNode, Endpoint::ValidateBudget][usize::from(pick % 4)];
    check(endpoint, body);
});
