//! Builders for the objects tests put into (or send to) the stand-in.

use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use std::path::PathBuf;

/// `tests/fixtures/nodes.yaml`: 3 control-plane nodes, 4 `pool=general` workers
/// (`worker-1`..`worker-4`), 2 `pool=gpu` nodes.
pub fn fixture_nodes_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nodes.yaml")
}

/// A Running pod `ns/name` on `node`, labelled `app=<name>`, with one container.
pub fn pod(ns: &str, name: &str, node: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": ns, "name": name, "labels": {"app": name}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }))
    .expect("pod JSON is valid")
}

/// A policy/v1 Eviction body for pod `name` with a UID precondition, as the apiserver
/// expects it (`deleteOptions`, camelCase).
pub fn eviction(name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": name},
        "deleteOptions": {"preconditions": {"uid": uid}},
    })
}

/// A SubjectAccessReview asking whether `user` (in `groups`, uid `uid-<user>`, extra
/// `scopes: [a, b]`) may `delete` node `name` (`""` = all nodes).
pub fn node_delete_review(user: &str, groups: &[&str], name: &str) -> SubjectAccessReview {
    serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {
            "user": user, "uid": format!("uid-{user}"), "groups": groups,
            "extra": {"scopes": ["a", "b"]},
            "resourceAttributes": {"verb": "delete", "group": "", "resource": "nodes", "name": name},
        },
    }))
    .expect("SubjectAccessReview JSON is valid")
}
