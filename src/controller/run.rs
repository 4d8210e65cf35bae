//! Running the reconcile loop (SPEC 1.2, 4): a kube-runtime `Controller` over
//! NodeMaintenance, re-run for every maintenance when Nodes or Pods change, active on one
//! replica only — the holder of a coordination.k8s.io Lease (kube-lease-manager). The
//! webhook's readiness never depends on the Lease.

use super::reconcile::{Context, ControllerOptions, context, reconcile};
use crate::api::NodeMaintenance;
use crate::cluster::cache::ClusterCache;
use crate::cluster::pods::pod_cache;
use crate::metrics::Metrics;
use futures::{Stream, StreamExt};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client};
use kube_lease_manager::LeaseManagerBuilder;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How the controller identifies itself and elects a leader.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Lease name (`--lease-name`).
    pub lease_name: String,
    /// Lease namespace (`--lease-namespace`; default: the client's namespace).
    pub lease_namespace: Option<String>,
    /// This replica's identity (pod name).
    pub identity: String,
    /// Lease duration in seconds; the holder renews `grace` seconds before it ends.
    pub lease_seconds: u64,
    /// See [`crate::controller::reconcile::ControllerOptions`].
    pub controller: ControllerOptions,
}

/// Errors that stop the controller runner.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The Lease could not be set up.
    #[error("leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
}

/// Takes part in leader election until `shutdown`; while leading, runs the controller. On
/// shutdown the controller stops and the Lease is released.
///
/// # Errors
/// [`RunError`] when leader election cannot start.
pub async fn run(
    client: Client,
    cache: ClusterCache,
    metrics: Metrics,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let namespace = options.lease_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned());
    let manager = LeaseManagerBuilder::new(client.clone(), &options.lease_name)
        .with_namespace(&namespace)
        .with_identity(&options.identity)
        .with_duration(options.lease_seconds)
        .with_grace((options.lease_seconds / 3).max(1))
        .build()
        .await?;
    let (mut leader, lease_task) = manager.watch().await;
    tracing::info!(lease = %format!("{namespace}/{}", options.lease_name), identity = %options.identity, "waiting for leadership");
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = leader.wait_for(|l| *l) => if changed.is_err() { break },
        }
        tracing::info!("leading: controller starts");
        let leading = CancellationToken::new();
        let mut task = tokio::spawn(run_controller(
            client.clone(),
            cache.clone(),
            metrics.clone(),
            options.clone(),
            leading.clone(),
        ));
        tokio::select! {
            _ = &mut task => tracing::warn!("controller stopped on its own"),
            _ = leader.wait_for(|l| !*l) => tracing::warn!("lost leadership: controller stops"),
            _ = shutdown.cancelled() => {}
        }
        leading.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), task).await;
        if shutdown.is_cancelled() {
            break;
        }
    }
    drop(leader);
    // Dropping the receiver makes the lease task release the Lease and end.
    let _ = tokio::time::timeout(Duration::from_secs(5), lease_task).await;
    Ok(())
}

/// The controller proper, until `stop`.
pub async fn run_controller(
    client: Client,
    cache: ClusterCache,
    metrics: Metrics,
    options: RunOptions,
    stop: CancellationToken,
) {
    let (pods, pod_events) = pod_cache(client.clone());
    let (pods_changed, pod_changes) = tokio::sync::watch::channel(());
    // Driven in this future (not spawned) so that stopping the controller stops the watch.
    let pod_driver = pod_events.for_each(move |()| {
        pods_changed.send_replace(());
        async {}
    });
    tokio::pin!(pod_driver);
    tokio::select! {
        _ = &mut pod_driver => return,
        _ = pods.wait_until_ready() => {}
        _ = stop.cancelled() => return,
    }
    tracing::info!(pods = pods.len(), "pod cache synced");
    let reporter = Reporter { controller: "node-maintenance".into(), instance: Some(options.identity.clone()) };
    let ctx: Arc<Context> = Arc::new(context(
        client.clone(),
        cache.node_store(),
        cache.maintenance_store(),
        pods,
        Recorder::new(client.clone(), reporter),
        metrics,
        options.controller.clone(),
    ));
    let trigger = throttled(cache.node_changes(), Duration::from_millis(500)).chain(futures::stream::pending()).boxed();
    let pod_trigger = throttled(pod_changes, Duration::from_secs(1));
    let controller = Controller::new(Api::<NodeMaintenance>::all(client), watcher::Config::default())
        // One reconcile at a time: maintenances that share nodes write the same node fields.
        .with_config(controller::Config::default().concurrency(1))
        .reconcile_all_on(futures::stream::select(trigger, pod_trigger))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, |_, _, _| Action::requeue(Duration::from_secs(5)), ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "controller");
            }
        });
    tokio::select! {
        _ = controller => {}
        _ = pod_driver => tracing::warn!("pod watch ended"),
    }
}

/// A stream that yields `()` when `rx` changes, at most once per `every` (changes in between
/// coalesce into one).
fn throttled(rx: tokio::sync::watch::Receiver<()>, every: Duration) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(rx, move |mut rx| async move {
        rx.changed().await.ok()?;
        tokio::time::sleep(every).await;
        rx.mark_unchanged();
        Some(((), rx))
    })
}
