//! Running the controller (SPEC 1.2, 4): one loop per leadership term, active on one
//! replica only, the holder of a coordination.k8s.io Lease ([`crate::cluster::lease`]). The
//! webhook's readiness never depends on the Lease. The controller reads the webhook cache's
//! Node, NodeMaintenance and NodeDisruptionBudget watches, and watches of its own (Pods,
//! Deployments, PodDisruptionBudgets, EvictionRequests).
//!
//! The loop: watch events (throttled), the instants jobs asked for and retries make jobs
//! due ([`super::schedule`]); the due jobs are decided together over one snapshot of the
//! caches ([`super::decide`]), then written one at a time: each NodeMaintenance's
//! ([`super::writer`]), then the cluster-wide statuses ([`super::cluster`]). A controller that stops on its own is an
//! error ([`RunError`]): the process exits non-zero and Kubernetes restarts it.

use super::alerts;
use super::context::{Context, ControllerOptions, TermCaches, context};
use super::decide::decide;
use super::eviction_memory::EvictionMemory;
use super::janitor;
use super::recorder::EventRecorder;
use super::schedule::{Job, Schedule};
use super::writer;
use crate::api::node::is_held;
use crate::cluster::alerts::{AlertsError, AlertsReader};
use crate::cluster::cache::ClusterCache;
use crate::cluster::deployments::{WorkloadChange, workload_caches};
use crate::cluster::eviction_requests::{self, EvictionApiChoice};
use crate::cluster::lease::{self, LeaseIdentity, WatchEnded};
use crate::cluster::pods::pod_cache;
use crate::gates::AlertsRead;
use crate::metrics::Metrics;
use futures::{FutureExt, Stream, StreamExt};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
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
    /// The watch of the Lease ended.
    #[error("leader election: {0}")]
    LeaseWatch(#[from] WatchEnded),
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
    /// The Prometheus client for the health gates could not be built (`--prometheus-ca-file`).
    #[error("reading alerts: {0}")]
    Alerts(#[from] AlertsError),
}

/// Takes part in leader election until `shutdown`; while leading, runs the controller.
/// On shutdown the controller stops and the Lease is released at once: the caller cancels
/// `shutdown` at SIGTERM, before the webhook's shutdown delay, so that the standby takes
/// over while this replica still answers admission.
///
/// # Errors
/// [`RunError`] when the Lease cannot be set up or its watch ends, or when the controller
/// stops on its own (or fails) while leading and no shutdown was requested. The Lease is
/// released first.
pub async fn run(
    client: Client,
    cache: ClusterCache,
    metrics: Metrics,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let lease = LeaseIdentity {
        client: client.clone(),
        namespace: options.lease_namespace.clone().unwrap_or_else(|| client.default_namespace().to_owned()),
        name: options.lease_name.clone(),
        identity: options.identity.clone(),
        seconds: options.lease_seconds,
    };
    lease.check().await?;
    // A bad CA file stops `serve` at start, not when this replica comes to lead.
    AlertsReader::new(&options.controller.prometheus, metrics.clone())?;
    tracing::info!(lease = %format!("{}/{}", lease.namespace, lease.name), identity = %lease.identity, "waiting for leadership");
    while let Some(manager) = lease.acquire(&shutdown).await? {
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
        let ended = tokio::select! {
            r = &mut task => Some(r),
            () = lease::hold(&manager) => {
                tracing::warn!("lost leadership: controller stops");
                None
            }
            () = shutdown.cancelled() => None,
        };
        metrics.leader.set(0);
        if ended.is_none() {
            leading.cancel();
            // The controller stops between two jobs; one that takes longer is cut (every
            // step is safe to cut, as a crash would).
            if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
                task.abort();
            }
        }
        lease::release(manager).await;
        match ended {
            None if shutdown.is_cancelled() => return Ok(()),
            None => {}
            Some(Ok(Ok(()))) if shutdown.is_cancelled() => return Ok(()),
            Some(Ok(Ok(()))) => return Err(RunError::ControllerStopped),
            Some(Ok(Err(e))) => return Err(e),
            Some(Err(e)) => return Err(RunError::ControllerPanicked(e)),
        }
    }
    Ok(())
}

/// How long the loop waits at a time for the Node cache to show the holds it wrote
/// ([`super::expectations`]) before it looks again (every other signal still heard).
const EXPECTATIONS_WAIT: Duration = Duration::from_secs(2);

/// How long a stopping controller may finish the job in progress before it is cut.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The controller proper, until `stop`: waits for the caches, then runs the loop
/// (`decide_and_write`). Its watches are driven in this future, so they stop with it.
///
/// # Errors
/// [`RunError::PodWatchEnded`], [`RunError::WorkloadWatchEnded`] or
/// [`RunError::EvictionRequestWatchEnded`] when a watch that the decisions read ends;
/// [`RunError::Alerts`] when the Prometheus client cannot be built.
pub async fn run_controller(
    client: Client,
    cache: ClusterCache,
    metrics: Metrics,
    options: RunOptions,
    stop: CancellationToken,
) -> Result<(), RunError> {
    let reader = AlertsReader::new(&options.controller.prometheus, metrics.clone())?;
    let (alerts_changed, alert_changes) = tokio::sync::watch::channel(Arc::new(AlertsRead {
        view: (*reader.snapshot()).clone(),
        read_for: Some(std::collections::BTreeMap::new()),
    }));
    let alerts_task = alerts::keep_fresh(reader, cache.budget_store(), cache.budget_changes(), alerts_changed);
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
    // Deployments and PodDisruptionBudgets, for evacuation by rollout; a change of a
    // Deployment a maintenance rolled is a trigger (its rollout is being followed), and so is
    // a budget that refused one of our evictions and allows a disruption again.
    let evictions = Arc::new(EvictionMemory::default());
    let waited = {
        let evictions = evictions.clone();
        move |namespace: &str, pdb: &str| evictions.waits_for_pdb(namespace, pdb)
    };
    let (workloads, workload_events) = workload_caches(client.clone(), waited);
    let (rollouts_changed, rollout_changes) = tokio::sync::watch::channel(());
    let (pdbs_allow, pdb_changes) = tokio::sync::watch::channel(());
    let workload_driver = workload_events.for_each(move |change| {
        match change {
            WorkloadChange::Rollout => rollouts_changed.send_replace(()),
            WorkloadChange::PdbAllows => pdbs_allow.send_replace(()),
        };
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
    // Evictions go through EvictionRequests where the cluster serves them.
    let use_requests =
        options.controller.eviction_api == EvictionApiChoice::Auto && eviction_requests::served(&client).await;
    let (requests, requests_driver) = if use_requests {
        let (watches, driver) = eviction_requests::watch(&client, &options.controller.eviction_requester);
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
        TermCaches { pods, workloads, evictions, alerts: alert_changes.clone(), pod_changes: pod_changes.clone() },
        EventRecorder::new(client.clone(), reporter),
        metrics,
        options.controller.clone(),
        requests,
    ));
    let changes = Changes { pods: pod_changes, rollouts: rollout_changes, pdbs: pdb_changes, alerts: alert_changes };
    decide_and_write(&ctx, &cache, changes, stop, async {
        tokio::select! {
            _ = pod_driver => RunError::PodWatchEnded,
            _ = requests_driver => RunError::EvictionRequestWatchEnded,
            _ = workload_driver => RunError::WorkloadWatchEnded,
            () = alerts_task => RunError::ControllerStopped,
        }
    })
    .await
}

/// The controller's own change signals, beside the cluster cache's.
struct Changes {
    /// Pods changed on a held node.
    pods: tokio::sync::watch::Receiver<()>,
    /// A Deployment a maintenance rolled changed.
    rollouts: tokio::sync::watch::Receiver<()>,
    /// A PodDisruptionBudget that refused one of our evictions allows a disruption again.
    pdbs: tokio::sync::watch::Receiver<()>,
    /// Prometheus answered differently ([`alerts::keep_fresh`]).
    alerts: tokio::sync::watch::Receiver<Arc<AlertsRead>>,
}

/// The loop of one leadership term, until `stop` (then `Ok`) or until `watches` ends (a
/// watch the decisions read ended: that error). Every job once at start, then: one trigger
/// from the watches (each throttled) makes every job due; a job that asked to be looked at
/// again (a deadline, a drain in progress) or that failed ([`Schedule::failed`]: jittered
/// backoff, at most 10 s) is due at its time. The jobs due together are decided together,
/// over one snapshot of the caches, off the async workers ([`decide`]), once the cache shows
/// this controller's own node writes; then written one job at a time ([`writer::write`]).
/// Every failure goes through the same policy and is counted in
/// `node_maintenance_reconcile_errors_total{reason}`.
async fn decide_and_write(
    ctx: &Arc<Context>,
    cache: &ClusterCache,
    changes: Changes,
    stop: CancellationToken,
    watches: impl Future<Output = RunError>,
) -> Result<(), RunError> {
    let mut triggers = futures::stream::select_all([
        throttled(cache.node_changes(), Duration::from_millis(500)).boxed(),
        throttled(changes.pods, Duration::from_secs(1)).boxed(),
        throttled(changes.rollouts, Duration::from_secs(1)).boxed(),
        // A drain behind a PodDisruptionBudget goes at the pace the budget allows, one
        // eviction per replacement Ready: each trigger it waits for is time added to the drain.
        throttled(changes.pdbs, Duration::from_millis(200)).boxed(),
        throttled(cache.budget_changes(), Duration::from_millis(500)).boxed(),
        throttled(changes.alerts, Duration::from_millis(100)).boxed(),
        throttled(cache.maintenance_changes(), Duration::from_millis(100)).boxed(),
    ]);
    let mut sweeps = tokio::time::interval(janitor::EVERY);
    let mut schedule = Schedule::default();
    schedule.all_due(jobs(ctx), Instant::now());
    let work = async {
        loop {
            let wake = schedule.next();
            tokio::select! {
                biased;
                () = stop.cancelled() => return,
                Some(()) = triggers.next() => {
                    for gone in schedule.retain(|j| live(ctx, j)) {
                        if let Job::Maintenance(name) = gone {
                            janitor::forget(ctx, &name);
                        }
                    }
                    schedule.all_due(jobs(ctx), Instant::now());
                }
                () = sleep_until(wake) => {}
                _ = sweeps.tick() => {
                    janitor::sweep(ctx);
                    continue;
                }
            }
            let due = schedule.take_due(Instant::now());
            if due.is_empty() {
                continue;
            }
            // What this controller wrote must be in the cache before a decision reads it (an
            // allotment without our holds could give a budget's last place away twice).
            let shown = tokio::select! {
                met = ctx.expectations.met(&ctx.nodes, cache.node_changes(), EXPECTATIONS_WAIT) => met,
                () = stop.cancelled() => return,
            };
            if !shown {
                tracing::warn!(nodes = ctx.expectations.len(), "the Node cache does not show our writes yet; waiting");
                schedule.all_due(due, Instant::now());
                continue;
            }
            let started = std::time::Instant::now();
            let decision = {
                let (ctx, due) = (ctx.clone(), due.clone());
                match tokio::task::spawn_blocking(move || decide(&ctx, &due)).await {
                    Ok(decision) => decision,
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    // Cancelled: only when the runtime shuts down.
                    Err(_) => return,
                }
            };
            writer::write(ctx, &mut schedule, decision, started, &stop).await;
        }
    };
    let ended = tokio::select! {
        () = work => Ok(()),
        e = watches => Err(e),
    };
    // This term's memories and budget series go with it.
    janitor::publish(ctx, [0; janitor::MEMORIES.len()]);
    ctx.metrics.budgets.clear();
    ended
}

/// Every job there is now: each NodeMaintenance in the cache, and the cluster-wide one.
fn jobs(ctx: &Context) -> Vec<Job> {
    let mut jobs: Vec<Job> = ctx.maintenances.state().iter().map(|m| Job::Maintenance(m.name_any())).collect();
    jobs.push(Job::Cluster);
    jobs
}

/// Whether `job`'s object still exists.
fn live(ctx: &Context, job: &Job) -> bool {
    match job {
        Job::Cluster => true,
        Job::Maintenance(name) => ctx.maintenances.get(&ObjectRef::new(name)).is_some(),
    }
}

/// Completes at `at`, never when `None`.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A stream that yields `()` as soon as `rx` changes, then at most once per `every` (changes
/// in between coalesce into one). The first change of a quiet spell is acted on at once: a
/// budget that allows the next eviction, or a maintenance just created, does not wait for
/// the throttle; a burst of changes still makes one decision per `every`.
fn throttled<T: Send + Sync + 'static>(
    rx: tokio::sync::watch::Receiver<T>,
    every: Duration,
) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((rx, None::<tokio::time::Instant>), move |(mut rx, last)| async move {
        rx.changed().await.ok()?;
        if let Some(last) = last {
            tokio::time::sleep_until(last + every).await;
        }
        rx.mark_unchanged();
        Some(((), (rx, Some(tokio::time::Instant::now()))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_change_after_a_quiet_spell_triggers_at_once_and_a_burst_once_per_period() {
        let (tx, rx) = tokio::sync::watch::channel(0);
        let mut triggers = Box::pin(throttled(rx, Duration::from_secs(1)));
        let start = tokio::time::Instant::now();
        tx.send_replace(1);
        triggers.next().await.expect("trigger");
        assert_eq!(start.elapsed(), Duration::ZERO, "the first change is acted on at once");
        // A burst: two changes within the period make one trigger, at its end.
        tx.send_replace(2);
        tokio::time::sleep(Duration::from_millis(100)).await;
        tx.send_replace(3);
        triggers.next().await.expect("trigger");
        assert_eq!(start.elapsed(), Duration::from_secs(1), "then at most once per period");
        // Quiet for longer than the period: the next change goes at once again.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let quiet = tokio::time::Instant::now();
        tx.send_replace(4);
        triggers.next().await.expect("trigger");
        assert_eq!(quiet.elapsed(), Duration::ZERO);
        drop(tx);
        assert!(triggers.next().await.is_none(), "the stream ends with its sender");
    }
}
