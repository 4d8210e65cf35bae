//! Replays every recorded kube-apiserver request, unchanged and with its recorded headers,
//! over real HTTPS to a standalone server, and checks the answers SPEC 3 requires
//! (`tests/fixtures/expect-standalone.json`), including the object after applying the patch.

mod support;

use base64::Engine;
use serde_json::{Value, json};
use support::fixtures::{self, Fixture};

async fn post(server: &support::webhook::Server, client: &reqwest::Client, f: &Fixture) -> Value {
    let mut req = client.post(server.url(&f.path)).body(f.body.clone());
    for (k, v) in &f.headers {
        req = req.header(k, v);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{}: {e}", f.name));
    assert_eq!(resp.status(), 200, "{}", f.name);
    assert_eq!(resp.headers()["content-type"], "application/json");
    resp.json().await.unwrap()
}

fn plan_of(obj: &Value) -> Value {
    let plan = obj["spec"]["drainPlan"].as_array().cloned().unwrap_or_default();
    Value::Array(
        plan.iter()
            .map(|e| {
                let sel = e.get("podSelector").map(|s| {
                    // The expectation file writes selectors the way Python's json.dumps does.
                    let m = s["matchLabels"].as_object().unwrap();
                    let inner: Vec<String> = m.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect();
                    json!(format!("{{\"matchLabels\": {{{}}}}}", inner.join(", ")))
                });
                json!([e["podPriority"], e["podType"], sel.unwrap_or(Value::Null)])
            })
            .collect(),
    )
}

fn check(f: &Fixture, review: &Value) {
    let name = &f.name;
    let exp = &f.expect;
    let req = f.request();
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{name}");
    assert_eq!(review["kind"], "AdmissionReview", "{name}");
    let resp = &review["response"];
    assert_eq!(resp["uid"], req["uid"], "{name}: uid echoed");
    assert_eq!(resp.get("patch").is_some(), resp.get("patchType").is_some(), "{name}: patch and patchType together");
    if f.path.starts_with("/validate") {
        assert!(resp.get("patch").is_none(), "{name}: a validating endpoint never patches");
    }
    if exp.get("any") == Some(&json!(true)) {
        return;
    }
    assert_eq!(resp["allowed"], exp["allowed"], "{name}: {resp}");
    let message = resp["status"]["message"].as_str().unwrap_or_default().to_lowercase();
    if exp["allowed"] == json!(false) {
        let code = resp["status"]["code"].as_u64().unwrap();
        if let Some(codes) = exp.get("code_in") {
            assert!(codes.as_array().unwrap().contains(&json!(code)), "{name}: code {code}");
        }
        if let Some(codes) = exp.get("code_not") {
            assert!(!codes.as_array().unwrap().contains(&json!(code)), "{name}: code {code}");
        }
        for s in exp["msg_all"].as_array().into_iter().flatten() {
            assert!(message.contains(&s.as_str().unwrap().to_lowercase()), "{name}: message lacks {s}: {message}");
        }
    }
    let warnings: Vec<String> =
        resp["warnings"].as_array().into_iter().flatten().map(|w| w.as_str().unwrap().to_lowercase()).collect();
    for w in &warnings {
        assert!(w.len() <= 120 && !w.chars().any(char::is_control), "{name}: warning {w:?}");
    }
    for rx in exp["warn_re"].as_array().into_iter().flatten() {
        let rx = rx.as_str().unwrap();
        // The only pattern used: a word "all"/"every" followed later by "node(s)".
        assert_eq!(rx, r"\b(all|every)\b.*\bnodes?\b");
        assert!(
            warnings.iter().any(|w| (w.contains("all ") || w.contains("every ")) && w.contains("node")),
            "{name}: no warning matches {rx}: {warnings:?}"
        );
    }
    if exp.get("plan").is_some() || exp.get("stage").is_some() {
        let mut obj = req["object"].clone();
        if let Some(p) = resp["patch"].as_str() {
            let ops: json_patch::Patch =
                serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(p).unwrap()).unwrap();
            json_patch::patch(&mut obj, &ops).unwrap_or_else(|e| panic!("{name}: patch does not apply: {e}"));
        }
        if let Some(plan) = exp.get("plan") {
            assert_eq!(&plan_of(&obj), plan, "{name}: drainPlan after patch");
        }
        if let Some(stage) = exp.get("stage") {
            assert_eq!(&obj["spec"]["stage"], stage, "{name}: stage after patch");
        }
    }
}

#[tokio::test]
async fn every_recorded_request_gets_the_answer_spec_3_requires() {
    let server = support::webhook::start(&[]).await;
    let client = server.client();
    let all = fixtures::standalone();
    assert_eq!(all.len(), 29, "every fixture with a standalone expectation is replayed");
    for f in &all {
        let review = post(&server, &client, f).await;
        check(f, &review);
    }
}

/// The mutating response of the minimal create, byte for byte apart from the uid-free
/// ordering serde gives: checks the documented wire format (base64 patch, patchType).
#[tokio::test]
async fn wire_format_golden_mutate_and_deny() {
    let server = support::webhook::start(&[]).await;
    let client = server.client();
    let all = fixtures::standalone();
    for (fixture, golden) in [
        ("01-create-minimal-mutate.json", "01-create-minimal-mutate.response.json"),
        ("06-update-drain-to-cordon-validate.json", "06-update-drain-to-cordon-validate.response.json"),
        ("13-create-by-bob-denied-validate.json", "13-create-by-bob-denied-validate.response.json"),
        ("14-create-selects-all-nodes-validate.json", "14-create-selects-all-nodes-validate.response.json"),
        ("11-metadata-only-by-bob-validate.json", "11-metadata-only-by-bob-validate.response.json"),
    ] {
        let f = all.iter().find(|f| f.name == fixture).unwrap();
        let got = post(&server, &client, f).await;
        let path = support::webhook::fixtures_dir().join("../golden").join(golden);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        }
        let want: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!("{}: {e} (run with UPDATE_GOLDEN=1 to create it, then review it)", path.display())
        }))
        .unwrap();
        assert_eq!(got, want, "{fixture}: response differs from {golden}");
    }
}
