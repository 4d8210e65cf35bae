//! Running the reconcile loop (SPEC 1.2, 4): a kube-runtime `Controller` over
//! NodeMaintenance, re-run for every maintenance when Nodes or Pods change, active on one
//! replica only — the holder of a coordination.k8s.io Lease (kube-lease-manager). The
//! webhook's readiness never depends on the Lease. The controller reads the webhook cache's
//! NodeMaintenance watch (a shared stream), not a watch of its own.
//!
//! A controller that stops on its own, or a leader election that ends, is an error
//! ([`RunError`]): the process exits non-zero and Kubernetes restarts it.

use super::budgets;
use super::context::{Context, ControllerOptions, TermCaches, context};
use super::eviction_requests::{self, watches::EvictionApiChoice};
use super::gauges;
use super::janitor;
use super::planned;
use super::reconcile::reconcile;
use super::recorder::EventRecorder;
use super::rolling;
use crate::api::node::is_held;
use crate::cluster::cache::ClusterCache;
use crate::cluster::deployments::workload_caches;
use crate::cluster::pods::pod_cache;
use crate::metrics::Metrics;
use futures::{FutureExt, Stream, StreamExt};
use kube::Client;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use kube_lease_manager::LeaseManagerBuilder;
use std::collections::BTreeSet;
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
    /// See [`crate::controller::context::ControllerOptions`].
    pub controller: ControllerOptions,
}

/// Errors that stop the controller runner (SPEC 1.2); each one makes the process exit
/// non-zero so that Kubernetes restarts it.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The Lease could not be set up.
    #[error("leader election: {0}")]
    Lease(#[from] kube_lease_manager::LeaseManagerError),
    /// The leader-election task ended although nobody asked it to (its error, if any).
    #[error("leader election ended unexpectedly: {0}")]
    LeaseEnded(String),
    /// The controller stopped by itself while this replica was leading and no shutdown was
    /// requested.
    #[error("the controller stopped on its own while leading")]
    ControllerStopped,
    /// The controller task panicked.
    #[error("the controller task failed: {0}")]
    ControllerPanicked(#[source] tokio::task::JoinError),
    /// The Pod watch (drain decisions read it) ended.
    #[error("the Pod watch ended")]
    PodWatchEnded,
    /// The Deployment or PodDisruptionBudget watch (evacuation by rollout reads them) ended.
    #[error("the Deployment or PodDisruptionBudget watch ended")]
    WorkloadWatchEnded,
    /// The EvictionRequest watch (evictions in progress read it) ended.
    #[error("the EvictionRequest watch ended")]
    EvictionRequestWatchEnded,
    /// The NodeMaintenance cache offers no shared stream to subscribe to.
    #[error("the NodeMaintenance cache has no shared stream")]
    NoSharedStream,
}

/// Why the controller of one leadership term ended.
enum TermEnd {
    Controller(Result<Result<(), RunError>, tokio::task::JoinError>),
    LostLease,
    LeaseEnded,
    Shutdown,
}

/// Takes part in leader election until `shutdown`; while leading, runs the controller. On
/// shutdown the controller stops and the Lease is released.
///
/// # Errors
/// [`RunError`] when leader election cannot start or ends unexpectedly, or when the
/// controller stops on its own (or fails) while leading and no shutdown was requested. The
/// Lease is released first.
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
    let mut outcome = Ok(());
    loop {
        let lease_ended = tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = leader.wait_for(|l| *l) => changed.is_err(),
        };
        if lease_ended {
            outcome = Err(RunError::LeaseEnded(String::new()));
            break;
        }
        tracing::info!("leading: controller starts");
        metrics.leader.set(1);
        let leading = CancellationToken::new();
        let mut task = tokio::spawn(run_controller(
            client.clone(),
            cache.clone(),
            metrics.clone(),
            options.clone(),
            leading.clone(),
        ));
        let end = tokio::select! {
            r = &mut task => TermEnd::Controller(r),
            changed = leader.wait_for(|l| !*l) => if changed.is_ok() { TermEnd::LostLease } else { TermEnd::LeaseEnded },
            _ = shutdown.cancelled() => TermEnd::Shutdown,
        };
        metrics.leader.set(0);
        if !matches!(end, TermEnd::Controller(_)) {
            leading.cancel();
            // The controller (and its NodeMaintenance subscription) must be gone before the
            // next term or the exit: abort it if it does not stop in time.
            if tokio::time::timeout(Duration::from_secs(10), &mut task).await.is_err() {
                task.abort();
            }
        }
        if shutdown.is_cancelled() {
            break;
        }
        match end {
            TermEnd::LostLease => tracing::warn!("lost leadership: controller stops"),
            TermEnd::Shutdown => break,
            TermEnd::LeaseEnded => {
                outcome = Err(RunError::LeaseEnded(String::new()));
                break;
            }
            TermEnd::Controller(Ok(Ok(()))) => {
                outcome = Err(RunError::ControllerStopped);
                break;
            }
            TermEnd::Controller(Ok(Err(e))) => {
                outcome = Err(e);
                break;
            }
            TermEnd::Controller(Err(e)) => {
                outcome = Err(RunError::ControllerPanicked(e));
                break;
            }
        }
    }
    drop(leader);
    // Dropping the receiver makes the lease task release the Lease and end.
    let lease_result = tokio::time::timeout(Duration::from_secs(5), lease_task).await;
    if let Err(RunError::LeaseEnded(why)) = &mut outcome {
        *why = match lease_result {
            Ok(Ok(Err(e))) => e.to_string(),
            Ok(Err(e)) => e.to_string(),
            _ => "the Lease watch stopped".to_owned(),
        };
    }
    outcome
}

/// The controller proper, until `stop`: waits for the Pod and cluster caches, then runs a
/// kube-runtime `Controller` over the cache's shared NodeMaintenance stream, reconciling
/// every maintenance once at start (a subscription misses objects that do not change) and
/// again on Node and Pod changes. The subscription is dropped when this returns.
///
/// # Errors
/// [`RunError::PodWatchEnded`] when the Pod watch ends, [`RunError::ControllerStopped`]
/// when the controller ends although `stop` was not cancelled, and
/// [`RunError::NoSharedStream`] when the cache cannot be subscribed to.
pub async fn run_controller(
    client: Client,
    cache: ClusterCache,
    metrics: Metrics,
    options: RunOptions,
    stop: CancellationToken,
) -> Result<(), RunError> {
    let (pods, pod_events) = pod_cache(client.clone());
    let (pods_changed, pod_changes) = tokio::sync::watch::channel(());
    // Driven in this future (not spawned) so that stopping the controller stops the watch.
    // Pods matter only on nodes a maintenance holds (only those are drained); elsewhere in
    // the cluster pods come and go all the time.
    let node_store = cache.node_store();
    let pod_driver = pod_events.for_each(move |change| {
        if change.concerns(|node| node_store.get(&ObjectRef::new(node)).is_some_and(|n| is_held(&n))) {
            pods_changed.send_replace(());
        }
        async {}
    });
    tokio::pin!(pod_driver);
    // NodeDisruptionBudgets too: nothing may be cordoned before every budget is known.
    let budgets = cache.budget_store();
    // Deployments and PodDisruptionBudgets, for evacuation by rollout (issue 21); changes of a
    // Deployment a maintenance rolled trigger reconciles (its rollout is being followed).
    let (workloads, workload_events) = workload_caches(client.clone());
    let (rollouts_changed, rollout_changes) = tokio::sync::watch::channel(());
    let workload_driver = workload_events.for_each(move |()| {
        rollouts_changed.send_replace(());
        async {}
    });
    tokio::pin!(workload_driver);
    let synced = async {
        futures::join!(
            pods.wait_until_ready(),
            cache.wait_synced(),
            budgets.wait_until_ready(),
            workloads.wait_until_ready()
        )
    };
    tokio::select! {
        _ = &mut pod_driver => return Err(RunError::PodWatchEnded),
        _ = &mut workload_driver => return Err(RunError::WorkloadWatchEnded),
        _ = synced => {}
        _ = stop.cancelled() => return Ok(()),
    }
    tracing::info!(pods = pods.len(), "pod and cluster caches synced");
    // Evictions go through EvictionRequests where the cluster serves them (issue 14).
    let use_requests =
        options.controller.eviction_api == EvictionApiChoice::Auto && eviction_requests::served(&client).await;
    let (requests, requests_driver) = if use_requests {
        let (watches, driver) = eviction_requests::watches::watch(&client, &options.controller.eviction_requester);
        (Some(watches), driver)
    } else {
        (None, futures::future::pending().boxed())
    };
    tokio::pin!(requests_driver);
    if let Some(watches) = &requests {
        tokio::select! {
            () = watches.wait_until_ready() => {}
            _ = &mut requests_driver => return Err(RunError::EvictionRequestWatchEnded),
            _ = stop.cancelled() => return Ok(()),
            _ = &mut workload_driver => return Err(RunError::WorkloadWatchEnded),
        }
    }
    tracing::info!(
        api = if use_requests { "lifecycle.k8s.io/v1alpha1 EvictionRequest" } else { "policy/v1 Eviction" },
        "evictions go through"
    );
    let reporter = Reporter { controller: "node-maintenance".into(), instance: Some(options.identity.clone()) };
    let ctx: Arc<Context> = Arc::new(context(
        client.clone(),
        &cache,
        TermCaches { pods, workloads },
        EventRecorder::new(client.clone(), reporter),
        metrics,
        options.controller.clone(),
        requests,
    ));
    let subscriber = cache.subscribe().ok_or(RunError::NoSharedStream)?;
    let node_trigger = throttled(cache.node_changes(), Duration::from_millis(500));
    let pod_trigger = throttled(pod_changes, Duration::from_secs(1));
    let rollout_trigger = throttled(rollout_changes, Duration::from_secs(1));
    let budget_trigger = throttled(cache.budget_changes(), Duration::from_millis(500));
    // Cluster-wide writes: NodeDisruptionBudget statuses (issue 20) and MaintenancePlanned
    // conditions (issue 22), from one allotment, on Node, budget and NodeMaintenance changes.
    let cluster_ctx = ctx.clone();
    let cluster_status = futures::stream::once(async {})
        .chain(futures::stream::select(
            throttled(cache.node_changes(), Duration::from_secs(1)),
            futures::stream::select(
                throttled(cache.budget_changes(), Duration::from_millis(500)),
                throttled(cache.maintenance_changes(), Duration::from_millis(500)),
            ),
        ))
        .fold(BTreeSet::new(), move |mut known, ()| {
            let ctx = cluster_ctx.clone();
            async move {
                let allotment = rolling::allotment(&ctx);
                budgets::publish(&ctx, &allotment, &mut known).await;
                planned::publish(&ctx, &allotment).await;
                known
            }
        });
    // Everything once at start, then on changes; never ends (pending after the triggers).
    // Each trigger starts a new shared planning pass (controller/pass.rs).
    let on_trigger = ctx.clone();
    let trigger = futures::stream::once(async {})
        .chain(futures::stream::select(
            futures::stream::select(node_trigger, pod_trigger),
            futures::stream::select(budget_trigger, rollout_trigger),
        ))
        .inspect(move |()| on_trigger.pass.triggered())
        .chain(futures::stream::pending());
    // The memories' sweep (issue 25); the first tick is at once, so the gauges exist.
    let (sweep_ctx, term_ctx) = (ctx.clone(), ctx.clone());
    let sweeps = every(janitor::EVERY).for_each(move |()| {
        janitor::sweep(&sweep_ctx);
        async {}
    });
    let on_result = ctx.clone();
    let controller = Controller::for_shared_stream(subscriber, cache.maintenance_store())
        // One reconcile at a time: maintenances that share nodes write the same node fields.
        .with_config(controller::Config::default().concurrency(1))
        .reconcile_all_on(trigger)
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile, |_, _, _| Action::requeue(Duration::from_secs(5)), ctx)
        .for_each(move |r| {
            match r {
                Err(controller::Error::ObjectNotFound(obj)) => {
                    gauges::forget(&on_result, &obj.name);
                    janitor::forget(&on_result, &obj.name);
                }
                Err(e) => tracing::debug!(error = %e, "controller"),
                Ok(_) => {}
            }
            async {}
        });
    let ended = tokio::select! {
        _ = controller => if stop.is_cancelled() { Ok(()) } else { Err(RunError::ControllerStopped) },
        _ = cluster_status => Err(RunError::ControllerStopped),
        _ = sweeps => Err(RunError::ControllerStopped),
        _ = pod_driver => Err(RunError::PodWatchEnded),
        _ = requests_driver => Err(RunError::EvictionRequestWatchEnded),
        _ = workload_driver => Err(RunError::WorkloadWatchEnded),
    };
    // This term's memories go with it.
    janitor::publish(&term_ctx, [0; janitor::MEMORIES.len()]);
    ended
}

/// A stream that yields `()` at once and then every `period`.
fn every(period: Duration) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold(tokio::time::interval(period), |mut interval| async move {
        interval.tick().await;
        Some(((), interval))
    })
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
