//! The CRD schemas' own validation (CEL `x-kubernetes-validations` and the bounds they need;
//! issue 30, SPEC 3.2, 3.3, 4.6) on a real kube-apiserver with only the CRDs applied and no
//! webhook registered, as a cluster whose webhook is missing or fails open: the apiserver
//! accepts the CRDs (the rules' estimated cost is within its budget), refuses a budget with
//! both counts, a blackout that ends before it starts, a pause request name that is not a
//! DNS-1123 subdomain, a stage going backwards, an edited drainPlan (also by a full replace
//! that leaves it out) and a nodeSelector edited outside Idle, and accepts valid objects and
//! forward moves. Objects stored before the rules stay updatable (CRD validation ratcheting).

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt, Resource};
use node_maintenance::api::{NodeDisruptionBudget, NodeMaintenance};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::envtest::Options;

fn api<K: Resource<DynamicType = ()>>(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<K>(&()))
}

/// The apiserver's message for a refused request (the whole error otherwise).
fn message(e: kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}

/// Creates an object from its JSON; the apiserver's message when it is refused.
async fn create(api: &Api<DynamicObject>, obj: Value) -> Result<DynamicObject, String> {
    let obj: DynamicObject = serde_json::from_value(obj).expect("an object");
    api.create(&PostParams::default(), &obj).await.map_err(message)
}

/// A JSON merge patch of the object `name` (`kubectl patch --type merge`).
async fn patch(api: &Api<DynamicObject>, name: &str, patch: Value) -> Result<DynamicObject, String> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.map_err(message)
}

/// A full replace (PUT, `kubectl replace`) of the stored object after `edit`.
async fn replace(api: &Api<DynamicObject>, name: &str, edit: impl FnOnce(&mut Value)) -> Result<DynamicObject, String> {
    let mut obj = serde_json::to_value(api.get(name).await.expect("stored")).expect("JSON");
    edit(&mut obj);
    api.replace(name, &PostParams::default(), &serde_json::from_value(obj).expect("an object")).await.map_err(message)
}

#[track_caller]
fn refused(result: Result<DynamicObject, String>, needles: &[&str]) {
    match result {
        Ok(obj) => panic!("expected a refusal containing {needles:?}, stored {:?}", obj.metadata.name),
        Err(msg) => {
            for needle in needles {
                assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
            }
        }
    }
}

#[track_caller]
fn accepted(result: Result<DynamicObject, String>) {
    if let Err(msg) = result {
        panic!("refused: {msg}");
    }
}

fn budget(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["nodeSelector"] = selector("pool", "general");
    json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
           "metadata": {"name": name}, "spec": spec})
}

fn maintenance(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("nodeSelector").is_none() {
        spec["nodeSelector"] = selector("pool", "general");
    }
    json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
           "metadata": {"name": name}, "spec": spec})
}

fn selector(key: &str, value: &str) -> Value {
    json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]})
}

fn plan() -> Value {
    json!([{"podType": "Default", "podPriority": 1000, "podSelector": {"matchLabels": {"app": "db"}}},
           {"podType": "Default", "podPriority": 1000000000}])
}

#[tokio::test]
async fn budget_rules_hold_without_the_webhook() {
    let env = envtest_or_skip!(Options::default());
    let ndb = api::<NodeDisruptionBudget>(&env.client());

    refused(
        create(&ndb, budget("both", json!({"maxUnavailable": 1, "minAvailable": "50%"}))).await,
        &["spec.minAvailable: Forbidden: at most one of maxUnavailable and minAvailable may be set"],
    );
    accepted(create(&ndb, budget("max", json!({"maxUnavailable": 2}))).await);
    accepted(create(&ndb, budget("min", json!({"minAvailable": "100%"}))).await);
    accepted(create(&ndb, budget("gates-only", json!({"pauseRequests": [{"name": "oncall"}]}))).await);
    // A null count is no count, as the webhook and the controller read it.
    accepted(create(&ndb, budget("null", json!({"maxUnavailable": 1, "minAvailable": null}))).await);
    refused(patch(&ndb, "max", json!({"spec": {"minAvailable": 1}})).await, &["at most one of maxUnavailable"]);
    for bad in [json!(0), json!(-1), json!("0%"), json!("101%"), json!("5"), json!("50 %")] {
        refused(
            create(&ndb, budget("bad-count", json!({"maxUnavailable": bad}))).await,
            &["spec.maxUnavailable", "must be a positive integer or a percentage from 1% to 100%"],
        );
    }

    let blackout = |start: &str, end: &str| json!({"blackouts": [{"start": start, "end": end, "reason": "freeze"}]});
    refused(
        create(&ndb, budget("backwards", blackout("2026-12-24T00:00:00Z", "2026-12-23T00:00:00Z"))).await,
        &["spec.blackouts[0].end", "must be after start"],
    );
    refused(
        create(&ndb, budget("empty", blackout("2026-12-24T00:00:00Z", "2026-12-24T00:00:00Z"))).await,
        &["must be after start"],
    );
    // Compared as instants, not as text: 01:00+02:00 is before 00:00Z.
    refused(
        create(&ndb, budget("zones", blackout("2026-12-24T00:00:00Z", "2026-12-24T01:00:00+02:00"))).await,
        &["must be after start"],
    );
    accepted(create(&ndb, budget("freeze", blackout("2026-12-20T00:00:00Z", "2027-01-02T00:00:00+01:00"))).await);

    refused(
        create(&ndb, budget("no-matchers", json!({"healthGate": {"alerts": {"matchers": []}}}))).await,
        &["spec.healthGate.alerts.matchers", "at least 1 items"],
    );
    accepted(
        create(
            &ndb,
            budget(
                "health",
                json!({"healthGate": {"maxUnhealthy": "0%", "alerts": {"matchers": ["{severity=\"critical\"}"]}}}),
            ),
        )
        .await,
    );
    refused(
        create(&ndb, budget("unhealthy", json!({"healthGate": {"maxUnhealthy": -1}}))).await,
        &["spec.healthGate.maxUnhealthy", "must be an integer from 0 or a percentage from 0% to 100%"],
    );

    let pauses: Vec<Value> = (0..33).map(|i| json!({"name": format!("party-{i}")})).collect();
    refused(create(&ndb, budget("crowd", json!({"pauseRequests": pauses}))).await, &["spec.pauseRequests", "32"]);
    refused(
        create(&ndb, budget("twice", json!({"pauseRequests": [{"name": "a"}, {"name": "a"}]}))).await,
        &["Duplicate value"],
    );
    refused(
        create(&ndb, budget("spaced", json!({"pauseRequests": [{"name": "oncall"}, {"name": "Ops Team"}]}))).await,
        &["spec.pauseRequests[1].name", node_maintenance::api::requester::DNS1123_SUBDOMAIN_MESSAGE],
    );
    accepted(create(&ndb, budget("dotted", json!({"pauseRequests": [{"name": "nhc.medik8s.io"}]}))).await);
    let window = json!({"schedule": "0 22 * * 6", "duration": "8h", "timeZone": "Europe/Berlin"});
    accepted(create(&ndb, budget("weekend", json!({"maxUnavailable": "25%", "maintenanceWindows": [window]}))).await);
    let long = json!({"schedule": "0 ".repeat(65), "duration": "8h"});
    refused(create(&ndb, budget("long", json!({"maintenanceWindows": [long]}))).await, &["Too long"]);
}

#[tokio::test]
async fn maintenance_rules_hold_without_the_webhook() {
    let env = envtest_or_skip!(Options::default());
    let nm = api::<NodeMaintenance>(&env.client());

    refused(create(&nm, maintenance("wordy", json!({"reason": "x".repeat(1025)}))).await, &["spec.reason", "Too long"]);
    accepted(create(&nm, maintenance("terse", json!({"reason": "x".repeat(1024)}))).await);
    refused(
        create(&nm, maintenance("none-at-once", json!({"maxUnavailable": 0}))).await,
        &["spec.maxUnavailable", "must be a positive integer"],
    );

    // Stages: forward, skipping, never back.
    accepted(create(&nm, maintenance("stages", json!({}))).await);
    accepted(patch(&nm, "stages", json!({"spec": {"stage": "Drain"}})).await);
    refused(
        patch(&nm, "stages", json!({"spec": {"stage": "Cordon"}})).await,
        &["spec.stage: Forbidden: may not move backwards from Drain to Cordon; stages only move forward"],
    );
    accepted(patch(&nm, "stages", json!({"spec": {"stage": "Complete"}})).await);
    refused(patch(&nm, "stages", json!({"spec": {"stage": "Idle"}})).await, &["from Complete to Idle"]);
    accepted(create(&nm, maintenance("cordoned", json!({"stage": "Cordon"}))).await);
    refused(patch(&nm, "cordoned", json!({"spec": {"stage": "Idle"}})).await, &["from Cordon to Idle"]);
    // A replace that leaves the stage out gets the default Idle, which is backwards too.
    refused(
        replace(&nm, "cordoned", |o| {
            o["spec"].as_object_mut().unwrap().remove("stage");
        })
        .await,
        &["from Cordon to Idle"],
    );

    // drainPlan: immutable, also through a full replace without it.
    accepted(create(&nm, maintenance("planned", json!({"drainPlan": plan()}))).await);
    let mut edited = plan();
    edited[0]["podPriority"] = json!(2000);
    refused(
        patch(&nm, "planned", json!({"spec": {"drainPlan": edited}})).await,
        &["spec.drainPlan: Forbidden: field is immutable after creation"],
    );
    refused(
        replace(&nm, "planned", |o| {
            o["spec"].as_object_mut().unwrap().remove("drainPlan");
        })
        .await,
        &["spec.drainPlan: Forbidden: field is immutable after creation"],
    );
    accepted(replace(&nm, "planned", |o| o["spec"]["reason"] = json!("same plan, new reason")).await);
    accepted(create(&nm, maintenance("unplanned", json!({}))).await);
    refused(patch(&nm, "unplanned", json!({"spec": {"drainPlan": plan()}})).await, &["immutable after creation"]);

    // nodeSelector: changes while the stored stage is Idle, also in the update leaving Idle.
    accepted(create(&nm, maintenance("moving", json!({}))).await);
    accepted(patch(&nm, "moving", json!({"spec": {"nodeSelector": selector("pool", "gpu")}})).await);
    accepted(
        patch(&nm, "moving", json!({"spec": {"stage": "Cordon", "nodeSelector": selector("pool", "batch")}})).await,
    );
    refused(
        patch(&nm, "moving", json!({"spec": {"nodeSelector": selector("pool", "general")}})).await,
        &["spec.nodeSelector: Forbidden: may change only while the stage is Idle (it is Cordon)"],
    );
    accepted(patch(&nm, "moving", json!({"spec": {"reason": "other fields may change", "paused": true}})).await);
}

/// The selector shapes of SPEC 3.2 that need no cluster state, in the webhook's words.
#[tokio::test]
async fn selector_shapes_hold_without_the_webhook() {
    let env = envtest_or_skip!(Options::default());
    let nm = api::<NodeMaintenance>(&env.client());
    let ndb = api::<NodeDisruptionBudget>(&env.client());
    let with_requirement = |list: &str, req: Value| json!({"nodeSelector": {"nodeSelectorTerms": [{list: [req]}]}});
    let expr = |req: Value| with_requirement("matchExpressions", req);
    let path = "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0]";

    refused(
        create(&nm, maintenance("no-terms", json!({"nodeSelector": {"nodeSelectorTerms": []}}))).await,
        &["spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one term"],
    );
    refused(
        create(&nm, maintenance("in", expr(json!({"key": "pool", "operator": "In"})))).await,
        &[&format!("{path}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")],
    );
    refused(
        create(&nm, maintenance("exists", expr(json!({"key": "pool", "operator": "Exists", "values": ["a"]})))).await,
        &[&format!("{path}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")],
    );
    refused(
        create(&nm, maintenance("gt-two", expr(json!({"key": "cores", "operator": "Gt", "values": ["1", "2"]})))).await,
        &["must be specified single value when `operator` is 'Lt' or 'Gt'"],
    );
    refused(
        create(&nm, maintenance("gt-text", expr(json!({"key": "cores", "operator": "Lt", "values": ["many"]})))).await,
        &[&format!("{path}.values"), "must be an integer for 'Gt' or 'Lt'"],
    );
    refused(
        create(&nm, maintenance("equals", expr(json!({"key": "pool", "operator": "Equals", "values": ["a"]})))).await,
        &[&format!("{path}.operator: Invalid value: \"Equals\": supported values: \"In\", \"NotIn\"")],
    );
    // Every mistake at once, as the webhook names them (SPEC 3.2).
    let many = json!({"nodeSelector": {"nodeSelectorTerms": [{
        "matchExpressions": [{"key": "pool", "operator": "Contains", "values": ["gen"]},
                             {"key": "zone", "operator": "In"},
                             {"key": "arch", "operator": "Exists", "values": ["amd64"]}],
        "matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["x"]}]}]}});
    let term = "spec.nodeSelector.nodeSelectorTerms[0]";
    refused(
        create(&nm, maintenance("many", many)).await,
        &[
            &format!("{term}.matchExpressions[0].operator"),
            &format!("{term}.matchExpressions[1].values"),
            &format!("{term}.matchExpressions[2].values"),
            &format!("{term}.matchFields[0].key"),
        ],
    );
    let field =
        |key: &str, op: &str| with_requirement("matchFields", json!({"key": key, "operator": op, "values": ["n1"]}));
    refused(
        create(&nm, maintenance("field-key", field("metadata.labels", "In"))).await,
        &["matchFields[0].key: Invalid value: \"metadata.labels\": supported values: \"metadata.name\""],
    );
    refused(
        create(&nm, maintenance("field-op", field("metadata.name", "Exists"))).await,
        &["matchFields[0].operator: Invalid value: \"Exists\": supported values: \"In\", \"NotIn\""],
    );
    accepted(create(&nm, maintenance("by-name", field("metadata.name", "NotIn"))).await);
    accepted(
        create(&nm, maintenance("gt-negative", expr(json!({"key": "cores", "operator": "Gt", "values": ["-4"]}))))
            .await,
    );
    let plan = json!({"drainPlan": [{"podType": "Default", "podPriority": 0,
                                     "podSelector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": ["x"]}]}}]});
    refused(
        create(&nm, maintenance("plan-selector", plan)).await,
        &["spec.drainPlan[0].podSelector.matchExpressions[0].values: Forbidden"],
    );
    let wait = json!({"waitForCompletion": {"podSelector": {"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]}}});
    refused(
        create(&nm, maintenance("wait-selector", wait)).await,
        &["spec.waitForCompletion.podSelector.matchExpressions[0].operator: Invalid value: \"Gt\": supported values"],
    );
    let mut bad = budget("selector", json!({"maxUnavailable": 1}));
    bad["spec"]["nodeSelector"] = expr(json!({"key": "pool", "operator": "NotIn"}))["nodeSelector"].clone();
    refused(create(&ndb, bad).await, &[&format!("{path}.values: Required value")]);
}

/// Rules and bounds added to a CRD with objects in store: an object that breaks them stays
/// updatable in what it does not break (ratcheting), while new objects are checked.
#[tokio::test]
async fn objects_stored_before_the_rules_stay_updatable() {
    let env = envtest_or_skip!(Options::default());
    let client = env.client();
    let ndb = api::<NodeDisruptionBudget>(&client);
    let nm = api::<NodeMaintenance>(&client);
    let both = || budget("", json!({"maxUnavailable": 1, "minAvailable": 1}));
    let with_name = |mut obj: Value, name: &str| {
        obj["metadata"]["name"] = json!(name);
        obj
    };

    set_crds(&client, false).await;
    wait_until("the rules are gone", || async {
        let probe = create(&ndb, with_name(both(), "probe")).await;
        probe.is_ok()
    })
    .await;
    let legacy = budget(
        "legacy",
        json!({"maxUnavailable": 1, "minAvailable": 1,
               "blackouts": [{"start": "2026-12-24T00:00:00Z", "end": "2026-12-23T00:00:00Z"}],
               "pauseRequests": [{"name": "Ops Team"}]}),
    );
    accepted(create(&ndb, legacy).await);
    accepted(create(&nm, maintenance("legacy", json!({"reason": "x".repeat(2000), "maxUnavailable": 0}))).await);

    set_crds(&client, true).await;
    wait_until("the rules are back", || async { create(&ndb, with_name(both(), "probe-2")).await.is_err() }).await;

    // Unrelated fields of the stored objects may change (another party's pause request beside a
    // name stored before names had to be subdomains) ...
    accepted(
        patch(
            &ndb,
            "legacy",
            json!({"spec": {"pauseRequests": [{"name": "Ops Team"}, {"name": "oncall", "reason": "incident"}]}}),
        )
        .await,
    );
    refused(
        patch(&ndb, "legacy", json!({"spec": {"pauseRequests": [{"name": "Ops Team"}, {"name": "Team B"}]}})).await,
        &["spec.pauseRequests[1].name", "a lowercase RFC 1123 subdomain"],
    );
    accepted(patch(&ndb, "legacy", json!({"metadata": {"labels": {"team": "platform"}}})).await);
    accepted(patch(&nm, "legacy", json!({"spec": {"stage": "Cordon"}})).await);
    // ... what they break may not be written anew.
    refused(patch(&nm, "legacy", json!({"spec": {"reason": "y".repeat(2000)}})).await, &["Too long"]);
    refused(
        patch(
            &ndb,
            "legacy",
            json!({"spec": {"blackouts": [{"start": "2026-12-24T00:00:00Z", "end": "2026-12-22T00:00:00Z"}]}}),
        )
        .await,
        &["must be after start"],
    );
}

/// Puts the generated CRDs (`rules`) or the same without any validation rule or bound, as they
/// were before issue 30, in place of the installed ones.
async fn set_crds(client: &Client, rules: bool) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for generated in [NodeMaintenance::crd(), NodeDisruptionBudget::crd()] {
        let name = generated.metadata.name.clone().expect("CRD name");
        let mut spec = serde_json::to_value(&generated.spec).expect("JSON");
        if !rules {
            strip_rules(&mut spec);
        }
        let mut stored = crds.get(&name).await.expect("CRD installed");
        stored.spec = serde_json::from_value(spec).expect("a CRD spec");
        crds.replace(&name, &PostParams::default(), &stored).await.unwrap_or_else(|e| panic!("CRD {name}: {e}"));
    }
}

fn strip_rules(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for key in ["x-kubernetes-validations", "maxItems", "maxLength", "maxProperties", "minItems", "minLength"] {
                map.remove(key);
            }
            map.values_mut().for_each(strip_rules);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_rules),
        _ => {}
    }
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
