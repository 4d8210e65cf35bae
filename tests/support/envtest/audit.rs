//! The apiserver's audit log, to see which requests a client under test sent as the apiserver
//! received them (issue 24: what the stand-in used to record): the bodies of
//! SubjectAccessReviews and Evictions, and who wrote which Node (not its status: heartbeats).
//! Nothing else is logged, so it costs the other tests next to nothing.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// Each event logged once its response is complete.
const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Request
  resources:
  - group: authorization.k8s.io
    resources: [subjectaccessreviews]
  - group: ''
    resources: [pods/eviction]
- level: Metadata
  verbs: [patch, update, delete]
  resources:
  - group: ''
    resources: [nodes]
- level: None
";

/// Writes the policy into `dir`; the kube-apiserver flags that turn the log on (blocking mode:
/// an event is written before the apiserver goes on) and the log's path.
pub fn flags(dir: &Path) -> (Vec<String>, PathBuf) {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, POLICY).expect("audit policy written");
    let log = dir.join("audit.log");
    let flags = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-mode=blocking".into(),
    ];
    (flags, log)
}

/// Every event (`audit.k8s.io/v1` Event: `verb`, `objectRef`, `userAgent`,
/// `responseStatus`, `requestObject` where logged, `requestReceivedTimestamp`...) in the audit
/// log at `log`, in the order they were logged; empty while there is no log.
pub fn events(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()).collect()
}

/// One eviction request as the apiserver logged it.
#[derive(Clone, Debug)]
pub struct Eviction {
    /// The pod's name.
    pub pod: String,
    /// The body's `deleteOptions.preconditions.uid`, or `""`.
    pub uid: String,
    /// The response's HTTP status: 201 when accepted. A client that went away mid-request is
    /// logged with 504 ("context canceled") even when the apiserver went on and evicted the pod.
    pub code: u16,
}

/// Every eviction request in `events`, whatever its answer, in the order the apiserver
/// received them.
pub fn evictions(events: &[Value]) -> Vec<Eviction> {
    let mut all: Vec<&Value> = events.iter().filter(|e| e["objectRef"]["subresource"] == "eviction").collect();
    all.sort_by_key(|e| e["requestReceivedTimestamp"].as_str().unwrap_or_default().to_owned());
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    all.iter()
        .map(|e| Eviction {
            pod: text(&e["objectRef"]["name"]),
            uid: text(&e["requestObject"]["deleteOptions"]["preconditions"]["uid"]),
            code: e["responseStatus"]["code"].as_u64().and_then(|c| u16::try_from(c).ok()).unwrap_or_default(),
        })
        .collect()
}

/// The evictions in `events` the apiserver accepted (201), in the order it received them:
/// (pod name, the body's `deleteOptions.preconditions.uid` or `""`).
pub fn accepted_evictions(events: &[Value]) -> Vec<(String, String)> {
    evictions(events).into_iter().filter(|e| e.code == 201).map(|e| (e.pod, e.uid)).collect()
}
