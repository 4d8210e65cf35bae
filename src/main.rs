//! `node-maintenance`: the CLI. Parses flags and wires the pieces together; the logic lives
//! in the library modules.

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use node_maintenance::app::{self, ServeOptions};
use node_maintenance::server::{devcert, shutdown};
use std::path::PathBuf;

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
    Serve(Box<ServeOptions>),
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
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    let result = match cli.command {
        Command::Serve(args) => tokio_main(app::serve(*args, shutdown::signal(), None)),
        Command::Crd => node_maintenance::api::crd_yaml().map(|y| print!("{y}")).context("rendering the CRD"),
        Command::Rbac => rbac(),
        Command::Certs { out, dns_names } => devcert::ensure_dev_certs(&out, &dns_names)
            .map(|f| println!("wrote {}, {} and {}", f.ca.display(), f.cert.display(), f.key.display()))
            .context("writing development certificates"),
        Command::Review(args) => {
            return tokio_main(review(args)).unwrap_or_else(|e| {
                eprintln!("error: {e:#}");
                std::process::ExitCode::from(2)
            });
        }
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
    let (view, authz) = app::standalone_parts(args.nodes_file.as_deref(), args.allow_users, args.allow_groups)?;
    let req = &rev.request;
    let decision = match args.endpoint {
        ReviewEndpoint::Mutate => node_maintenance::admission::mutate(req),
        ReviewEndpoint::Validate => node_maintenance::admission::validate(req, view.as_ref(), authz.as_ref()).await,
        ReviewEndpoint::ValidateNode => node_maintenance::admission::validate_node(req, view.as_ref()),
    };
    let out: serde_json::Value = serde_json::from_slice(&encode(
        &rev.api_version,
        &req.uid,
        &decision,
        matches!(args.endpoint, ReviewEndpoint::Mutate),
    ))?;
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(if decision.allowed { std::process::ExitCode::SUCCESS } else { std::process::ExitCode::from(1) })
}
