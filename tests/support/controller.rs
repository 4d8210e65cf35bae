//! Runs the real controller (caches, planner, reconcile, effects) against the apiserver
//! stand-in, with fast requeues, and stops it on demand (to test restarts).

use super::apiserver::ApiServer;
use node_maintenance::cluster::cache::ClusterCache;
use node_maintenance::controller::context::ControllerOptions;
use node_maintenance::controller::run::{RunError, RunOptions, run_controller};
use node_maintenance::metrics::Metrics;
use node_maintenance::metrics::state::StateMetrics;
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A running controller; [`Running::stop`] ends it (like a crash or a lost Lease).
pub struct Running {
    /// The controller's metric families (reconcile counts, errors).
    pub metrics: Metrics,
    registry: prometheus_client::registry::Registry,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), RunError>>,
    cache_task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// The `/metrics` text the controller would serve.
    pub fn metrics_text(&self) -> String {
        node_maintenance::metrics::encode(&self.registry)
    }

    /// Stops the controller and its caches and waits for them to end; a controller asked to
    /// stop ends without error.
    pub async fn stop(self) {
        self.stop.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        self.cache_task.abort();
        assert!(matches!(ended, Ok(Ok(Ok(())))), "the controller ends cleanly when stopped: {ended:?}");
    }

    /// Kills it at once, mid-reconcile if it is in one.
    pub fn kill(self) {
        self.task.abort();
        self.cache_task.abort();
    }
}

/// Test pacing: reconcile every 100 ms while busy.
pub fn options(skip_daemonset_pods: bool) -> ControllerOptions {
    ControllerOptions {
        skip_daemonset_pods,
        busy_requeue: Duration::from_millis(100),
        idle_requeue: Duration::from_secs(2),
        ..ControllerOptions::default()
    }
}

/// Starts the caches and the controller against `api`.
pub async fn start(api: &ApiServer, controller: ControllerOptions) -> Running {
    start_with(api.client(), controller).await
}

/// Starts the caches and the controller with `client` (any apiserver).
pub async fn start_with(client: kube::Client, controller: ControllerOptions) -> Running {
    // The controller's logs, shown with a failing test's output (RUST_LOG overrides).
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "node_maintenance=info".into());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
    let (cache, drive) = ClusterCache::start(client.clone());
    let cache_task = tokio::spawn(drive);
    cache.wait_synced().await;
    let stop = CancellationToken::new();
    let (metrics, mut registry) = Metrics::new();
    // The state metrics are read from the caches at scrape time, as `serve` registers them.
    registry.register_collector(Box::new(StateMetrics::new(cache.clone())));
    let run = RunOptions {
        lease_name: "unused".into(),
        lease_namespace: None,
        identity: "test".into(),
        lease_seconds: 15,
        controller,
    };
    let task = tokio::spawn(run_controller(client, cache, metrics.clone(), run, stop.clone()));
    Running { metrics, registry, stop, task, cache_task }
}

/// A NodeMaintenance as admission leaves it (defaulted plan), selecting nodes by name.
pub fn maintenance(name: &str, stage: &str, nodes: &[&str], plan: Option<Value>) -> Value {
    let plan = plan
        .unwrap_or_else(|| serde_json::to_value(node_maintenance::api::default_plan(&[])).expect("plan serializes"));
    json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": nodes}]}]},
            "stage": stage,
            "drainPlan": plan,
        }
    })
}

/// Changes the stage of a stored maintenance (as `kubectl patch` would).
pub fn set_stage(api: &ApiServer, name: &str, stage: &str) {
    let mut m = api.maintenance(name).expect("maintenance exists");
    m["spec"]["stage"] = json!(stage);
    api.put_maintenance(m);
}

/// `spec.unschedulable` of a node.
pub fn unschedulable(api: &ApiServer, node: &str) -> bool {
    api.node(node).and_then(|n| n.spec).and_then(|s| s.unschedulable).unwrap_or(false)
}

/// A status field of a maintenance by JSON pointer.
pub fn status_at(api: &ApiServer, name: &str, pointer: &str) -> Option<Value> {
    api.maintenance(name)?.pointer(&format!("/status{pointer}")).cloned()
}

/// A pod with a priority (and optionally owned by a DaemonSet or mirrored).
pub fn pod(ns: &str, name: &str, node: &str, priority: i32, kind: Option<&str>) -> k8s_openapi::api::core::v1::Pod {
    let mut p = super::apiserver::objects::pod(ns, name, node);
    p.spec.as_mut().expect("spec").priority = Some(priority);
    match kind {
        Some("DaemonSet") => {
            p.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "apps/v1".into(),
                kind: "DaemonSet".into(),
                name: "ds".into(),
                uid: "ds-uid".into(),
                controller: Some(true),
                ..Default::default()
            }]);
        }
        Some("Static") => {
            p.metadata.annotations = Some([("kubernetes.io/config.mirror".to_string(), "hash".to_string())].into());
        }
        _ => {}
    }
    p
}

/// A small deterministic generator (xorshift) so each seed replays the same kill times.
pub struct Rng(pub u64);

impl Rng {
    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
