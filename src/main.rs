//! `node-maintenance`: the CLI. Parses flags and wires the pieces together; the logic lives
//! in the library modules.

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use node_maintenance::admission::{Authorizer, ClusterView, StandaloneAuthorizer};
use node_maintenance::cluster::standalone::StaticView;
use node_maintenance::metrics::Metrics;
use node_maintenance::server::routes::{self, AppState};
use node_maintenance::server::tls::{self, CertPaths, CertStore};
use node_maintenance::server::{Limits, Readiness, devcert, serve_https, serve_metrics, shutdown};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// KEP-4212 Declarative Node Maintenance: admission webhook and controller.
#[derive(Parser)]
#[command(name = "node-maintenance", version, about)]
struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true, env = "NM_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTPS admission webhook (and, in cluster mode, the controller).
    Serve(Box<ServeArgs>),
    /// Print the NodeMaintenance CustomResourceDefinition (YAML).
    Crd,
    /// Print the RBAC rules the program needs (JSON), as the chart must grant them.
    Rbac,
    /// Write development certificates (ca.crt, tls.crt, tls.key) into a directory.
    Certs {
        /// Directory to write into.
        #[arg(long, default_value = "certs")]
        out: PathBuf,
        /// Extra DNS names or IP addresses for the serving certificate.
        #[arg(long = "dns-name")]
        dns_names: Vec<String>,
    },
    /// Review an AdmissionReview request offline and print the response (exit 0 allowed,
    /// 1 denied, 2 usage error).
    Review(ReviewArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Standalone mode: no cluster; Nodes from --nodes-file, development certificates when
    /// none are given, authorization by group/user lists.
    #[arg(long)]
    standalone: bool,
    /// HTTPS address of the webhook.
    #[arg(long, default_value = "0.0.0.0:8443", env = "NM_ADDR")]
    addr: SocketAddr,
    /// Plain-HTTP address of /metrics.
    #[arg(long, default_value = "0.0.0.0:8080", env = "NM_METRICS_ADDR")]
    metrics_addr: SocketAddr,
    /// Serving certificate chain (PEM); reloaded when it changes.
    #[arg(long, requires = "tls_key_file", env = "NM_TLS_CERT_FILE")]
    tls_cert_file: Option<PathBuf>,
    /// Serving private key (PEM).
    #[arg(long, requires = "tls_cert_file", env = "NM_TLS_KEY_FILE")]
    tls_key_file: Option<PathBuf>,
    /// Require client certificates signed by this CA bundle (PEM).
    #[arg(long, env = "NM_CLIENT_CA")]
    client_ca: Option<PathBuf>,
    /// Where standalone mode writes development certificates when none are given.
    #[arg(long, default_value = "certs")]
    cert_dir: PathBuf,
    /// How often the certificate files are re-read (in addition to file watching).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    cert_poll_interval: Duration,
    /// Standalone: Nodes (and optionally NodeMaintenances) as `kubectl get nodes -o yaml`.
    #[arg(long)]
    nodes_file: Option<PathBuf>,
    /// Standalone: user allowed to select any node (repeatable); system:masters always is.
    #[arg(long = "allow-user")]
    allow_users: Vec<String>,
    /// Standalone: group allowed to select any node (repeatable).
    #[arg(long = "allow-group")]
    allow_groups: Vec<String>,
    /// Longest time spent on one review; the apiserver's ?timeout= lowers it.
    #[arg(long, default_value = "9s", value_parser = humantime::parse_duration)]
    max_review_time: Duration,
    /// Reviews processed at once; more are refused with 503 (load shedding).
    #[arg(long, default_value_t = 512)]
    max_concurrent_reviews: usize,
    /// Open connections at most.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// After SIGTERM: time spent not ready but still serving.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    shutdown_delay: Duration,
    /// After the delay: time given to in-flight requests.
    #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
    drain_timeout: Duration,
}

#[derive(Args)]
struct ReviewArgs {
    /// AdmissionReview request file (JSON), `-` for stdin.
    #[arg(short = 'f', long)]
    file: PathBuf,
    /// Endpoint to run it through.
    #[arg(long, value_enum, default_value_t = ReviewEndpoint::Validate)]
    endpoint: ReviewEndpoint,
    /// Nodes (and NodeMaintenances) as `kubectl get nodes -o yaml`.
    #[arg(long)]
    nodes_file: Option<PathBuf>,
    /// User allowed to select any node (repeatable); system:masters always is.
    #[arg(long = "allow-user")]
    allow_users: Vec<String>,
    /// Group allowed to select any node (repeatable).
    #[arg(long = "allow-group")]
    allow_groups: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReviewEndpoint {
    Mutate,
    Validate,
    ValidateNode,
}

fn init_tracing(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    let result = match cli.command {
        Command::Serve(args) => tokio_main(serve(*args)),
        Command::Crd => node_maintenance::api::crd_yaml().map(|y| print!("{y}")).context("rendering the CRD"),
        Command::Rbac => rbac(),
        Command::Certs { out, dns_names } => devcert::ensure_dev_certs(&out, &dns_names)
            .map(|f| println!("wrote {}, {} and {}", f.ca.display(), f.cert.display(), f.key.display()))
            .context("writing development certificates"),
        Command::Review(args) => return tokio_main(review(args)).unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn tokio_main<T>(f: impl std::future::Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?.block_on(f)
}

fn rbac() -> anyhow::Result<()> {
    use node_maintenance::cluster::rbac::{cluster_role_rules, lease_role_rules};
    let out = serde_json::json!({"clusterRole": cluster_role_rules(), "leaseRole": lease_role_rules()});
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

fn standalone_parts(
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (metrics, registry) = Metrics::new();
    let readiness = Arc::new(Readiness::default());
    let paths = match (args.tls_cert_file, args.tls_key_file) {
        (Some(cert), Some(key)) => CertPaths { cert, key },
        _ if args.standalone => {
            let dev = devcert::ensure_dev_certs(&args.cert_dir, &[]).context("creating development certificates")?;
            tracing::info!(ca = %dev.ca.display(), "using development certificates; trust the CA file to call the webhook");
            CertPaths { cert: dev.cert, key: dev.key }
        }
        _ => bail!("--tls-cert-file and --tls-key-file are required outside --standalone"),
    };
    let store = CertStore::load(paths).context("loading the serving certificate")?;
    readiness.set_cert_loaded();
    tokio::spawn(store.clone().watch(args.cert_poll_interval));
    let tls = Arc::new(tls::server_config(store, args.client_ca.as_deref()).context("building the TLS configuration")?);

    if !args.standalone {
        bail!("cluster mode is not available in this build yet; use --standalone");
    }
    let (view, authz) = standalone_parts(args.nodes_file.as_deref(), args.allow_users, args.allow_groups)?;
    readiness.set_caches_synced(true);

    let state = AppState { view, authz, metrics, readiness: readiness.clone(), max_review_time: args.max_review_time };
    let app = routes::router(state);
    let app = routes::with_limits(app, args.max_concurrent_reviews, args.max_review_time + Duration::from_secs(1));
    let listener =
        tokio::net::TcpListener::bind(args.addr).await.with_context(|| format!("binding the webhook address {}", args.addr))?;
    let metrics_listener = tokio::net::TcpListener::bind(args.metrics_addr)
        .await
        .with_context(|| format!("binding the metrics address {}", args.metrics_addr))?;
    tracing::info!(addr = %listener.local_addr()?, metrics = %metrics_listener.local_addr()?, "serving");

    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            shutdown::drain_after_signal(readiness, args.shutdown_delay).await;
            stop.cancel();
        }
    });
    let metrics_task = tokio::spawn(serve_metrics(metrics_listener, Arc::new(registry), stop.clone().cancelled_owned()));
    let limits = Limits { max_connections: args.max_connections, drain_timeout: args.drain_timeout, ..Limits::default() };
    serve_https(listener, tls, app, limits, stop.cancelled()).await;
    metrics_task.abort();
    tracing::info!("stopped");
    Ok(())
}

async fn review(args: ReviewArgs) -> anyhow::Result<std::process::ExitCode> {
    use node_maintenance::admission::review::{decode, encode};
    let body = if args.file.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf).context("reading stdin")?;
        buf
    } else {
        std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?
    };
    let rev = decode(&body).context("decoding the AdmissionReview")?;
    let (view, authz) = standalone_parts(args.nodes_file.as_deref(), args.allow_users, args.allow_groups)?;
    let req = &rev.request;
    let decision = match args.endpoint {
        ReviewEndpoint::Mutate => node_maintenance::admission::mutate(req),
        ReviewEndpoint::Validate => node_maintenance::admission::validate(req, view.as_ref(), authz.as_ref()).await,
        ReviewEndpoint::ValidateNode => node_maintenance::admission::validate_node(req, view.as_ref()),
    };
    let out: serde_json::Value =
        serde_json::from_slice(&encode(&rev.api_version, &req.uid, &decision, matches!(args.endpoint, ReviewEndpoint::Mutate)))?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(if decision.allowed { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) })
}
