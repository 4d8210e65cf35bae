//! The real-apiserver test tier (controller-runtime's envtest, in Rust): etcd and a real
//! kube-apiserver v1.36.2 on random loopback ports with a generated PKI, users with client
//! certificates and real RBAC, the product CRD from the chart, and on request
//! kube-controller-manager, kube-scheduler and `fake_kubelet.py` (real PodDisruptionBudget
//! status, ReplicaSets and DaemonSets re-creating pods, pods Running and finishing).
//!
//! Binaries come from `KUBEBUILDER_ASSETS`, else from `../shared/envtest/` ([`assets`]).
//! Without them [`Envtest::start`] prints why and returns `None` (the test returns early);
//! with `NM_ENVTEST_REQUIRED=1` (CI) a missing asset fails the test instead.

pub mod assets;
pub mod audit;
pub mod objects;
pub mod pki;
pub mod process;
pub mod relay;
pub mod requests;

use assets::Assets;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use pki::Pki;
use process::{Proc, free_port};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// What to run beside etcd and the apiserver.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// kube-controller-manager, kube-scheduler and the fake kubelet.
    pub workloads: bool,
    /// The fake kubelet alone (pods Running, terminating pods finished).
    pub kubelet: bool,
    /// kube-controller-manager alone with only these controllers (`--controllers`, e.g.
    /// `"disruption"` for PodDisruptionBudget status), a higher client rate limit, and no
    /// scheduler or kubelet (the scale bench plays those in bulk). Ignored with `workloads`.
    pub controllers: Option<&'static str>,
    /// More kube-apiserver flags (e.g. `--etcd-compaction-interval=5s`).
    pub apiserver_args: &'static [&'static str],
}

/// A running control plane; every process is killed when it is dropped.
pub struct Envtest {
    pub dir: tempfile::TempDir,
    pub assets: &'static Assets,
    pub pki: Pki,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Kubeconfig of `admin` (group `system:masters`).
    pub admin_kubeconfig: PathBuf,
    admin: Client,
    audit_log: PathBuf,
    procs: Vec<Proc>,
}

impl Drop for Envtest {
    fn drop(&mut self) {
        // Dependents first, etcd last.
        while let Some(p) = self.procs.pop() {
            drop(p);
        }
    }
}

/// Starts a control plane, or `None` when the tier's assets are missing (printed, or a
/// panic with `NM_ENVTEST_REQUIRED=1`).
#[macro_export]
macro_rules! envtest_or_skip {
    ($opts:expr) => {
        match $crate::support::envtest::Envtest::start($opts).await {
            Some(env) => env,
            None => return,
        }
    };
}

/// Builds a kube client from a kubeconfig file exactly as `serve` does
/// ([`node_maintenance::app::kube_client`]: no blind 429 retries, so a PodDisruptionBudget
/// refusal reaches the controller instead of being retried inside the client for minutes).
pub async fn client_from(path: &Path) -> Client {
    node_maintenance::app::kube_client(Some(path), None).await.expect("kubeconfig is valid")
}

impl Envtest {
    /// Starts etcd and kube-apiserver (and with `opts.workloads` the controller-manager,
    /// scheduler and fake kubelet), waits until the apiserver is ready, and installs the
    /// product CRD and the fixtures' RBAC (users alice and bob, see tests/fixtures/README.md).
    pub async fn start(opts: Options) -> Option<Envtest> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let assets = match assets::assets() {
            Ok(a) => a,
            Err(why) if std::env::var_os("NM_ENVTEST_REQUIRED").is_some() => {
                panic!("real-apiserver tier required (NM_ENVTEST_REQUIRED) but: {why}")
            }
            Err(why) => {
                eprintln!("SKIPPED: real-apiserver tier not available: {why}");
                return None;
            }
        };
        // etcd writes a lot; memory-backed storage keeps the tests fast.
        let base = Path::new("/dev/shm");
        let dir = if base.is_dir() { tempfile::tempdir_in(base) } else { tempfile::tempdir() }.expect("tempdir");
        let (etcd, etcd_port) = start_etcd(assets, dir.path());
        let mut procs = vec![etcd];
        let pki = Pki::new(dir.path());
        let files = pki.serving_files();
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let mut cmd = Command::new(&assets.kube_apiserver);
        cmd.args([
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={port}"),
            "--advertise-address=127.0.0.1".into(),
            "--endpoint-reconciler-type=none".into(),
            format!("--tls-cert-file={}", files.cert.display()),
            format!("--tls-private-key-file={}", files.key.display()),
            format!("--client-ca-file={}", files.ca.display()),
            "--authorization-mode=Node,RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-account-key-file={}", files.sa_pub.display()),
            format!("--service-account-signing-key-file={}", files.sa_key.display()),
            "--profiling=false".into(),
        ]);
        let (audit_flags, audit_log) = audit::flags(dir.path());
        cmd.args(audit_flags);
        cmd.args(opts.apiserver_args);
        procs.push(Proc::spawn("kube-apiserver", cmd, dir.path()));
        let admin_kubeconfig = pki.kubeconfig("admin", &url, "admin", Some("system:masters"));
        let admin = client_from(&admin_kubeconfig).await;
        wait_ready(&admin, &mut procs).await;
        let mut env = Envtest { dir, assets, pki, url, admin_kubeconfig, admin, audit_log, procs };
        env.install_crd().await;
        env.kubectl_ok(&["apply", "-f", &fixture("manifests/rbac.yaml").display().to_string()]).await;
        env.wait_may_delete_node("alice", "ops", "worker-1").await;
        if opts.workloads {
            env.start_controllers(&files);
        } else if let Some(controllers) = opts.controllers {
            env.start_controller_manager(&files, controllers);
        }
        if opts.workloads || opts.kubelet {
            env.start_kubelet();
        }
        Some(env)
    }

    /// Waits until the RBAC authorizer lets `user` in `group` delete the node `node` (it follows
    /// RBAC objects through a watch: what was just applied is not in effect at once).
    pub async fn wait_may_delete_node(&self, user: &str, group: &str, node: &str) {
        use k8s_openapi::api::authorization::v1::SubjectAccessReview;
        let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({"spec": {"user": user,
            "groups": [group], "resourceAttributes": {"verb": "delete", "resource": "nodes", "name": node}}}))
        .expect("a SubjectAccessReview");
        let api = kube::Api::<SubjectAccessReview>::all(self.client());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = api.create(&Default::default(), &review).await;
            if answer.as_ref().is_ok_and(|a| a.status.as_ref().is_some_and(|s| s.allowed)) {
                return;
            }
            assert!(Instant::now() < deadline, "{user} ({group}) may not delete {node}: {answer:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A client as `admin` (`system:masters`).
    pub fn client(&self) -> Client {
        self.admin.clone()
    }

    /// A kubeconfig file for `user` in `group`.
    pub fn kubeconfig_as(&self, user: &str, group: Option<&str>) -> PathBuf {
        self.pki.kubeconfig(user, &self.url, user, group)
    }

    /// Runs kubectl as admin.
    pub async fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        kubectl_with(self.assets, &self.admin_kubeconfig, args, stdin).await
    }

    /// Runs kubectl as admin and returns its stdout; panics with its stderr on failure.
    pub async fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args, None).await;
        assert!(out.status.success(), "kubectl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The requests of the audit policy ([`audit`]) the apiserver has answered so far, as
    /// audit events, in the order they were logged.
    pub fn audit_events(&self) -> Vec<serde_json::Value> {
        audit::events(&self.audit_log)
    }

    /// The evictions the apiserver accepted so far, in the order it received them: (pod
    /// name, the UID precondition of the request or `""`).
    pub fn accepted_evictions(&self) -> Vec<(String, String)> {
        audit::accepted_evictions(&self.audit_events())
    }

    /// Every eviction request the apiserver has answered so far, whatever the answer, in the
    /// order it received them.
    pub fn evictions(&self) -> Vec<audit::Eviction> {
        audit::evictions(&self.audit_events())
    }

    /// The bodies of the SubjectAccessReviews the apiserver has answered so far, in order.
    pub fn subject_access_reviews(&self) -> Vec<serde_json::Value> {
        let events = self.audit_events().into_iter();
        events
            .filter(|e| e["objectRef"]["resource"] == "subjectaccessreviews")
            .map(|e| e["requestObject"].clone())
            .collect()
    }

    /// The apiserver's `/metrics` text.
    pub async fn metrics(&self) -> String {
        let req = http::Request::get("/metrics").body(Vec::new()).expect("request");
        self.admin.request_text(req).await.expect("apiserver /metrics")
    }

    /// Installs the chart's CRDs (NodeMaintenance, NodeDisruptionBudget) and waits until
    /// both are served.
    async fn install_crd(&mut self) {
        let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/node-maintenance/crds");
        self.kubectl_ok(&["apply", "--server-side", "-f", &crds.display().to_string()]).await;
        for name in ["nodemaintenances.nodemaintenance.k8s.io", "nodedisruptionbudgets.nodemaintenance.k8s.io"] {
            let api = kube::Api::<CustomResourceDefinition>::all(self.client());
            let cond = kube::runtime::conditions::is_crd_established();
            tokio::time::timeout(Duration::from_secs(30), kube::runtime::wait::await_condition(api, name, cond))
                .await
                .expect("CRD established in time")
                .expect("CRD watch");
        }
        // Discovery of a new CRD lags its Established condition by a moment.
        let nms = kube::Api::<node_maintenance::api::NodeMaintenance>::all(self.client());
        let ndbs = kube::Api::<node_maintenance::api::NodeDisruptionBudget>::all(self.client());
        let deadline = Instant::now() + Duration::from_secs(30);
        while nms.list(&Default::default()).await.is_err() || ndbs.list(&Default::default()).await.is_err() {
            assert!(Instant::now() < deadline, "NodeMaintenance and NodeDisruptionBudget APIs not served");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn start_controllers(&mut self, files: &pki::ServingFiles) {
        let mut kcm =
            self.component(self.assets.kube_controller_manager.clone(), "kcm", "system:kube-controller-manager");
        kcm.args([
            "--controllers=*,-node-lifecycle-controller,-service-ca-certificate-publisher-controller".into(),
            "--use-service-account-credentials".into(),
            format!("--service-account-private-key-file={}", files.sa_key.display()),
            format!("--root-ca-file={}", files.ca.display()),
            "--concurrent-replicaset-syncs=5".into(),
        ]);
        self.procs.push(Proc::spawn("kube-controller-manager", kcm, self.dir.path()));
        let sched = self.component(self.assets.kube_scheduler.clone(), "scheduler", "system:kube-scheduler");
        self.procs.push(Proc::spawn("kube-scheduler", sched, self.dir.path()));
    }

    /// kube-controller-manager running only `controllers`, allowed 500 requests/s.
    fn start_controller_manager(&mut self, files: &pki::ServingFiles, controllers: &str) {
        let mut kcm =
            self.component(self.assets.kube_controller_manager.clone(), "kcm", "system:kube-controller-manager");
        kcm.args([
            format!("--controllers={controllers}"),
            "--use-service-account-credentials".into(),
            format!("--service-account-private-key-file={}", files.sa_key.display()),
            format!("--root-ca-file={}", files.ca.display()),
            "--kube-api-qps=500".into(),
            "--kube-api-burst=1000".into(),
        ]);
        self.procs.push(Proc::spawn("kube-controller-manager", kcm, self.dir.path()));
    }

    /// `(name, pid)` of every process of the control plane (etcd first).
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.procs.iter().map(|p| (p.name, p.pid())).collect()
    }

    /// Kills the process `name` (`"kube-apiserver"`, `"kube-controller-manager"`, ...) with
    /// SIGKILL, as a crash would; [`Envtest::restart`] starts it again.
    pub fn kill(&mut self, name: &str) {
        self.proc_mut(name).kill();
    }

    /// Starts the process `name` again with the same flags (the apiserver on the same port
    /// and etcd), and for kube-apiserver waits until it is ready.
    pub async fn restart(&mut self, name: &str) {
        self.proc_mut(name).restart();
        if name == "kube-apiserver" {
            wait_ready(&self.admin, &mut self.procs).await;
        }
    }

    fn proc_mut(&mut self, name: &str) -> &mut Proc {
        self.procs.iter_mut().find(|p| p.name == name).unwrap_or_else(|| panic!("no process {name}"))
    }

    /// A control-plane component authenticating as `user` with its own kubeconfig, without
    /// leader election, serving its health port on a free loopback port.
    fn component(&self, binary: PathBuf, name: &str, user: &str) -> Command {
        let config = self.pki.kubeconfig(name, &self.url, user, None);
        let mut cmd = Command::new(binary);
        cmd.args([
            format!("--kubeconfig={}", config.display()),
            format!("--authentication-kubeconfig={}", config.display()),
            format!("--authorization-kubeconfig={}", config.display()),
            "--leader-elect=false".into(),
            "--authentication-skip-lookup=true".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
        ]);
        cmd
    }

    fn start_kubelet(&mut self) {
        let mut kubelet = Command::new("python3");
        kubelet
            .arg(&self.assets.fake_kubelet)
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .env("PATH", path_with(self.assets.bin_dir()));
        self.procs.push(Proc::spawn("fake-kubelet", kubelet, self.dir.path()));
    }

    /// `node-maintenance serve` (this build's binary) as deployed against this apiserver: the
    /// admin kubeconfig, HTTPS on 127.0.0.1:`port` with a serving certificate of this PKI, plain
    /// metrics on 127.0.0.1:`metrics_port`, leader election in `default`, `RUST_LOG` = `log`.
    /// Spawn it with [`Proc::spawn`]; register its webhooks with [`Envtest::register_webhooks`].
    pub fn serve_command(&self, port: u16, metrics_port: u16, log: &str) -> Command {
        let (cert, key) = self.pki.serving_pair("node-maintenance");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_node-maintenance"));
        cmd.arg("serve")
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .args(["--addr", &format!("127.0.0.1:{port}"), "--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .args(["--lease-namespace", "default"])
            .env("RUST_LOG", log);
        cmd
    }

    /// Registers `/mutate`, `/validate`, `/validate-node` and `/validate-budget` of a webhook listening on
    /// 127.0.0.1:`port` (serving certificate signed by `ca_pem`) with the rules of the
    /// chart, by URL, and waits until the apiserver calls it.
    pub async fn register_webhooks(&self, port: u16, ca_pem: &[u8]) {
        let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, ca_pem);
        let hook = |name: &str, path: &str, policy: &str, rules: serde_json::Value| {
            serde_json::json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": policy, "timeoutSeconds": 10, "rules": rules,
                "clientConfig": {"url": format!("https://127.0.0.1:{port}{path}"), "caBundle": ca}})
        };
        let nm_rule = |ops: &[&str], res: &str| {
            serde_json::json!({"apiGroups": ["nodemaintenance.k8s.io"], "apiVersions": ["v1alpha1"],
                "operations": ops, "resources": [res], "scope": "Cluster"})
        };
        let mut node_hook = hook(
            "validate-node.nodemaintenance.k8s.io",
            "/validate-node",
            "Ignore",
            serde_json::json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"], "scope": "Cluster"}]),
        );
        node_hook["matchConditions"] = serde_json::json!([{"name": "unschedulable-changed", "expression":
            "has(oldObject.spec) && (has(object.spec.unschedulable) ? object.spec.unschedulable : false) != (has(oldObject.spec.unschedulable) ? oldObject.spec.unschedulable : false)"}]);
        let configs = serde_json::json!([
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": "node-maintenance"},
             "webhooks": [hook("mutate.nodemaintenance.k8s.io", "/mutate", "Fail",
                 serde_json::json!([nm_rule(&["CREATE", "UPDATE"], "nodemaintenances")]))]},
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
             "metadata": {"name": "node-maintenance"},
             "webhooks": [hook("validate.nodemaintenance.k8s.io", "/validate", "Fail",
                 serde_json::json!([nm_rule(&["CREATE", "UPDATE", "DELETE"], "nodemaintenances"),
                                    nm_rule(&["UPDATE"], "nodemaintenances/status")])), node_hook,
                 hook("validate-budget.nodemaintenance.k8s.io", "/validate-budget", "Fail",
                 serde_json::json!([nm_rule(&["CREATE", "UPDATE"], "nodedisruptionbudgets")]))]},
        ]);
        for c in configs.as_array().expect("list") {
            let out = self.kubectl(&["apply", "-f", "-"], Some(&c.to_string())).await;
            assert!(out.status.success(), "registering webhooks: {}", String::from_utf8_lossy(&out.stderr));
        }
        // The apiserver picks configurations up from a watch: wait until a dry-run create
        // is defaulted (the mutating webhook ran).
        let probe = serde_json::json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
            "metadata": {"name": "webhook-probe"},
            "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["none"]}]}]}}});
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out =
                self.kubectl(&["create", "--dry-run=server", "-o", "json", "-f", "-"], Some(&probe.to_string())).await;
            if String::from_utf8_lossy(&out.stdout).contains("drainPlan") {
                return;
            }
            assert!(Instant::now() < deadline, "webhook not called: {}", String::from_utf8_lossy(&out.stderr));
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Runs kubectl as `user` in `group`.
    pub async fn kubectl_as(&self, user: &str, group: Option<&str>, args: &[&str], stdin: Option<&str>) -> Output {
        kubectl_with(self.assets, &self.kubeconfig_as(user, group), args, stdin).await
    }
}

/// Starts etcd; returns it and its client port.
fn start_etcd(assets: &Assets, dir: &Path) -> (Proc, u16) {
    let (client, peer) = (free_port(), free_port());
    let mut cmd = Command::new(&assets.etcd);
    cmd.args([
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls=http://127.0.0.1:{client}"),
        format!("--advertise-client-urls=http://127.0.0.1:{client}"),
        format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
        format!("--initial-cluster=default=http://127.0.0.1:{peer}"),
        "--name=default".into(),
        "--quota-backend-bytes=8589934592".into(),
    ]);
    (Proc::spawn("etcd", cmd, dir), client)
}

async fn wait_ready(admin: &Client, procs: &mut [Proc]) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let req = http::Request::get("/readyz").body(Vec::new()).expect("request");
        if admin.request_text(req).await.is_ok_and(|t| t.trim() == "ok") {
            return;
        }
        for p in procs.iter_mut() {
            if let Some(status) = p.exited() {
                panic!("{} exited ({status}) while starting:\n{}", p.name, p.tail(40));
            }
        }
        if Instant::now() > deadline {
            panic!("kube-apiserver not ready after 90 s:\n{}", procs[1].tail(40));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `dir` first, then the current `PATH`.
fn path_with(dir: &Path) -> String {
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// Runs the bundle's kubectl with `kubeconfig` (asynchronously: webhooks and controllers
/// under test run on the test's runtime and must keep answering meanwhile).
pub async fn kubectl_with(assets: &Assets, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(&assets.kubectl);
    cmd.arg("--kubeconfig").arg(kubeconfig).args(args).kill_on_drop(true);
    cmd.stdin(if stdin.is_some() { std::process::Stdio::piped() } else { std::process::Stdio::null() });
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("kubectl starts");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes()).await.expect("kubectl stdin");
    }
    child.wait_with_output().await.expect("kubectl runs")
}

/// A file of `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}
