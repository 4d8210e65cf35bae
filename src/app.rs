//! `serve`: wires the certificate, the cluster view, the authorizer, the HTTPS and metrics
//! servers and shutdown together from [`ServeOptions`] (the `serve` command's flags).

use crate::admission::{Authorizer, ClusterView, StandaloneAuthorizer};
use crate::cluster::cache::ClusterCache;
use crate::cluster::sar::{SarAuthorizer, SarOptions};
use crate::cluster::standalone::StaticView;
use crate::controller;
use crate::metrics::Metrics;
use crate::metrics::state::StateMetrics;
use crate::server::routes::{self, AppState};
use crate::server::tls::{self, CertPaths, CertStore};
use crate::server::{Limits, Readiness, devcert, serve_https, serve_metrics, shutdown};
use anyhow::{Context, bail};
use clap::Args;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The addresses the servers listen on (useful with port 0).
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// HTTPS webhook address.
    pub addr: SocketAddr,
    /// Plain-HTTP metrics address.
    pub metrics_addr: SocketAddr,
}

/// Flags of `node-maintenance serve` (README "Flags").
#[derive(Args, Clone, Debug)]
pub struct ServeOptions {
    /// Standalone mode: no cluster; Nodes from --nodes-file, development certificates when
    /// none are given, authorization by group/user lists.
    #[arg(long)]
    pub standalone: bool,
    /// HTTPS address of the webhook.
    #[arg(long, default_value = "0.0.0.0:8443", env = "NM_ADDR")]
    pub addr: SocketAddr,
    /// Plain-HTTP address of /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", env = "NM_METRICS_ADDR")]
    pub metrics_addr: SocketAddr,
    /// Serving certificate chain (PEM); reloaded when it changes.
    #[arg(long, requires = "tls_key_file", env = "NM_TLS_CERT_FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// Serving private key (PEM).
    #[arg(long, requires = "tls_cert_file", env = "NM_TLS_KEY_FILE")]
    pub tls_key_file: Option<PathBuf>,
    /// Require client certificates signed by this CA bundle (PEM).
    #[arg(long, env = "NM_CLIENT_CA")]
    pub client_ca: Option<PathBuf>,
    /// Where standalone mode writes development certificates when none are given.
    #[arg(long, default_value = "certs")]
    pub cert_dir: PathBuf,
    /// How often the certificate files are re-read (in addition to file watching).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub cert_poll_interval: Duration,
    /// Standalone: Nodes (and optionally NodeMaintenances) as `kubectl get nodes -o yaml`.
    #[arg(long)]
    pub nodes_file: Option<PathBuf>,
    /// Standalone: user allowed to select any node (repeatable); system:masters always is.
    #[arg(long = "allow-user")]
    pub allow_users: Vec<String>,
    /// Standalone: group allowed to select any node (repeatable).
    #[arg(long = "allow-group")]
    pub allow_groups: Vec<String>,
    /// Longest time spent on one review; the apiserver's ?timeout= lowers it.
    #[arg(long, default_value = "9s", value_parser = humantime::parse_duration)]
    pub max_review_time: Duration,
    /// Reviews processed at once; more are refused with 503 (load shedding).
    #[arg(long, default_value_t = 512)]
    pub max_concurrent_reviews: usize,
    /// Open connections at most.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Kubeconfig file for cluster mode (default: $KUBECONFIG, then ~/.kube/config, then in-cluster:
    /// kube's `Config::infer` tries a kubeconfig first).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// SubjectAccessReviews in flight at once for one review (per-node checks).
    #[arg(long, default_value_t = 32)]
    pub sar_concurrency: usize,
    /// How long a SubjectAccessReview answer is reused for the same user and node.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub sar_cache_ttl: Duration,
    /// Time allowed for one SubjectAccessReview; past it the review is denied with 503.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub sar_timeout: Duration,
    /// Run the reconcile loop (cluster mode); `--controller=false` runs the webhook alone.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub controller: bool,
    /// Name of the coordination.k8s.io Lease that elects the one active controller.
    #[arg(long, default_value = "node-maintenance-controller", env = "NM_LEASE_NAME")]
    pub lease_name: String,
    /// Namespace of that Lease (defaults to the pod's namespace, else `default`).
    #[arg(long, env = "NM_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Do not evict DaemonSet pods (like kubectl drain --ignore-daemonsets); they are
    /// reported instead.
    #[arg(long)]
    pub skip_daemonset_pods: bool,
    /// Controller writes in flight at once, at least 1 (cordons, releases, Node conditions and
    /// evictions are issued concurrently up to this bound; a 429 with Retry-After from API
    /// Priority and Fairness pauses them all).
    #[arg(long, default_value_t = controller::context::DEFAULT_MAX_CONCURRENT_WRITES)]
    pub max_concurrent_writes: usize,
    /// At most this many nodes evict pods at once over all maintenances (0: no limit); the
    /// others wait for a drain slot (each maintenance's spec.maxUnavailable applies too).
    #[arg(long, default_value_t = 0)]
    pub max_draining_nodes: u32,
    /// Pods no controller re-creates: `evict` them (reported in the node status and a
    /// Warning Event) or `block` (not evicted; reported as blockers, they hold the drain).
    #[arg(long, value_enum, default_value = "evict")]
    pub unmanaged_pods: crate::planner::PodPolicy,
    /// Pods with emptyDir volumes, whose data goes with them: `evict` (reported) or `block`.
    #[arg(long, value_enum, default_value = "evict")]
    pub emptydir_pods: crate::planner::PodPolicy,
    /// `auto`: evict through EvictionRequests (lifecycle.k8s.io/v1alpha1, KEP-4563) when the
    /// cluster serves them, else the Eviction API; `eviction`: always the Eviction API.
    #[arg(long, value_enum, default_value = "auto")]
    pub eviction_api: crate::cluster::eviction_requests::EvictionApiChoice,
    /// Evacuation by rollout for maintenances without `spec.evacuation`: `Surge`
    /// (every Deployment that can surge), `Annotated` (Deployments annotated
    /// `nodemaintenance.k8s.io/evacuation: surge`) or `Evict` (none).
    #[arg(long, default_value = "Annotated", value_parser = evacuation_value())]
    pub evacuation: crate::api::Evacuation,
    /// `spec.requester` of the EvictionRequests: a domain-prefixed name outside the reserved
    /// `*.k8s.io` and `*.kubernetes.io` (checked at start-up with the API's rules).
    #[arg(long, default_value = crate::cluster::eviction_requests::DEFAULT_REQUESTER,
          value_parser = crate::api::requester::parse_requester)]
    pub eviction_requester: String,
    /// The Prometheus the controller reads firing alerts from, for the health gates of
    /// NodeDisruptionBudgets (SPEC 4.6).
    #[command(flatten)]
    pub prometheus: crate::cluster::alerts::PrometheusOptions,
    /// After SIGTERM: time spent not ready but still serving.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_delay: Duration,
    /// After the delay: time given to in-flight requests. `--drain-timeout`, its name
    /// before `spec.drainTimeout` existed, is kept as an alias.
    #[arg(long, alias = "drain-timeout", default_value = "20s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,
}

/// The parser of `--evacuation`: the API's names, listed in `--help`.
fn evacuation_value() -> impl clap::builder::TypedValueParser<Value = crate::api::Evacuation> {
    use clap::builder::TypedValueParser;
    let names = crate::api::Evacuation::ALL.map(crate::api::Evacuation::as_str);
    clap::builder::PossibleValuesParser::new(names)
        .map(|name| crate::api::Evacuation::parse(&name).unwrap_or(crate::api::Evacuation::Evict))
}

/// Builds the standalone view (Nodes and NodeMaintenances from a file) and authorizer
/// (`system:masters` plus the given users and groups).
///
/// # Errors
/// When the file cannot be loaded.
pub fn standalone_parts(
    nodes_file: Option<&std::path::Path>,
    users: Vec<String>,
    groups: Vec<String>,
) -> anyhow::Result<(Arc<dyn ClusterView>, Arc<dyn Authorizer>)> {
    let view = match nodes_file {
        Some(p) => StaticView::load(p).context("loading --nodes-file")?,
        None => StaticView::default(),
    };
    tracing::info!(nodes = view.nodes.len(), maintenances = view.maintenances.len(), "standalone cluster view loaded");
    Ok((Arc::new(view), Arc::new(StandaloneAuthorizer::new(users, groups))))
}

/// Builds the Kubernetes client from `--kubeconfig` (and `--context`), else kube's
/// `Config::infer`: `$KUBECONFIG` or `~/.kube/config` first, the in-cluster configuration
/// only when no kubeconfig loads.
///
/// # Errors
/// When no configuration can be found or read.
pub async fn kube_client(kubeconfig: Option<&std::path::Path>, context: Option<&str>) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions { context: context.map(str::to_owned), ..Default::default() };
    let mut config = match (kubeconfig, context) {
        (Some(path), _) => {
            let file =
                kube::config::Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &options).await.context("using --kubeconfig")?
        }
        (None, Some(_)) => kube::Config::from_kubeconfig(&options).await.context("using --context")?,
        (None, None) => {
            kube::Config::infer().await.context("no Kubernetes configuration (in-cluster or kubeconfig)")?
        }
    };
    // No blind retries of 429/503 inside the client: a PodDisruptionBudget refusal must reach
    // the controller (which backs off per pod), and an unanswered SubjectAccessReview must
    // fail closed within the review deadline. Watches have their own backoff.
    config.default_retry = false;
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// The controller's identity and pacing from the flags. The identity is the pod name
/// (`POD_NAME`, else `HOSTNAME`) plus the process id, unique among replicas.
fn run_options(args: &ServeOptions) -> controller::run::RunOptions {
    let host =
        std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "node-maintenance".into());
    controller::run::RunOptions {
        lease_name: args.lease_name.clone(),
        lease_namespace: args.lease_namespace.clone(),
        identity: format!("{host}-{}", std::process::id()),
        lease_seconds: 15,
        controller: controller::context::ControllerOptions {
            skip_daemonset_pods: args.skip_daemonset_pods,
            max_concurrent_writes: args.max_concurrent_writes,
            max_draining_nodes: (args.max_draining_nodes > 0).then_some(args.max_draining_nodes),
            unmanaged_pods: args.unmanaged_pods,
            emptydir_pods: args.emptydir_pods,
            eviction_api: args.eviction_api,
            eviction_requester: args.eviction_requester.clone(),
            prometheus: args.prometheus.clone(),
            evacuation: args.evacuation,
            ..Default::default()
        },
    }
}

/// Starts the Node and NodeMaintenance watch caches; `/readyz` turns ready once both synced.
fn cluster_parts(client: &kube::Client, readiness: &Arc<Readiness>) -> ClusterCache {
    let (cache, drive) = ClusterCache::start(client.clone());
    tokio::spawn(drive);
    tokio::spawn({
        let (cache, readiness) = (cache.clone(), readiness.clone());
        async move {
            cache.wait_synced().await;
            tracing::info!("Node and NodeMaintenance caches synced");
            readiness.set_caches_synced(true);
        }
    });
    cache
}

/// Runs the webhook until `signal` completes, then shuts down gracefully (SPEC 5): the
/// controller steps down (stops and releases its Lease) and the webhook is not ready at
/// once, still serving for `shutdown_delay`, then in-flight requests get `shutdown_grace`.
/// Sends the bound addresses on `started` once listening.
///
/// The controller (cluster mode) runs beside the webhook; if it stops before shutdown was
/// requested, the same graceful shutdown starts and `serve` returns an error (SPEC 1.2).
///
/// # Errors
/// When the certificate, the TLS configuration, the nodes file or a listen address fails,
/// or when the controller stopped on its own.
pub async fn serve(
    args: ServeOptions,
    signal: impl Future<Output = ()> + Send + 'static,
    started: Option<tokio::sync::oneshot::Sender<Bound>>,
) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (metrics, mut registry) = Metrics::new();
    crate::metrics::register_process_collectors(&mut registry);
    let readiness = Arc::new(Readiness::default());
    let paths = match (args.tls_cert_file.clone(), args.tls_key_file.clone()) {
        (Some(cert), Some(key)) => CertPaths { cert, key },
        _ if args.standalone => {
            let dev = devcert::ensure_dev_certs(&args.cert_dir, &[]).context("creating development certificates")?;
            tracing::info!(ca = %dev.ca.display(), "using development certificates; trust the CA file to call the webhook");
            CertPaths { cert: dev.cert, key: dev.key }
        }
        _ => bail!("--tls-cert-file and --tls-key-file are required outside --standalone"),
    };
    let store = CertStore::load_reporting(paths, metrics.certificate_expiration.clone())
        .context("loading the serving certificate")?;
    readiness.set_cert_loaded();
    tokio::spawn(store.clone().watch(args.cert_poll_interval));
    let tls = Arc::new(tls::server_config(store, args.client_ca.as_deref()).context("building the TLS configuration")?);

    let stop = CancellationToken::new();
    // The controller steps down at the signal, before the webhook's shutdown delay: the
    // standby takes the Lease while this replica still answers admission.
    let step_down = CancellationToken::new();
    let controller_failed = CancellationToken::new();
    let mut controller_task = None;
    let (view, authz) = if args.standalone {
        readiness.set_caches_synced(true);
        standalone_parts(args.nodes_file.as_deref(), args.allow_users.clone(), args.allow_groups.clone())?
    } else {
        let client = kube_client(args.kubeconfig.as_deref(), None).await?;
        let cache = cluster_parts(&client, &readiness);
        registry.register_collector(Box::new(StateMetrics::new(cache.clone())));
        if args.controller {
            let task = tokio::spawn(controller::run::run(
                client.clone(),
                cache.clone(),
                metrics.clone(),
                run_options(&args),
                step_down.clone(),
            ));
            controller_task = Some(supervise_controller(task, step_down.clone(), controller_failed.clone()));
        }
        let sar =
            SarOptions { concurrency: args.sar_concurrency, cache_ttl: args.sar_cache_ttl, timeout: args.sar_timeout };
        let authz: Arc<dyn Authorizer> = Arc::new(SarAuthorizer::new(client, sar, metrics.clone()));
        (Arc::new(cache) as Arc<dyn ClusterView>, authz)
    };

    let state = AppState { view, authz, metrics, readiness: readiness.clone(), max_review_time: args.max_review_time };
    let app = routes::router(state);
    let app = routes::with_limits(app, args.max_concurrent_reviews, args.max_review_time + Duration::from_secs(1));
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding the webhook address {}", args.addr))?;
    let metrics_listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("binding the metrics address {}", args.metrics_addr))?;
    let bound = Bound { addr: listener.local_addr()?, metrics_addr: metrics_listener.local_addr()? };
    tracing::info!(addr = %bound.addr, metrics = %bound.metrics_addr, "serving");
    if let Some(tx) = started {
        let _ = tx.send(bound);
    }

    tokio::spawn({
        let stop = stop.clone();
        // A failed controller starts the same graceful shutdown as a signal.
        let signal = async move {
            tokio::select! {
                () = signal => {}
                () = controller_failed.cancelled() => {}
            }
        };
        async move {
            signal.await;
            step_down.cancel();
            shutdown::drain_after(async {}, readiness, args.shutdown_delay).await;
            stop.cancel();
        }
    });
    let metrics_task =
        tokio::spawn(serve_metrics(metrics_listener, Arc::new(registry), stop.clone().cancelled_owned()));
    let limits =
        Limits { max_connections: args.max_connections, shutdown_grace: args.shutdown_grace, ..Limits::default() };
    serve_https(listener, tls, app, limits, stop.cancelled()).await;
    let controller_failure = match controller_task {
        Some(task) => task.await.unwrap_or_else(|e| Some(format!("controller supervisor failed: {e}"))),
        None => None,
    };
    metrics_task.abort();
    if let Some(why) = controller_failure {
        bail!("the controller stopped before shutdown was requested: {why}");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Waits for the controller runner (SPEC 1.2). When it ends before `stop` (the step-down
/// at shutdown) was cancelled, with an error, without one, or by a panic, logs an error and
/// cancels `failed`, which starts the graceful shutdown; the returned task then yields the
/// reason, and `serve` returns an error so that the process exits non-zero and Kubernetes
/// restarts the pod.
/// Errors at shutdown are only logged (the task yields `None`).
fn supervise_controller(
    task: tokio::task::JoinHandle<Result<(), controller::run::RunError>>,
    stop: CancellationToken,
    failed: CancellationToken,
) -> tokio::task::JoinHandle<Option<String>> {
    tokio::spawn(async move {
        let outcome = task.await;
        let early = !stop.is_cancelled();
        let problem = match outcome {
            Ok(Ok(())) => early.then(|| "it ended without an error".to_owned()),
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(format!("the controller task failed: {e}")),
        };
        let problem = problem?;
        if !early {
            tracing::error!(error = %problem, "controller failed during shutdown");
            return None;
        }
        tracing::error!(error = %problem, "controller stopped before shutdown was requested; shutting down");
        failed.cancel();
        Some(problem)
    })
}

#[cfg(test)]
mod tests {
    use super::ServeOptions;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        opts: ServeOptions,
    }

    fn grace(args: &[&str]) -> Duration {
        Flags::try_parse_from(std::iter::once("serve").chain(args.iter().copied())).unwrap().opts.shutdown_grace
    }

    #[test]
    fn shutdown_grace_keeps_its_old_name_as_an_alias() {
        assert_eq!(grace(&[]), Duration::from_secs(20));
        assert_eq!(grace(&["--shutdown-grace", "3s"]), Duration::from_secs(3));
        assert_eq!(grace(&["--drain-timeout", "4s"]), Duration::from_secs(4));
    }

    #[test]
    fn a_requester_the_api_refuses_stops_the_start_with_the_rule() {
        let parse = |args: &[&str]| Flags::try_parse_from(std::iter::once("serve").chain(args.iter().copied()));
        let default = parse(&[]).expect("the default passes").opts.eviction_requester;
        assert_eq!(default, crate::cluster::eviction_requests::DEFAULT_REQUESTER);
        let refused = parse(&["--eviction-requester", "nodemaintenance.k8s.io/controller"]).err().expect("refused");
        let text = refused.to_string();
        assert!(
            text.contains("--eviction-requester") && text.contains("*.k8s.io, *.kubernetes.io are reserved"),
            "{text}"
        );
        assert!(parse(&["--eviction-requester", "acme.io/drainer"]).is_ok());
    }
}
