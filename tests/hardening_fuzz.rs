//! Fuzzing of the whole admission path (issue 7.1), in stable CI: AdmissionReview bytes go
//! through the real router in-process (`routes::router`: `review::decode`, then `mutate`,
//! `validate` or `validate_node` over a [`StaticView`] of the fixture nodes with a
//! [`StandaloneAuthorizer`], then `review::encode`), with no network in between.
//!
//! Inputs: arbitrary bytes; byte-level mutations of the recorded apiserver requests
//! (`tests/fixtures/apiserver/*.json`); structure-aware mutations of those requests (any
//! node of the JSON tree replaced, removed, duplicated or given a value of another type,
//! with generators that know the NodeMaintenance schema); and generated NodeMaintenance
//! specs posted as CREATE and UPDATE.
//!
//! Properties, for every input:
//! - nothing panics;
//! - HTTP 200 answers are `AdmissionReview`s in the request's `admission.k8s.io` version
//!   (else v1) whose `response.uid` is the request's uid; denials carry a SPEC 3 code;
//!   patches come only from `/mutate`, always with `patchType: JSONPatch`; warnings have no
//!   control characters;
//! - when the uid can be read (the body is JSON without duplicate keys and `request.uid` is
//!   a non-empty string) the answer is HTTP 200 with that uid; otherwise HTTP 400 with a
//!   `Status`, or 200 with a uid that the body spells out;
//! - every patch applies to `request.object` (RFC 6902, `json_patch`), and mutating the
//!   patched object again yields no patch (reinvocation idempotence, SPEC 3.1); a defaulted
//!   CREATE plan is in canonical order and holds the 12 default entries.
//!
//! Case counts: `NM_FUZZ_CASES` per property (default 300 in CI); `hack/fuzz.sh` runs the
//! long version. Executions are printed (`--nocapture`) and recorded in docs/reliability.md.

use axum::body::Body;
use base64::Engine;
use node_maintenance::admission::StandaloneAuthorizer;
use node_maintenance::api::{DrainPlanEntry, NodeMaintenance, first_out_of_order};
use node_maintenance::cluster::standalone::StaticView;
use node_maintenance::metrics::Metrics;
use node_maintenance::server::Readiness;
use node_maintenance::server::routes::{self, AppState};
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestRunner};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tower::ServiceExt;

// ---------------------------------------------------------------------------------------
// The system under test: the real router, called in-process.

struct Harness {
    rt: tokio::runtime::Runtime,
    app: axum::Router,
    executions: AtomicU64,
}

const ENDPOINTS: [&str; 3] = ["/mutate", "/validate", "/validate-node"];

fn fixtures_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Two maintenances in the view so that overlap warnings and `/validate-node` holders run.
fn active_maintenances() -> Vec<Arc<NodeMaintenance>> {
    let m = |name: &str, stage: &str, nodes: &[&str]| {
        Arc::new(
            serde_json::from_value::<NodeMaintenance>(json!({
                "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
                "metadata": {"name": name},
                "spec": {"stage": stage, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": nodes}]}]}}
            }))
            .expect("maintenance"),
        )
    };
    vec![m("kernel", "Drain", &["worker-1", "worker-2"]), m("firmware", "Cordon", &["gpu-1"])]
}

impl Harness {
    fn new() -> Self {
        let mut view = StaticView::load(&fixtures_dir().join("nodes.yaml")).expect("fixture nodes");
        view.maintenances = active_maintenances();
        let (metrics, _) = Metrics::new();
        let state = AppState {
            view: Arc::new(view),
            authz: Arc::new(StandaloneAuthorizer::new(["alice".to_string()], Vec::<String>::new())),
            metrics,
            readiness: Arc::new(Readiness::default()),
            max_review_time: Duration::from_secs(9),
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        Harness { rt, app: routes::router(state), executions: AtomicU64::new(0) }
    }

    /// POSTs `body` to `path` as `application/json`; returns the HTTP status and body.
    fn call(&self, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
        self.executions.fetch_add(1, Ordering::Relaxed);
        let req = axum::http::Request::post(format!("{path}?timeout=10s"))
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("request builds");
        self.rt.block_on(async {
            let resp = self.app.clone().oneshot(req).await.expect("infallible router");
            let status = resp.status().as_u16();
            let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
            (status, bytes.to_vec())
        })
    }

    /// Runs one input through `path` and checks every property; `Err` names the violation.
    fn check(&self, path: &str, body: &[u8]) -> Result<(), String> {
        let (status, answer) = self.call(path, body.to_vec());
        let readable = readable_uid(body);
        if status == 400 {
            let s: Value = serde_json::from_slice(&answer).map_err(|e| format!("400 body is not JSON: {e}"))?;
            if s["kind"] != "Status" || s["code"] != 400 {
                return Err(format!("400 without a Status: {s}"));
            }
            if let Some(uid) = readable {
                return Err(format!("uid {uid:?} was readable but the answer is HTTP 400: {s}"));
            }
            return Ok(());
        }
        if status != 200 {
            return Err(format!("unexpected HTTP {status}: {}", String::from_utf8_lossy(&answer)));
        }
        let review: Value =
            serde_json::from_slice(&answer).map_err(|e| format!("200 body is not JSON: {e}: {answer:?}"))?;
        check_review_shape(path, body, &review, readable.as_deref())?;
        if let Some(patch) = review["response"]["patch"].as_str() {
            self.check_patch(body, patch)?;
        }
        Ok(())
    }

    /// The patch applies to `request.object`, and mutating the result again changes nothing.
    fn check_patch(&self, body: &[u8], patch_b64: &str) -> Result<(), String> {
        let raw = base64::engine::general_purpose::STANDARD.decode(patch_b64).map_err(|e| format!("base64: {e}"))?;
        let patch: json_patch::Patch = serde_json::from_slice(&raw).map_err(|e| format!("not RFC 6902: {e}"))?;
        let mut review: Value = serde_json::from_slice(body).map_err(|e| format!("patched a non-JSON body? {e}"))?;
        let mut object = review["request"]["object"].clone();
        json_patch::patch(&mut object, &patch).map_err(|e| format!("patch does not apply: {e}; patch {patch:?}"))?;
        let before = review["request"]["object"].pointer("/spec/drainPlan").cloned();
        if review["request"]["operation"] == "CREATE"
            && object.pointer("/spec/drainPlan").cloned() != before
            && let Some(plan) = object.pointer("/spec/drainPlan").and_then(|p| p.as_array())
        {
            let entries: Vec<DrainPlanEntry> = plan
                .iter()
                .map(|e| serde_json::from_value(e.clone()))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("defaulted plan does not read: {e}"))?;
            if let Some(i) = first_out_of_order(&entries) {
                return Err(format!("defaulted plan is out of canonical order at {i}"));
            }
            if DrainPlanEntry::defaults().any(|d| !entries.contains(&d)) {
                return Err("defaulted plan lacks a default entry".into());
            }
        }
        review["request"]["object"] = object;
        review["request"]["uid"] = json!("reinvocation");
        let (status, answer) = self.call("/mutate", serde_json::to_vec(&review).expect("serializes"));
        let again: Value = serde_json::from_slice(&answer).map_err(|e| format!("second pass: {e}"))?;
        if status != 200 || again["response"]["allowed"] != true || again["response"].get("patch").is_some() {
            return Err(format!("mutating the patched object again is not a no-op: HTTP {status} {again}"));
        }
        Ok(())
    }
}

/// The request's uid when a strict reading finds it: the body is JSON without duplicate
/// keys (at any depth) and `request.uid` is a non-empty string.
fn readable_uid(body: &[u8]) -> Option<String> {
    let Strict(v) = serde_json::from_slice(body).ok()?;
    v.get("request")?.get("uid")?.as_str().filter(|u| !u.is_empty()).map(str::to_owned)
}

fn check_review_shape(path: &str, body: &[u8], review: &Value, readable: Option<&str>) -> Result<(), String> {
    if review["kind"] != "AdmissionReview" {
        return Err(format!("not an AdmissionReview: {review}"));
    }
    let sent = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["apiVersion"].as_str().map(str::to_owned));
    let want_version = sent.filter(|v| v.starts_with("admission.k8s.io/")).unwrap_or("admission.k8s.io/v1".into());
    if readable.is_some() && review["apiVersion"] != want_version.as_str() {
        return Err(format!("answered in {} to a {want_version} review", review["apiVersion"]));
    }
    let r = &review["response"];
    let uid = r["uid"].as_str().ok_or_else(|| format!("no response.uid: {review}"))?;
    match readable {
        Some(want) if uid != want => return Err(format!("uid {uid:?} answered to request {want:?}")),
        None if uid.is_empty() || !body.windows(uid.len()).any(|w| w == uid.as_bytes()) => {
            return Err(format!("uid {uid:?} does not come from the request"));
        }
        _ => {}
    }
    let allowed = r["allowed"].as_bool().ok_or("allowed is not a boolean")?;
    if !allowed {
        let code = r["status"]["code"].as_u64().ok_or("denial without status.code")?;
        if ![400, 403, 422, 500, 503].contains(&code) {
            return Err(format!("denial code {code} is not a SPEC 3 code"));
        }
        if r["status"]["message"].as_str().is_none_or(str::is_empty) {
            return Err("denial without a message".into());
        }
    }
    match (r.get("patch"), r.get("patchType")) {
        (None, None) => {}
        (Some(_), Some(t)) if t == "JSONPatch" && path == "/mutate" && allowed => {}
        (p, t) => return Err(format!("patch {p:?} with patchType {t:?} from {path} (allowed {allowed})")),
    }
    for w in r["warnings"].as_array().into_iter().flatten() {
        let w = w.as_str().ok_or("warning is not a string")?;
        if w.chars().any(char::is_control) {
            return Err(format!("warning with a control character: {w:?}"));
        }
    }
    Ok(())
}

/// A JSON value that refuses duplicate object keys (serde_json's `Value` keeps the last).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Strict;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("JSON")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Strict, E> {
                Ok(Strict(Value::Bool(b)))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Strict, E> {
                Ok(Strict(n.into()))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Strict, E> {
                Ok(Strict(n.into()))
            }
            fn visit_f64<E>(self, n: f64) -> Result<Strict, E> {
                Ok(Strict(n.into()))
            }
            fn visit_str<E>(self, s: &str) -> Result<Strict, E> {
                Ok(Strict(Value::String(s.into())))
            }
            fn visit_unit<E>(self) -> Result<Strict, E> {
                Ok(Strict(Value::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
                let mut out = Vec::new();
                while let Some(Strict(v)) = seq.next_element()? {
                    out.push(v);
                }
                Ok(Strict(Value::Array(out)))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
                let mut out = Map::new();
                while let Some((k, Strict(v))) = map.next_entry::<String, Strict>()? {
                    if out.insert(k.clone(), v).is_some() {
                        return Err(serde::de::Error::custom(format!("duplicate key {k:?}")));
                    }
                }
                Ok(Strict(Value::Object(out)))
            }
        }
        d.deserialize_any(V)
    }
}

// ---------------------------------------------------------------------------------------
// Inputs.

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = fixtures_dir().join("apiserver");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), std::fs::read(dir.join(&n)).expect("fixture"))).collect()
}

/// The endpoint a fixture was recorded for, most of the time; any endpoint otherwise.
fn endpoint_for(name: &str, pick: u8) -> &'static str {
    let recorded = if name.ends_with("-validate-node.json") {
        "/validate-node"
    } else if name.ends_with("-mutate.json") {
        "/mutate"
    } else {
        "/validate"
    };
    if pick < 200 { recorded } else { ENDPOINTS[usize::from(pick) % 3] }
}

const STRINGS: &[&str] = &[
    "",
    "Idle",
    "Cordon",
    "Drain",
    "Complete",
    "Default",
    "DaemonSet",
    "Static",
    "In",
    "NotIn",
    "Exists",
    "DoesNotExist",
    "Gt",
    "Lt",
    "metadata.name",
    "metadata.labels",
    "pool",
    "gpu",
    "general",
    "worker-1",
    "gpu-1",
    "node-role.kubernetes.io/control-plane",
    "example.com/app",
    "Bad Key",
    "a/b/c",
    "~1/~0",
    "status",
    "CREATE",
    "UPDATE",
    "DELETE",
    "CONNECT",
    "admission.k8s.io/v1",
    "admission.k8s.io/v1beta1",
    "AdmissionReview",
    "nodemaintenance.k8s.io",
    "NodeMaintenance",
    "Node",
    "v1alpha1",
    "system:masters",
    "alice",
    "1000",
    "-1",
    "9223372036854775808",
    "\u{0}",
    "line\nbreak\u{7}",
    "\u{202e}rtl",
    "é漢字🙂",
];

const KEYS: &[&str] = &[
    "spec",
    "status",
    "metadata",
    "name",
    "nodeSelector",
    "nodeSelectorTerms",
    "matchExpressions",
    "matchFields",
    "key",
    "operator",
    "values",
    "stage",
    "drainPlan",
    "podPriority",
    "podType",
    "podSelector",
    "matchLabels",
    "reason",
    "stageStatuses",
    "unschedulable",
    "uid",
    "operation",
    "subResource",
    "object",
    "oldObject",
    "userInfo",
    "groups",
    "username",
    "kind",
    "group",
    "version",
    "apiVersion",
    "request",
    "dryRun",
    "deletionTimestamp",
    "x",
];

const INTS: &[i64] = &[
    0,
    1,
    -1,
    1000,
    5000,
    1_000_000_000,
    2_000_000_000,
    2_000_001_000,
    i32::MAX as i64,
    i32::MIN as i64,
    i32::MAX as i64 + 1,
    i64::MAX,
    i64::MIN,
];

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => prop::sample::select(STRINGS).prop_map(str::to_owned),
        2 => "\\PC{0,16}",
        1 => (1usize..3000).prop_map(|n| "x".repeat(n)),
    ]
}

fn arb_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop::sample::select(INTS).prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        prop::sample::select(&[1.5f64, -0.0, 1e300, 1e9][..]).prop_map(Value::from),
        arb_string().prop_map(Value::String),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    arb_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS).prop_map(str::to_owned), inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn arb_requirement(field: bool) -> impl Strategy<Value = Value> {
    let keys: &'static [&'static str] =
        if field { &["metadata.name", "metadata.namespace"] } else { &["pool", "zone", "cpu", "Bad Key", "a/b/c"] };
    let values = prop::collection::vec(
        prop::sample::select(&["gpu", "general", "worker-1", "gpu-2", "8", "x y", ""][..]).prop_map(Value::from),
        0..4,
    );
    (
        prop::sample::select(keys),
        prop::sample::select(&["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Like"][..]),
        prop::option::of(values),
    )
        .prop_map(|(k, op, vs)| {
            let mut r = json!({"key": k, "operator": op});
            if let Some(vs) = vs {
                r["values"] = Value::Array(vs);
            }
            r
        })
}

fn arb_node_selector() -> impl Strategy<Value = Value> {
    let term = (
        prop::option::of(prop::collection::vec(arb_requirement(false), 0..3)),
        prop::option::of(prop::collection::vec(arb_requirement(true), 0..2)),
    )
        .prop_map(|(e, f)| {
            let mut t = json!({});
            if let Some(e) = e {
                t["matchExpressions"] = Value::Array(e);
            }
            if let Some(f) = f {
                t["matchFields"] = Value::Array(f);
            }
            t
        });
    prop::collection::vec(term, 0..3).prop_map(|terms| json!({"nodeSelectorTerms": terms}))
}

fn arb_label_selector() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({})),
        Just(json!({"matchLabels": {"app": "postgres"}})),
        Just(json!({"matchLabels": {"app": "web", "tier": "x"}})),
        Just(json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]})),
        Just(json!({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["a"]}]})),
        Just(json!({"matchLabels": {"Bad Key": "v"}})),
    ]
}

fn arb_plan_entry() -> impl Strategy<Value = Value> {
    let priority = prop_oneof![
        3 => prop::sample::select(INTS).prop_map(Value::from),
        1 => (-10i64..10_000).prop_map(Value::from),
        1 => arb_leaf(),
    ];
    let kind = prop_oneof![
        6 => prop::sample::select(&["Default", "DaemonSet", "Static"][..]).prop_map(Value::from),
        1 => arb_leaf(),
    ];
    (prop::option::of(priority), prop::option::of(kind), prop::option::weighted(0.3, arb_label_selector())).prop_map(
        |(p, t, s)| {
            let mut e = json!({});
            if let Some(p) = p {
                e["podPriority"] = p;
            }
            if let Some(t) = t {
                e["podType"] = t;
            }
            if let Some(s) = s {
                e["podSelector"] = s;
            }
            e
        },
    )
}

/// A drainPlan: random entries, sometimes sorted canonically (so that valid plans are common).
fn arb_plan() -> impl Strategy<Value = Value> {
    (prop::collection::vec(arb_plan_entry(), 0..16), any::<bool>(), any::<bool>()).prop_map(|(mut es, sort, dup)| {
        if sort {
            let key = |e: &Value| {
                let t = match e["podType"].as_str() {
                    Some("Default") => 0,
                    Some("DaemonSet") => 1,
                    _ => 2,
                };
                (t, e["podPriority"].as_i64().unwrap_or(0), e.get("podSelector").is_none())
            };
            es.sort_by_key(key);
        }
        if dup && !es.is_empty() {
            es.push(es[0].clone());
        }
        Value::Array(es)
    })
}

fn arb_spec() -> impl Strategy<Value = Value> {
    (
        prop::option::weighted(0.9, arb_node_selector()),
        prop::option::of(prop::sample::select(&["Idle", "Cordon", "Drain", "Complete", "Paused"][..])),
        prop::option::weighted(0.7, arb_plan()),
        prop::option::weighted(0.3, arb_string()),
    )
        .prop_map(|(sel, stage, plan, reason)| {
            let mut s = json!({});
            if let Some(sel) = sel {
                s["nodeSelector"] = sel;
            }
            if let Some(st) = stage {
                s["stage"] = json!(st);
            }
            if let Some(p) = plan {
                s["drainPlan"] = p;
            }
            if let Some(r) = reason {
                s["reason"] = json!(r);
            }
            s
        })
}

/// A value shaped for the key it replaces, when the schema knows the key; else any JSON.
fn schema_value(key: &str, choice: u8, spec: Value, plan: Value, selector: Value, any: Value) -> Value {
    match (key, choice % 4) {
        (_, 0) => any,
        ("spec", _) => spec,
        ("drainPlan", _) => plan,
        ("nodeSelector", _) => selector,
        ("podSelector", _) => arb_label_selector_fixed(choice),
        ("stage", _) => json!(["Idle", "Cordon", "Drain", "Complete", "Rebooting"][usize::from(choice) % 5]),
        ("operation", _) => json!(["CREATE", "UPDATE", "DELETE", "CONNECT"][usize::from(choice) % 4]),
        ("subResource", _) => json!(["status", "scale", ""][usize::from(choice) % 3]),
        ("unschedulable", _) => json!(choice.is_multiple_of(2)),
        _ => any,
    }
}

fn arb_label_selector_fixed(choice: u8) -> Value {
    [json!({}), json!({"matchLabels": {"app": "postgres"}}), json!({"matchLabels": {"Bad Key": "v"}})]
        [usize::from(choice) % 3]
        .clone()
}

/// Every JSON pointer of `v` (pre-order), the root included.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                pointers(c, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// One structure-aware mutation.
#[derive(Clone, Debug)]
struct Mutation {
    at: prop::sample::Index,
    op: u8,
    choice: u8,
    key: &'static str,
    value: Value,
    spec: Value,
    plan: Value,
    selector: Value,
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    (
        any::<prop::sample::Index>(),
        0u8..6,
        any::<u8>(),
        prop::sample::select(KEYS),
        arb_json(),
        arb_spec(),
        arb_plan(),
        arb_node_selector(),
    )
        .prop_map(|(at, op, choice, key, value, spec, plan, selector)| Mutation {
            at,
            op,
            choice,
            key,
            value,
            spec,
            plan,
            selector,
        })
}

fn apply_mutation(doc: &mut Value, m: Mutation) {
    let mut ptrs = Vec::new();
    pointers(doc, String::new(), &mut ptrs);
    let ptr = ptrs[m.at.index(ptrs.len())].clone();
    let (parent_ptr, last) = match ptr.rsplit_once('/') {
        Some((p, l)) => (p.to_owned(), Some(l.replace("~1", "/").replace("~0", "~"))),
        None => (String::new(), None),
    };
    let key = last.clone().unwrap_or_default();
    let replacement = schema_value(&key, m.choice, m.spec, m.plan, m.selector, m.value.clone());
    match m.op {
        // Replace this node.
        0 | 1 => {
            if let Some(t) = doc.pointer_mut(&ptr) {
                *t = replacement;
            }
        }
        // Remove it from its parent.
        2 => match (doc.pointer_mut(&parent_ptr), last) {
            (Some(Value::Object(o)), Some(k)) => {
                o.remove(&k);
            }
            (Some(Value::Array(a)), Some(i)) => {
                if let Ok(i) = i.parse::<usize>()
                    && i < a.len()
                {
                    a.remove(i);
                }
            }
            _ => {}
        },
        // Add a member or element.
        3 => match doc.pointer_mut(&ptr) {
            Some(Value::Object(o)) => {
                o.insert(m.key.to_owned(), schema_value(m.key, m.choice, json!({}), json!([]), json!({}), m.value));
            }
            Some(Value::Array(a)) => {
                let at = usize::from(m.choice) % (a.len() + 1);
                a.insert(at, m.value);
            }
            Some(other) => *other = m.value,
            None => {}
        },
        // Duplicate an array element, or wrap the node in an array.
        4 => match doc.pointer_mut(&ptr) {
            Some(Value::Array(a)) if !a.is_empty() => {
                let e = a[usize::from(m.choice) % a.len()].clone();
                a.push(e);
            }
            Some(other) => *other = Value::Array(vec![other.take()]),
            None => {}
        },
        // Copy this subtree over another node.
        _ => {
            let sub = doc.pointer(&ptr).cloned().unwrap_or(Value::Null);
            let other = ptrs[usize::from(m.choice) % ptrs.len()].clone();
            if !other.starts_with(&ptr)
                && let Some(t) = doc.pointer_mut(&other)
            {
                *t = sub;
            }
        }
    }
}

/// Byte-level edits of a serialized fixture.
#[derive(Clone, Debug)]
enum ByteEdit {
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Delete(prop::sample::Index, usize),
    Truncate(prop::sample::Index),
}

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b"\\",
    b",",
    b":",
    b"null",
    b"\"\\ud800\"",
    b"\xff\xfe",
    b"\xc3",
    b"1e999",
    b"-0",
    b"\"uid\":\"dup\",",
    b"\x00",
];

fn arb_byte_edit() -> impl Strategy<Value = ByteEdit> {
    prop_oneof![
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| ByteEdit::Flip(i, b)),
        (
            any::<prop::sample::Index>(),
            prop_oneof![
                prop::sample::select(TOKENS).prop_map(|t| t.to_vec()),
                prop::collection::vec(any::<u8>(), 1..8),
                (1usize..300).prop_map(|n| b"[".repeat(n)),
            ]
        )
            .prop_map(|(i, b)| ByteEdit::Insert(i, b)),
        (any::<prop::sample::Index>(), 1usize..64).prop_map(|(i, n)| ByteEdit::Delete(i, n)),
        any::<prop::sample::Index>().prop_map(ByteEdit::Truncate),
    ]
}

fn apply_byte_edit(b: &mut Vec<u8>, e: ByteEdit) {
    if b.is_empty() {
        return;
    }
    match e {
        ByteEdit::Flip(i, x) => {
            let i = i.index(b.len());
            b[i] ^= x;
        }
        ByteEdit::Insert(i, bytes) => {
            let i = i.index(b.len() + 1);
            b.splice(i..i, bytes);
        }
        ByteEdit::Delete(i, n) => {
            let i = i.index(b.len());
            let end = (i + n).min(b.len());
            b.drain(i..end);
        }
        ByteEdit::Truncate(i) => b.truncate(i.index(b.len())),
    }
}

// ---------------------------------------------------------------------------------------
// The properties.

fn cases() -> u32 {
    std::env::var("NM_FUZZ_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(300)
}

fn runner(name: &str) -> TestRunner {
    let mut config = Config::with_cases(cases());
    config.failure_persistence =
        Some(Box::new(FileFailurePersistence::Direct("tests/hardening_fuzz.proptest-regressions")));
    config.source_file = Some("tests/hardening_fuzz.rs");
    config.test_name = Some(Box::leak(name.to_owned().into_boxed_str()));
    config.max_shrink_iters = 2000;
    TestRunner::new(config)
}

fn report(name: &str, h: &Harness) {
    println!("fuzz {name}: {} executions, 0 failures", h.executions.load(Ordering::Relaxed));
}

fn run<S: Strategy>(name: &str, strategy: S, f: impl Fn(&Harness, S::Value) -> Result<(), String>)
where
    S::Value: std::fmt::Debug,
{
    let h = Harness::new();
    let result = runner(name).run(&strategy, |input| f(&h, input).map_err(TestCaseError::fail));
    if let Err(e) = result {
        panic!("{name}: {e}");
    }
    report(name, &h);
}

#[test]
fn arbitrary_bytes_never_break_the_admission_path() {
    run("arbitrary_bytes", (prop::collection::vec(any::<u8>(), 0..600), 0usize..3), |h, (bytes, ep)| {
        h.check(ENDPOINTS[ep], &bytes)
    });
}

#[test]
fn byte_mutations_of_the_recorded_requests() {
    let fx = fixtures();
    let n = fx.len();
    run("byte_mutations", (0..n, any::<u8>(), prop::collection::vec(arb_byte_edit(), 1..6)), |h, (i, pick, edits)| {
        let (name, body) = &fx[i];
        let mut body = body.clone();
        for e in edits {
            apply_byte_edit(&mut body, e);
        }
        h.check(endpoint_for(name, pick), &body)
    });
}

#[test]
fn structure_aware_mutations_of_the_recorded_requests() {
    let fx = fixtures();
    let n = fx.len();
    run(
        "structure_mutations",
        (0..n, any::<u8>(), prop::collection::vec(arb_mutation(), 1..4)),
        |h, (i, pick, muts)| {
            let (name, body) = &fx[i];
            let mut doc: Value = serde_json::from_slice(body).expect("fixture JSON");
            for m in muts {
                apply_mutation(&mut doc, m);
            }
            h.check(endpoint_for(name, pick), &serde_json::to_vec(&doc).expect("serializes"))
        },
    );
}

#[test]
fn generated_specs_on_create_update_and_delete() {
    let create: Value =
        serde_json::from_slice(&std::fs::read(fixtures_dir().join("apiserver/01-create-minimal-mutate.json")).unwrap())
            .unwrap();
    let update: Value = serde_json::from_slice(
        &std::fs::read(fixtures_dir().join("apiserver/05-update-cordon-to-drain-validate.json")).unwrap(),
    )
    .unwrap();
    let delete: Value = serde_json::from_slice(
        &std::fs::read(fixtures_dir().join("apiserver/18-delete-by-admin-validate.json")).unwrap(),
    )
    .unwrap();
    let users = [
        json!({"username": "admin", "groups": ["system:masters"]}),
        json!({"username": "alice", "groups": ["ops"]}),
        json!({"username": "bob", "groups": ["dev"]}),
    ];
    run(
        "generated_specs",
        (0u8..3, arb_spec(), arb_spec(), 0usize..3, 0usize..2),
        |h, (op, new_spec, old_spec, user, ep)| {
            let mut review = match op {
                0 => create.clone(),
                1 => update.clone(),
                _ => delete.clone(),
            };
            let r = &mut review["request"];
            r["userInfo"] = users[user].clone();
            if !r["object"].is_null() {
                r["object"]["spec"] = new_spec;
            }
            if !r["oldObject"].is_null() {
                r["oldObject"]["spec"] = old_spec;
            }
            h.check(ENDPOINTS[ep], &serde_json::to_vec(&review).expect("serializes"))
        },
    );
}

/// Inputs that once broke a property, each kept with its fix (docs/reliability.md).
#[test]
fn regressions() {
    let h = Harness::new();
    let cases: &[(&str, &[u8])] = &[
        // The uid is readable although apiVersion is not a string.
        ("/validate", br#"{"apiVersion":5,"kind":"AdmissionReview","request":{"uid":"u-1"}}"#),
    ];
    for (path, body) in cases {
        h.check(path, body).unwrap_or_else(|e| panic!("{path} {}: {e}", String::from_utf8_lossy(body)));
    }
}
