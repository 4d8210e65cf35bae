//! The command line (`node-maintenance`, and `kubectl maintenance` when installed as the
//! kubectl plugin `kubectl-maintenance`): flag parsing and wiring; the work is done by
//! [`crate::app`] (serve), [`review`] (what-if), [`forecast`] (when will it finish) and
//! [`watch`] (progress).

pub mod drain_preview;
pub mod forecast;
pub mod review;
pub mod roll_preview;
pub mod watch;

use crate::admission::{Authorizer, StandaloneAuthorizer};
use crate::app::{self, ServeOptions};
use crate::cluster::sar::{SarAuthorizer, SarOptions};
use crate::cluster::standalone::StaticView;
use crate::cluster::workloads::Workloads;
use crate::metrics::Metrics;
use crate::server::{devcert, shutdown};
use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use k8s_openapi::api::authentication::v1::UserInfo;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// KEP-4212 Declarative Node Maintenance: admission webhook, controller and operator tools.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true, env = "NM_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How tools reach the cluster (kubectl conventions).
#[derive(Args, Clone)]
struct ClusterArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use.
    #[arg(long)]
    context: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

/// The CustomResourceDefinitions the program defines.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
#[value(rename_all = "verbatim")]
enum CrdKind {
    /// `nodemaintenances.nodemaintenance.k8s.io`.
    NodeMaintenance,
    /// `nodedisruptionbudgets.nodemaintenance.k8s.io`.
    NodeDisruptionBudget,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTPS admission webhook (and, in cluster mode, the controller).
    Serve(Box<ServeOptions>),
    /// Print a CustomResourceDefinition generated from the Rust types (YAML).
    Crd {
        /// Which: NodeMaintenance (the default) or NodeDisruptionBudget.
        #[arg(long, value_enum, default_value_t = CrdKind::NodeMaintenance)]
        kind: CrdKind,
    },
    /// Print the RBAC rules the server needs (JSON), as the chart must grant them.
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
    /// What-if of a NodeMaintenance manifest (or one AdmissionReview) through the admission
    /// pipeline, offline (--nodes-file) or against the cluster; writes nothing. With Pods
    /// known (cluster mode, or a dump with Pods) also previews the drain step by step. Exit 0
    /// allowed, 1 denied, 2 usage error.
    Review(ReviewArgs),
    /// When will a maintenance (stored, or a manifest not applied yet) finish under its
    /// windows, blackouts, budgets and rolling holds: a timeline, JSON or a Gantt chart. Reads
    /// the cluster (or --nodes-file), writes nothing.
    Forecast(forecast::ForecastArgs),
    /// Follow a maintenance's progress from a watch: bars on a terminal, lines otherwise.
    Watch {
        /// NodeMaintenance name.
        name: String,
        /// Stop (exit 0) once this is reached.
        #[arg(long, value_enum)]
        until: Option<watch::Until>,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
    /// Print a maintenance's progress once.
    Status {
        /// NodeMaintenance name.
        name: String,
        #[command(flatten)]
        cluster: ClusterArgs,
    },
}

#[derive(Args)]
struct ReviewArgs {
    /// A NodeMaintenance manifest (YAML or JSON), or an AdmissionReview request; `-` for stdin.
    #[arg(short = 'f', long)]
    file: PathBuf,
    /// Offline: Nodes (and NodeMaintenances) as `kubectl get nodes,nm -o yaml`; with Pods and
    /// PDBs (`kubectl get nodes,pods,pdb,rs,nm -A -o yaml`) also a drain preview. Without it
    /// the cluster is read (nothing is written).
    #[arg(long)]
    nodes_file: Option<PathBuf>,
    /// Review as an UPDATE of this stored NodeMaintenance (is the transition allowed?).
    #[arg(long)]
    against: Option<String>,
    /// Offline: the user to review as.
    #[arg(long = "as", default_value = "kubernetes-admin")]
    as_user: String,
    /// Offline: the user's groups (repeatable; default system:masters).
    #[arg(long = "as-group")]
    as_groups: Vec<String>,
    /// Offline: users allowed to delete any node besides system:masters (repeatable).
    #[arg(long = "allow-user")]
    allow_users: Vec<String>,
    /// Offline: groups allowed to delete any node besides system:masters (repeatable).
    #[arg(long = "allow-group")]
    allow_groups: Vec<String>,
    /// Node label to group selected nodes by (besides control-plane and common pool labels).
    #[arg(long)]
    group_by: Option<String>,
    /// For an AdmissionReview file: the endpoint to run it through.
    #[arg(long, value_enum, default_value_t = ReviewEndpoint::Validate)]
    endpoint: ReviewEndpoint,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    output: Output,
    /// Drain preview: list the pods of every group, not only the counts.
    #[arg(short = 'v', long)]
    verbose: bool,
    /// Drain preview: as the controller with `--skip-daemonset-pods` would drain.
    #[arg(long)]
    skip_daemonset_pods: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum ReviewEndpoint {
    Mutate,
    Validate,
    ValidateNode,
    ValidateBudget,
}

/// Logs go to stderr; `RUST_LOG` overrides the default level (info for `serve`, warn for the
/// tools, whose output is on stdout).
fn init_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| default_level.into());
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Runs the command line: parses `std::env::args` (named `kubectl maintenance` when the
/// binary is called `kubectl-maintenance`), runs the command, returns the exit code
/// (0 success/allowed, 1 failure/denied, 2 usage or runtime error for review, forecast and watch).
pub fn main() -> ExitCode {
    let invoked = std::env::args().next().unwrap_or_default();
    let plugin = Path::new(&invoked).file_name().is_some_and(|n| n.to_string_lossy().starts_with("kubectl-"));
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let name = if plugin { "kubectl maintenance" } else { "node-maintenance" };
    cmd = cmd.name(name).bin_name(name);
    let cli = match cmd.try_get_matches().and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    init_tracing(cli.log_format, if matches!(cli.command, Command::Serve(_)) { "info" } else { "warn" });
    let result = match cli.command {
        Command::Serve(args) => tokio_main(app::serve(*args, shutdown::signal(), None)).map(|()| ExitCode::SUCCESS),
        Command::Crd { kind } => {
            let yaml = match kind {
                CrdKind::NodeMaintenance => crate::api::crd_yaml(),
                CrdKind::NodeDisruptionBudget => crate::api::budget_crd_yaml(),
            };
            yaml.map(|y| emit(&y)).map(|()| ExitCode::SUCCESS).context("rendering the CRD")
        }
        Command::Rbac => rbac().map(|()| ExitCode::SUCCESS),
        Command::Certs { out, dns_names } => devcert::ensure_dev_certs(&out, &dns_names)
            .map(|f| emit(&format!("wrote {}, {} and {}\n", f.ca.display(), f.cert.display(), f.key.display())))
            .map(|()| ExitCode::SUCCESS)
            .context("writing development certificates"),
        Command::Review(args) => tokio_main(review_command(args)),
        Command::Forecast(args) => tokio_main(forecast::run(args)),
        Command::Watch { name, until, cluster } => tokio_main(async move {
            let client = client(cluster).await?;
            let tty = std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::io::IsTerminal::is_terminal(&std::io::stdout());
            let met = watch::watch(client, &name, &mut std::io::stdout(), tty, until).await?;
            Ok(if met || until.is_none() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }),
        Command::Status { name, cluster } => tokio_main(async move {
            watch::status(client(cluster).await?, &name, &mut std::io::stdout()).await?;
            Ok(ExitCode::SUCCESS)
        }),
    };
    result.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::from(2)
    })
}

fn tokio_main<T>(f: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?.block_on(f)
}

async fn client(cluster: ClusterArgs) -> anyhow::Result<kube::Client> {
    app::kube_client(cluster.kubeconfig.as_deref(), cluster.context.as_deref()).await
}

fn rbac() -> anyhow::Result<()> {
    use crate::cluster::rbac::{cluster_role_rules, lease_role_rules};
    let out = serde_json::json!({"clusterRole": cluster_role_rules(), "leaseRole": lease_role_rules()});
    emit(&format!("{}\n", serde_json::to_string_pretty(&out)?));
    Ok(())
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
fn emit(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn read_input(file: &Path) -> anyhow::Result<Value> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?
    };
    serde_saphyr::from_str(&text).with_context(|| format!("{}: not YAML or JSON", file.display()))
}

async fn review_command(args: ReviewArgs) -> anyhow::Result<ExitCode> {
    let input = read_input(&args.file)?;
    if input.get("kind").and_then(Value::as_str) == Some("AdmissionReview") {
        return review_admission_review(&input, &args);
    }
    // One snapshot of the cluster (a file or one LIST each): admission reads it as its view,
    // the roll and drain previews read the whole objects.
    let (snapshot, authz, user, workloads): (StaticView, Arc<dyn Authorizer>, UserInfo, _) = match &args.nodes_file {
        Some(file) => {
            let snapshot = StaticView::load(file).context("loading --nodes-file")?;
            let authz = StandaloneAuthorizer::new(args.allow_users.clone(), args.allow_groups.clone());
            let groups =
                if args.as_groups.is_empty() { vec!["system:masters".to_string()] } else { args.as_groups.clone() };
            let user = UserInfo { username: Some(args.as_user.clone()), groups: Some(groups), ..Default::default() };
            let workloads = Workloads::load(file).context("loading Pods and PodDisruptionBudgets of --nodes-file")?;
            (snapshot, Arc::new(authz), user, (!workloads.is_empty()).then_some(workloads))
        }
        None => {
            let client = client(args.cluster.clone()).await?;
            let snapshot = cluster_snapshot(&client).await?;
            let (metrics, _) = Metrics::new();
            let authz = SarAuthorizer::for_myself(client.clone(), SarOptions::default(), metrics);
            let user = current_user(&client).await;
            // Without the right to list Pods or PDBs the review still answers, without a preview.
            let workloads = match Workloads::list(&client).await {
                Ok(workloads) => Some(workloads),
                Err(e) => {
                    eprintln!("note: no drain preview: cannot list Pods and PodDisruptionBudgets: {e}");
                    None
                }
            };
            (snapshot, Arc::new(authz), user, workloads)
        }
    };
    let stored_object = match &args.against {
        None => None,
        Some(name) => {
            let found = snapshot.maintenances.iter().find(|m| m.metadata.name.as_deref() == Some(name.as_str()));
            let Some(found) = found else { bail!("NodeMaintenance {name:?} not found") };
            Some(found.clone())
        }
    };
    let stored = stored_object.as_deref().map(serde_json::to_value).transpose()?;
    let mut report =
        review::what_if(&input, stored.as_ref(), &user, &snapshot, authz.as_ref(), args.group_by.as_deref())
            .await
            .map_err(anyhow::Error::msg)?;
    let created = stored_object.as_ref().and_then(|m| m.metadata.creation_timestamp.as_ref()).map(|t| t.0.as_second());
    let mut nodes: Vec<String> = report.selected.values().flatten().cloned().collect();
    nodes.sort();
    let rolled = roll_preview::Rolled {
        name: &report.name,
        created,
        selected: &nodes,
        max_unavailable: report.max_unavailable.as_ref(),
        stored: stored_object.as_deref(),
        paused: input.pointer("/spec/paused") == Some(&serde_json::Value::Bool(true)),
    };
    report.roll_preview = roll_preview::roll_preview(&rolled, &snapshot);
    if let Some(workloads) = &workloads {
        report.drain_preview = drain_preview(&report, created, &nodes, &snapshot, workloads, args.skip_daemonset_pods);
    }
    match args.output {
        Output::Text => emit(&review::render_text(&report, args.verbose)),
        Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&report)?)),
    }
    Ok(if report.allowed { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The drain preview of a reviewed maintenance: `None` when it has no drainPlan
/// (invalid) or selects no node. `created` is the creation time (Unix seconds) of the
/// maintenance an UPDATE replaces (it orders it among the others); `nodes` the selected ones.
fn drain_preview(
    report: &review::WhatIf,
    created: Option<i64>,
    nodes: &[String],
    cluster: &StaticView,
    workloads: &Workloads,
    skip_daemonset_pods: bool,
) -> Option<drain_preview::DrainPreview> {
    if report.drain_plan.is_empty() || report.selected_count == 0 {
        return None;
    }
    let reviewed = drain_preview::Reviewed {
        name: &report.name,
        created,
        drain_plan: &report.drain_plan,
        nodes,
        max_unavailable: report.max_unavailable.as_ref(),
        wait_for_completion: report.wait_for_completion.as_ref(),
    };
    let mut input = drain_preview::preview_input(
        &reviewed,
        &cluster.nodes,
        &cluster.maintenances,
        &workloads.pods,
        &workloads.pdbs,
        workloads.replica_sets.as_deref(),
        crate::planner::PlannerOptions { skip_daemonset_pods, ..Default::default() },
    );
    // Without spec.evacuation, the controller's default (`--evacuation`, Annotated).
    let mode = report.evacuation.unwrap_or(crate::api::Evacuation::Annotated);
    drain_preview::plan_rollouts(&mut input, mode, &workloads.pods, &workloads.deployments, &workloads.pdbs);
    Some(drain_preview::simulate(&input))
}

/// One LIST of Nodes, NodeMaintenances and NodeDisruptionBudgets (a one-shot command needs
/// no watch).
async fn cluster_snapshot(client: &kube::Client) -> anyhow::Result<StaticView> {
    use kube::api::{Api, ListParams};
    let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing nodes")?;
    let nms = Api::<crate::api::NodeMaintenance>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing NodeMaintenances")?;
    let mut view =
        StaticView::new(nodes.items.into_iter().map(Arc::new).collect(), nms.items.into_iter().map(Arc::new).collect());
    // A cluster without the NodeDisruptionBudget CRD (or the right to list it) has no budgets
    // to preview; the review still answers.
    match Api::<crate::api::NodeDisruptionBudget>::all(client.clone()).list(&ListParams::default()).await {
        Ok(budgets) => view.budgets = budgets.items.into_iter().map(Arc::new).collect(),
        Err(e) => eprintln!("note: no NodeDisruptionBudgets in the roll preview: cannot list them: {e}"),
    }
    Ok(view)
}

/// Who the kubeconfig user is (SelfSubjectReview); a placeholder when the cluster cannot say.
async fn current_user(client: &kube::Client) -> UserInfo {
    use k8s_openapi::api::authentication::v1::SelfSubjectReview;
    let api = kube::Api::<SelfSubjectReview>::all(client.clone());
    let asked = SelfSubjectReview { metadata: Default::default(), status: None };
    match api.create(&Default::default(), &asked).await {
        Ok(r) => r.status.and_then(|s| s.user_info).unwrap_or_default(),
        Err(e) => {
            tracing::debug!(error = %e, "SelfSubjectReview failed");
            UserInfo { username: Some("(current user)".into()), ..Default::default() }
        }
    }
}

/// The offline review of one AdmissionReview request: prints the webhook's response.
fn review_admission_review(input: &Value, args: &ReviewArgs) -> anyhow::Result<ExitCode> {
    use crate::admission::review::{decode, encode};
    let body = serde_json::to_vec(input)?;
    let rev = decode(&body).context("decoding the AdmissionReview")?;
    let (view, authz) =
        app::standalone_parts(args.nodes_file.as_deref(), args.allow_users.clone(), args.allow_groups.clone())?;
    let req = &rev.request;
    let decision = futures::executor::block_on(async {
        match args.endpoint {
            ReviewEndpoint::Mutate => crate::admission::mutate(req),
            ReviewEndpoint::Validate => crate::admission::validate(req, view.as_ref(), authz.as_ref()).await,
            ReviewEndpoint::ValidateNode => crate::admission::validate_node(req, view.as_ref()),
            ReviewEndpoint::ValidateBudget => crate::admission::validate_budget(req),
        }
    });
    let bytes = encode(&rev.api_version, &req.uid, &decision, matches!(args.endpoint, ReviewEndpoint::Mutate));
    let out: Value = serde_json::from_slice(&bytes)?;
    emit(&format!("{}\n", serde_json::to_string_pretty(&out)?));
    Ok(if decision.allowed { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
