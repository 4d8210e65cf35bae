//! An in-process stand-in for kube-apiserver, spoken to over plain HTTP on 127.0.0.1 by the
//! real `kube::Client`, for the faults a real apiserver cannot produce on demand (README,
//! "real-apiserver tier"): SubjectAccessReviews failing, hanging or slow; the server or a path
//! down (503) or dropping connections; watches ended or their history compacted (410) at a
//! chosen moment; evictions refused with a chosen answer; pods with any `creationTimestamp`;
//! and lifecycle.k8s.io EvictionRequests and Evictions (with the real API's validation), which
//! the real tier's v1.36.2 does not serve.
//!
//! So that the real controller and webhook run against it, it serves Nodes (+`/status`), Pods
//! (+`/eviction`), NodeMaintenances (+`/status`), PodDisruptionBudgets, Leases, events.k8s.io
//! Events (kube-runtime's recorder) and SubjectAccessReviews (answered with the fixtures' RBAC)
//! with the apiserver's wire format (`metav1.Status` errors, list `resourceVersion` and pagination,
//! watch streams with bookmarks and 410 Expired) and registry semantics (global
//! resourceVersion, `uid`, `creationTimestamp`, `generation`, optimistic concurrency, no-op
//! writes, finalizers, status subresource, server-side apply field ownership and conflicts).
//! Tests configure it and inspect it through [`ApiServer`].
//!
//! Not emulated (what a real apiserver does is tested on one, tests/envtest_*.rs):
//! authentication and authorization of the callers' own requests; RBAC beyond the fixtures';
//! admission (no webhooks, no CRD schema validation, defaulting or pruning); discovery and
//! OpenAPI beyond the group versions served and `/version`; protobuf/CBOR/Table output, HTTP/2
//! and TLS; `resourceVersion` on LIST (always the current state); real PodDisruptionBudgets
//! (refusals are configured per pod); graceful deletion other than the configured pod deletion
//! delay; garbage collection, namespaces; `deletecollection`; strategic merge beyond the merge
//! keys of conditions, addresses, ownerReferences, containers, volumes and the finalizers set;
//! SSA beyond per-field ownership; API priority and fairness. Refused with a 400 or 415 rather
//! than half-emulated, as the product sends none: field selectors, label selectors other than
//! `key=value` and `key`, JSON patch, streaming lists (`sendInitialEvents`), dry runs, core/v1
//! Events.
// See tests/support/mod.rs: unused helpers are found by hack/unused-test-support.sh.
#![cfg_attr(not(nm_unused_support), allow(dead_code))]

mod errors;
mod handlers;
mod lifecycle;
mod meta;
pub mod objects;
mod patch;
mod pods;
mod resources;
mod sar;
mod select;
mod server;
mod ssa;
mod store;
mod types;
mod watch;

use k8s_openapi::api::core::v1::{Node, Pod};
use resources::{NODE_MAINTENANCES, NODES, PODS, ResourceKind};
use serde::de::DeserializeOwned;
use serde_json::Value;
use server::{Inner, lock};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Why an eviction is refused (see [`ApiServer::refuse_eviction`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 429 TooManyRequests as the PodDisruptionBudget check answers it: message
    /// "Cannot evict pod as it would violate the pod's disruption budget." and a cause
    /// with reason `DisruptionBudget` naming the PDB.
    Pdb {
        /// Name of the blocking PodDisruptionBudget.
        pdb: String,
    },
    /// 429 TooManyRequests with this message and no DisruptionBudget cause, as an eviction
    /// interceptor (KubeVirt, Strimzi drain-cleaner) answers after starting its own move.
    Interceptor {
        /// The Status message.
        message: String,
    },
    /// Any other failure (e.g. 500) with this message.
    Error {
        /// HTTP status code.
        code: u16,
        /// The Status message.
        message: String,
    },
}

/// How SubjectAccessReviews fail (see [`ApiServer::sar_fail`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SarFailure {
    /// Answer normally.
    #[default]
    None,
    /// Answer with this HTTP status and a `metav1.Status` body.
    Status(u16),
    /// Never answer (until the server stops).
    Hang,
    /// Drop the connection without an answer.
    Close,
}

/// How the server (or a path prefix) is down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownMode {
    /// Answer 503 ServiceUnavailable.
    Unavailable,
    /// Drop the connection without an answer.
    DropConnection,
}

/// One request as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// HTTP method (`GET`, ...).
    pub method: String,
    /// Path.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// Kubernetes verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// API group (`""` = core), to compare with RBAC rules.
    pub group: String,
    /// Resource, `resource/subresource` for subresources (`nodes`, `pods/eviction`).
    pub resource: String,
    /// Namespace in the path.
    pub namespace: Option<String>,
    /// Object name in the path.
    pub name: Option<String>,
}

impl RequestRecord {
    /// `verb` on `resource`.
    pub fn is(&self, verb: &str, resource: &str) -> bool {
        self.verb == verb && self.resource == resource
    }
}

/// One eviction request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictionAttempt {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// `deleteOptions.preconditions.uid` of the Eviction body, if any.
    pub uid: Option<String>,
    /// HTTP status answered (201 on success).
    pub code: u16,
}

/// A running stand-in; stops when dropped.
pub struct ApiServer {
    inner: Arc<Inner>,
    addr: SocketAddr,
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.inner.shutdown.cancel();
    }
}

fn typed<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("stored object deserializes")
}

impl ApiServer {
    /// Starts a server on 127.0.0.1 with an ephemeral port; empty, no SAR rules.
    pub async fn start() -> ApiServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let inner = Arc::new(Inner::new());
        tokio::spawn(server::serve(listener, inner.clone()));
        ApiServer { inner, addr }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube config for this server with kube's defaults (no auth; client-side retry of
    /// 429/503/504 on, as in production).
    pub fn config(&self) -> kube::Config {
        let _ = rustls::crypto::ring::default_provider().install_default();
        kube::Config::new(self.url().parse().expect("URL parses"))
    }

    /// A kube client for this server with kube's built-in retry of 429/503/504 turned off
    /// (`default_retry = false`), so refusals and outages reach the caller at once. Use
    /// `kube::Client::try_from(server.config())` for the retrying default.
    pub fn client(&self) -> kube::Client {
        let mut config = self.config();
        config.default_retry = false;
        kube::Client::try_from(config).expect("kube client builds")
    }

    /// Loads every Node of a `kubectl get nodes -o yaml` List (or single Node documents);
    /// other kinds are skipped. Returns the number of nodes stored.
    pub fn load_nodes_yaml(&self, path: impl AsRef<Path>) -> usize {
        let text = std::fs::read_to_string(path.as_ref()).expect("nodes YAML readable");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("nodes YAML parses");
        let mut n = 0;
        for doc in docs {
            let items = doc.get("items").and_then(Value::as_array).cloned().unwrap_or_else(|| vec![doc]);
            for mut item in items.into_iter().filter(|i| i.get("kind").and_then(Value::as_str) == Some("Node")) {
                if let Some(m) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
                self.inner.store.put(&NODES, item);
                n += 1;
            }
        }
        n
    }

    fn put_typed<T: serde::Serialize + DeserializeOwned>(&self, res: &ResourceKind, obj: &T) -> T {
        typed(self.inner.store.put(res, serde_json::to_value(obj).expect("object serializes")))
    }

    /// Creates or replaces a Node (test-side: no admission, status included; fills `uid`
    /// and `creationTimestamp` when missing). Returns it as stored.
    pub fn put_node(&self, node: Node) -> Node {
        self.put_typed(&NODES, &node)
    }

    /// One Node.
    pub fn node(&self, name: &str) -> Option<Node> {
        self.inner.store.get(&NODES, "", name).map(typed)
    }

    /// Removes a Node at once (DELETED event), ignoring finalizers. `false` if missing.
    pub fn delete_node(&self, name: &str) -> bool {
        self.inner.store.remove(&NODES, "", name).is_some()
    }

    /// Creates or replaces a Pod (namespace `default` when unset). Returns it as stored.
    pub fn put_pod(&self, pod: Pod) -> Pod {
        self.put_typed(&PODS, &pod)
    }

    /// One Pod.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.inner.store.get(&PODS, namespace, name).map(typed)
    }

    /// Removes a Pod at once (as when its kubelet confirms termination). `false` if missing.
    pub fn delete_pod(&self, namespace: &str, name: &str) -> bool {
        self.inner.store.remove(&PODS, namespace, name).is_some()
    }

    /// Creates or replaces a NodeMaintenance as JSON (test-side: no admission; `status` is
    /// stored as given; `generation` starts at 1 and bumps when anything outside metadata
    /// and status changes). Returns it as stored.
    pub fn put_maintenance(&self, obj: Value) -> Value {
        self.inner.store.put(&NODE_MAINTENANCES, obj)
    }

    /// One NodeMaintenance.
    pub fn maintenance(&self, name: &str) -> Option<Value> {
        self.inner.store.get(&NODE_MAINTENANCES, "", name)
    }

    /// One Lease.
    pub fn lease(&self, namespace: &str, name: &str) -> Option<Value> {
        self.inner.store.get(&resources::LEASES, namespace, name)
    }

    /// Refuses every eviction of this pod with `refusal` until [`ApiServer::allow_eviction`].
    /// Terminal (Succeeded/Failed) and terminating pods are evicted regardless, as the
    /// apiserver does.
    pub fn refuse_eviction(&self, namespace: &str, name: &str, refusal: Refusal) {
        lock(&self.inner.pods).refusals.insert((namespace.to_owned(), name.to_owned()), refusal);
    }

    /// Lifts a refusal.
    pub fn allow_eviction(&self, namespace: &str, name: &str) {
        lock(&self.inner.pods).refusals.remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// Refuses every `DELETE` of this pod with `refusal` (an [`Refusal::Error`]: 409, 403...);
    /// evictions still delete it.
    pub fn refuse_delete(&self, namespace: &str, name: &str, refusal: Refusal) {
        lock(&self.inner.pods).delete_refusals.insert((namespace.to_owned(), name.to_owned()), refusal);
    }

    /// How long a deleted or evicted pod stays with a `deletionTimestamp` before it
    /// disappears (default zero: at once). A DELETE with `gracePeriodSeconds: 0` is always
    /// immediate.
    pub fn set_pod_deletion_delay(&self, delay: Duration) {
        lock(&self.inner.pods).deletion_delay = delay;
    }

    /// Accepted evictions (201), in order: (namespace, name, precondition uid or `""`).
    pub fn evictions(&self) -> Vec<(String, String, String)> {
        lock(&self.inner.pods)
            .attempts
            .iter()
            .filter(|a| a.code == 201)
            .map(|a| (a.namespace.clone(), a.name.clone(), a.uid.clone().unwrap_or_default()))
            .collect()
    }

    /// Every eviction request, refused or not, in order.
    pub fn eviction_attempts(&self) -> Vec<EvictionAttempt> {
        lock(&self.inner.pods).attempts.clone()
    }
}

mod control;
