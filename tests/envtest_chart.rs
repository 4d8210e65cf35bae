//! The Helm chart on a real kube-apiserver (tests/support/envtest): the rendered chart passes
//! the apiserver's own validation (`kubectl apply --dry-run=server`, bring-your-own
//! certificate mode; and the default cert-manager mode against cert-manager v1.21.1's own
//! CRDs from `../shared/cert-manager/crds`, issue 22), and `serve` runs a whole Cordon → Drain → Complete → delete maintenance
//! as the chart's ServiceAccount, with exactly the chart's RBAC: a permission the chart
//! lacks fails this test (reconcile errors, a missing Lease or Event, a failed
//! SubjectAccessReview, or a 403 at the apiserver), so the RBAC is proven sufficient, not just
//! equal to a list (tests/chart/test_rbac.py checks that).
//!
//! The chart is rendered offline by `hack/render-chart.sh` (helm-python-sdk in the chart
//! virtualenv, created on first use).

mod support;

use base64::Engine;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use support::envtest::objects::{
    create_maintenance, create_node, delete_maintenance, is_cordoned, maintenance_json, node, set_stage, wait_for,
};
use support::envtest::requests::{RequestCounts, metric_sum};
use support::envtest::{Envtest, Options};

const RELEASE_NAMESPACE: &str = "nm-system";
const BYO_SECRET: &str = "nm-webhook-tls";
const WAIT: Duration = Duration::from_secs(60);

/// Kinds that exist only with cert-manager's or the Prometheus Operator's CRDs, which the
/// test apiserver does not serve.
const NEEDS_FOREIGN_CRDS: &[&str] = &["Issuer", "ClusterIssuer", "Certificate", "ServiceMonitor", "PrometheusRule"];

/// What the chart grants the program: applied for real in the ServiceAccount test.
const RBAC_KINDS: &[&str] = &["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"];

/// `--set` words of the bring-your-own-certificate mode, with `ca_pem` as the CA bundle.
fn byo_values(ca_pem: &str) -> Vec<String> {
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    [
        "tls.certManager.enabled=false".to_string(),
        format!("tls.existingSecret={BYO_SECRET}"),
        format!("tls.caBundle={bundle}"),
    ]
    .iter()
    .flat_map(|s| ["--set".to_string(), s.clone()])
    .collect()
}

/// The chart rendered by `hack/render-chart.sh` (CRDs first) for release `nm` in
/// `namespace`, as one JSON value per document.
fn render(namespace: &str, set: &[String]) -> Vec<Value> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let status = Command::new("bash")
        .arg(repo.join("hack/render-chart.sh"))
        .arg(out.path())
        .args(["--namespace", namespace])
        .args(set)
        .status()
        .expect("hack/render-chart.sh runs");
    assert!(status.success(), "hack/render-chart.sh failed ({status})");
    let text = std::fs::read_to_string(out.path()).expect("rendered chart");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("rendered chart parses");
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    assert!(docs.iter().all(|d| d["kind"].is_string() && d["metadata"]["name"].is_string()), "{text}");
    docs
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

/// The documents as one `v1 List` for `kubectl apply -f -`.
fn list(docs: &[&Value]) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string()
}

/// Runs the bundle's kubectl with `kubeconfig` (asynchronously: the in-process `serve`
/// under test runs on the test's runtime).
async fn kubectl_as(env: &Envtest, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    support::envtest::kubectl_with(env.assets, kubeconfig, args, stdin).await
}

/// Runs kubectl as admin (with `stdin`, if any); returns its stdout, panics with its output
/// on failure.
async fn kubectl(env: &Envtest, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl_as(env, &env.admin_kubeconfig, args, stdin).await;
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The API groups the apiserver serves.
async fn served_groups(env: &Envtest) -> BTreeSet<String> {
    let out = kubectl(env, &["api-versions"], None).await;
    out.lines().filter_map(|l| l.split_once('/')).map(|(g, _)| g.to_owned()).collect()
}

#[tokio::test]
async fn rendered_chart_passes_server_side_dry_run() {
    let env = envtest_or_skip!(Options::default());
    kubectl(&env, &["create", "namespace", RELEASE_NAMESPACE], None).await;
    // Neither cert-manager nor the Prometheus Operator is installed here.
    let groups = served_groups(&env).await;
    assert!(!groups.contains("cert-manager.io") && !groups.contains("monitoring.coreos.com"), "{groups:?}");

    // Bring-your-own certificate: nothing that needs a foreign CRD is rendered.
    let byo = render(RELEASE_NAMESPACE, &byo_values(&env.pki.ca_pem));
    let foreign: Vec<String> =
        byo.iter().filter(|d| NEEDS_FOREIGN_CRDS.contains(&kind(d))).map(|d| kind(d).into()).collect();
    assert!(foreign.is_empty(), "the BYO render needs foreign CRDs: {foreign:?}");
    let kinds: BTreeSet<&str> = byo.iter().map(kind).collect();
    for k in [
        "CustomResourceDefinition",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(kinds.contains(k), "the BYO render has no {k}: {kinds:?}");
    }
    // The webhooks carry the CA bundle given, not cert-manager's injection annotation.
    let bundle = base64::engine::general_purpose::STANDARD.encode(&env.pki.ca_pem);
    for hook_config in byo.iter().filter(|d| kind(d).ends_with("WebhookConfiguration")) {
        for hook in hook_config["webhooks"].as_array().expect("webhooks") {
            assert_eq!(hook["clientConfig"]["caBundle"], json!(bundle), "{}", name(hook_config));
        }
    }
    let all: Vec<&Value> = byo.iter().collect();
    let out = kubectl(&env, &["apply", "--dry-run=server", "-f", "-"], Some(&list(&all))).await;
    assert_eq!(out.lines().count(), byo.len(), "one line per object:\n{out}");
    assert!(out.lines().all(|l| l.ends_with("(server dry run)")), "{out}");
    eprintln!("BYO render, server dry run:\n{out}");

    // The chart's CRDs are the ones installed (the harness applied crds/ server-side with
    // kubectl): a server-side diff of the rendered CRDs shows nothing.
    let crds: Vec<&Value> = byo.iter().filter(|d| kind(d) == "CustomResourceDefinition").collect();
    let names: BTreeSet<&str> = crds.iter().map(|c| name(c)).collect();
    assert_eq!(
        names,
        BTreeSet::from(["nodedisruptionbudgets.nodemaintenance.k8s.io", "nodemaintenances.nodemaintenance.k8s.io"])
    );
    let out = kubectl_as(&env, &env.admin_kubeconfig, &["diff", "--server-side", "-f", "-"], Some(&list(&crds))).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "the chart's CRDs differ from the installed ones:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // The default (cert-manager) render: everything but the cert-manager objects, whose CRDs
    // are absent here, passes too; they are left out explicitly by kind (checked against
    // cert-manager's CRDs in cert_manager_render_passes_against_cert_managers_crds).
    let default = render(RELEASE_NAMESPACE, &[]);
    let (foreign, rest): (Vec<&Value>, Vec<&Value>) =
        default.iter().partition(|d| NEEDS_FOREIGN_CRDS.contains(&kind(d)));
    let foreign_kinds: BTreeSet<&str> = foreign.iter().map(|d| kind(d)).collect();
    assert_eq!(foreign_kinds, BTreeSet::from(["Certificate", "Issuer"]), "cert-manager mode renders its objects");
    let out = kubectl(&env, &["apply", "--dry-run=server", "-f", "-"], Some(&list(&rest))).await;
    assert_eq!(out.lines().count(), rest.len(), "{out}");
}

/// The cert-manager CRDs (v1.21.1, unchanged from cert-manager's `deploy/crds/`), installed
/// server-side and served before this returns.
async fn install_cert_manager_crds(env: &Envtest) {
    let crds = support::envtest::assets::shared_dir().join("cert-manager/crds");
    kubectl(env, &["apply", "--server-side", "-f", &crds.display().to_string()], None).await;
    let names = ["certificates", "certificaterequests", "issuers", "clusterissuers"]
        .map(|n| format!("crd/{n}.cert-manager.io"));
    let mut args = vec!["wait", "--for=condition=Established", "--timeout=60s"];
    args.extend(names.iter().map(String::as_str));
    kubectl(env, &args, None).await;
    // Discovery of new CRDs lags their Established condition by a moment.
    let deadline = tokio::time::Instant::now() + WAIT;
    while !served_groups(env).await.contains("cert-manager.io") {
        assert!(tokio::time::Instant::now() < deadline, "cert-manager.io not served");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The rendered object of `kind` named `name`.
fn object<'a>(docs: &'a [Value], kind_: &str, name_: &str) -> &'a Value {
    docs.iter().find(|d| kind(d) == kind_ && name(d) == name_).unwrap_or_else(|| panic!("no {kind_} {name_} rendered"))
}

/// The default render (cert-manager mode) against cert-manager's real schemas: every object,
/// Issuers and Certificates included, passes `kubectl apply --dry-run=server` with strict
/// field validation once cert-manager v1.21.1's CRDs are installed; both webhook
/// configurations ask cainjector (`cert-manager.io/inject-ca-from: <namespace>/<name>`) for
/// the CA of the serving Certificate the chart creates; that Certificate is issued by the
/// chart's CA Issuer, covers the webhook Service's DNS name and fills the Secret the
/// Deployment mounts. cert-manager itself does not run here (README of the CRDs): issuance and
/// injection are not exercised.
#[tokio::test]
async fn cert_manager_render_passes_against_cert_managers_crds() {
    let env = envtest_or_skip!(Options::default());
    kubectl(&env, &["create", "namespace", RELEASE_NAMESPACE], None).await;
    install_cert_manager_crds(&env).await;
    let docs = render(RELEASE_NAMESPACE, &[]);
    let cert_manager: Vec<&Value> = docs.iter().filter(|d| d["apiVersion"] == "cert-manager.io/v1").collect();
    let kinds: Vec<&str> = cert_manager.iter().map(|d| kind(d)).collect();
    assert_eq!(kinds, ["Issuer", "Certificate", "Issuer", "Certificate"], "the chain the chart documents");

    let all: Vec<&Value> = docs.iter().collect();
    let out = kubectl(&env, &["apply", "--dry-run=server", "--validate=strict", "-f", "-"], Some(&list(&all))).await;
    assert_eq!(out.lines().count(), docs.len(), "one line per object:\n{out}");
    assert!(out.lines().all(|l| l.ends_with("(server dry run)")), "{out}");
    for d in &cert_manager {
        let line = format!("{}.cert-manager.io/{} created (server dry run)", kind(d).to_lowercase(), name(d));
        assert!(out.lines().any(|l| l == line), "{line:?} not in:\n{out}");
    }
    eprintln!("cert-manager render, server dry run:\n{out}");

    let hook_configs: Vec<&Value> = docs.iter().filter(|d| kind(d).ends_with("WebhookConfiguration")).collect();
    assert_eq!(hook_configs.len(), 2, "mutating and validating");
    let mut serving = None;
    for hooks in &hook_configs {
        let from = hooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].as_str();
        let (ns, cert) = from.and_then(|f| f.split_once('/')).unwrap_or_else(|| panic!("{}: {from:?}", name(hooks)));
        assert_eq!(ns, RELEASE_NAMESPACE, "{}", name(hooks));
        let certificate = object(&docs, "Certificate", cert);
        assert_eq!(certificate["metadata"]["namespace"], RELEASE_NAMESPACE);
        for hook in hooks["webhooks"].as_array().expect("webhooks") {
            assert!(hook["clientConfig"].get("caBundle").is_none(), "cainjector fills it: {}", name(hooks));
            let service = &hook["clientConfig"]["service"];
            let dns = format!(
                "{}.{}.svc",
                service["name"].as_str().unwrap_or_default(),
                service["namespace"].as_str().unwrap_or_default()
            );
            assert!(
                certificate["spec"]["dnsNames"].as_array().is_some_and(|n| n.contains(&json!(dns))),
                "{dns} not in {cert}"
            );
        }
        serving = Some(certificate);
    }
    let serving = serving.expect("a serving Certificate");
    // The serving Certificate's issuer is the chart's CA Issuer, signed by the chart's CA
    // Certificate, issued by the self-signed Issuer.
    let ca_issuer = object(&docs, "Issuer", serving["spec"]["issuerRef"]["name"].as_str().unwrap_or_default());
    assert_eq!(serving["spec"]["issuerRef"]["kind"], "Issuer");
    let ca_secret = &ca_issuer["spec"]["ca"]["secretName"];
    let ca_cert = docs
        .iter()
        .find(|d| kind(d) == "Certificate" && d["spec"]["secretName"] == *ca_secret)
        .expect("the CA Certificate");
    assert_eq!(ca_cert["spec"]["isCA"], true);
    let root = object(&docs, "Issuer", ca_cert["spec"]["issuerRef"]["name"].as_str().unwrap_or_default());
    assert!(root["spec"]["selfSigned"].is_object(), "the chain starts self-signed");
    // The Deployment mounts the Secret the serving Certificate fills.
    let deployment = docs.iter().find(|d| kind(d) == "Deployment").expect("a Deployment");
    let secrets: Vec<&Value> = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| v["secret"].get("secretName"))
        .collect();
    assert!(secrets.contains(&&serving["spec"]["secretName"]), "{secrets:?}");
}

/// Takes a grant away from a rendered Role or ClusterRole when `NM_CHART_RBAC_DROP` says
/// so (`resource` or `resource:verb`, e.g. `nodes/status` or `leases:create`): a manual check
/// that this test notices a permission the chart lacks. Unset, `role` is returned unchanged.
fn drop_granted(mut role: Value) -> Value {
    let Ok(spec) = std::env::var("NM_CHART_RBAC_DROP") else { return role };
    let (resource, verb) = spec.split_once(':').map_or((spec.as_str(), None), |(r, v)| (r, Some(v)));
    let what = format!("{} {}", kind(&role), name(&role));
    if let Some(rules) = role["rules"].as_array_mut() {
        for rule in
            rules.iter_mut().filter(|r| r["resources"].as_array().is_some_and(|rs| rs.contains(&json!(resource))))
        {
            let verbs = rule["verbs"].as_array_mut().expect("verbs");
            verbs.retain(|v| verb.is_some_and(|verb| v != verb));
            eprintln!("NM_CHART_RBAC_DROP: {} now grants {verbs:?} on {resource}", what);
        }
        rules.retain(|r| r["verbs"].as_array().is_some_and(|v| !v.is_empty()));
    }
    role
}

/// `apiserver_request_total` with code 403 by `(resource, subresource)`.
fn forbidden_requests(metrics: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for line in metrics.lines().filter(|l| l.starts_with("apiserver_request_total{") && l.contains("code=\"403\"")) {
        let counts = RequestCounts::parse(line);
        for ((_, resource, sub), n) in counts.0 {
            *out.entry((resource, sub)).or_default() += n;
        }
    }
    out
}

/// The program's log lines (warnings and errors, and node_maintenance's info), kept in
/// memory and echoed to the test's output.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().expect("logs")).lines().map(str::to_owned).collect()
    }
}

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        eprint!("{}", String::from_utf8_lossy(buf));
        self.0.lock().expect("logs").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the log capture (once per test binary; only this test runs `serve`).
fn capture_logs() -> Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter("warn,node_maintenance=info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        logs
    })
    .clone()
}

/// The resources the program calls (src/cluster/rbac.rs API_CALLS).
const PROGRAM_RESOURCES: &[&str] = &["nodes", "pods", "subjectaccessreviews", "nodemaintenances", "events", "leases"];

/// A pod's `(uid, node, phase)`.
fn pod_state(p: &Pod) -> (String, String, String) {
    (
        p.metadata.uid.clone().unwrap_or_default(),
        p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
        p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
    )
}

/// The running, not terminating pods of the `web` Deployment.
async fn running_web_pods(pods: &Api<Pod>) -> Vec<(String, String, String)> {
    pods.list(&ListParams::default().labels("app=web"))
        .await
        .expect("list pods")
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(pod_state)
        .filter(|(_, node, phase)| !node.is_empty() && phase == "Running")
        .collect()
}

#[tokio::test]
async fn serve_as_the_charts_service_account_runs_a_whole_maintenance() {
    let logs = capture_logs();
    let env = envtest_or_skip!(Options { workloads: true, ..Options::default() });
    let admin = env.client();
    kubectl(&env, &["create", "namespace", RELEASE_NAMESPACE], None).await;

    // Only the chart's ServiceAccount and RBAC, for real (the Deployment, Service and webhook
    // configurations cannot run here: no kubelet runs containers, nothing routes to Services).
    let rendered = render(RELEASE_NAMESPACE, &byo_values(&env.pki.ca_pem));
    let rbac: Vec<&Value> = rendered.iter().filter(|d| RBAC_KINDS.contains(&kind(d))).collect();
    let mut rbac_kinds: Vec<&str> = rbac.iter().map(|d| kind(d)).collect();
    rbac_kinds.sort_unstable();
    assert_eq!(rbac_kinds, RBAC_KINDS, "one of each");
    let rbac: Vec<Value> = rbac.into_iter().cloned().map(drop_granted).collect();
    let rbac: Vec<&Value> = rbac.iter().collect();
    kubectl(&env, &["apply", "-f", "-"], Some(&list(&rbac))).await;
    let sa = name(rbac.iter().find(|d| kind(d) == "ServiceAccount").expect("ServiceAccount"));
    let token = kubectl(&env, &["create", "token", sa, "-n", RELEASE_NAMESPACE, "--duration=1h"], None).await;
    let kubeconfig = env.pki.token_kubeconfig("chart-sa", &env.url, token.trim());
    let whoami = kubectl_as(&env, &kubeconfig, &["auth", "whoami", "-o", "json"], None).await;
    let whoami: Value = serde_json::from_slice(&whoami.stdout).expect("whoami JSON");
    assert_eq!(
        whoami["status"]["userInfo"]["username"],
        json!(format!("system:serviceaccount:{RELEASE_NAMESPACE}:{sa}"))
    );

    // The container arguments of the rendered Deployment, minus what only works in a pod
    // (certificate paths of the Secret volume, listen addresses): the Lease flags come from
    // the chart.
    let deployment = rendered.iter().find(|d| kind(d) == "Deployment").expect("Deployment");
    let chart_args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("a string argument").to_owned())
        .collect();
    assert_eq!(chart_args.first().map(String::as_str), Some("serve"));
    let lease_name =
        chart_args.iter().find_map(|a| a.strip_prefix("--lease-name=")).expect("the chart names the Lease").to_owned();
    assert!(chart_args.contains(&format!("--lease-namespace={RELEASE_NAMESPACE}")), "{chart_args:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = node_maintenance::server::devcert::ensure_dev_certs(&dir.path().join("certs"), &[])
        .expect("development certificates");
    let mut args: Vec<String> = chart_args
        .iter()
        .filter(|a| !["--tls-cert-file", "--tls-key-file", "--addr", "--metrics-addr"].iter().any(|f| a.starts_with(f)))
        .cloned()
        .collect();
    args.extend(
        [
            "--addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--tls-cert-file",
            &certs.cert.display().to_string(),
            "--tls-key-file",
            &certs.key.display().to_string(),
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "--shutdown-delay",
            "0s",
        ]
        .map(String::from),
    );
    assert!(!args.iter().any(|a| a.starts_with("--controller")), "the controller runs (the default): {args:?}");

    // Nodes (the fixtures' RBAC lets alice delete worker-1 and worker-2, bob neither) and a
    // one-replica Deployment the scheduler places on one of them.
    create_node(&admin, "worker-1", &[("pool", "general")]).await;
    create_node(&admin, "worker-2", &[("pool", "general")]).await;
    kubectl(&env, &["create", "namespace", "apps"], None).await;
    let web = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [{"name": "web", "image": "registry.invalid/web:1"}],
                    "terminationGracePeriodSeconds": 1,
                    "nodeSelector": {"pool": "general"},
                },
            },
        },
    });
    kubectl(&env, &["apply", "-f", "-"], Some(&web.to_string())).await;
    let pods = Api::<Pod>::namespaced(admin.clone(), "apps");
    let (first_uid, maintained, _) = wait_for("a web pod Running", WAIT, || async {
        let running = running_web_pods(&pods).await;
        running.into_iter().next().ok_or_else(|| "no running web pod".to_string())
    })
    .await;
    let other = if maintained == "worker-1" { "worker-2" } else { "worker-1" };

    let forbidden_before = forbidden_requests(&env.metrics().await);

    // `serve` as the chart's ServiceAccount: webhook and controller, cluster mode.
    let (bound, stop, task) = support::webhook::launch(&args).await;
    let https = support::webhook::client_trusting(&std::fs::read(&certs.ca).expect("CA"));
    let readyz = format!("https://localhost:{}/readyz", bound.addr.port());
    wait_for("/readyz 200 (Node and NodeMaintenance caches synced)", WAIT, || async {
        match https.get(&readyz).send().await {
            Ok(r) if r.status() == 200 => Ok(()),
            Ok(r) => Err(format!("{}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;

    // The webhook's SubjectAccessReviews, as the ServiceAccount: alice may, bob may not.
    for (fixture, allowed) in
        [("12-create-by-alice-matchfields-validate", true), ("13-create-by-bob-denied-validate", false)]
    {
        let review = support::cluster::recorded(fixture).review();
        let resp: Value = https
            .post(format!("https://localhost:{}/validate?timeout=10s", bound.addr.port()))
            .json(&review)
            .send()
            .await
            .expect("POST /validate")
            .json()
            .await
            .expect("AdmissionReview");
        assert_eq!(resp["response"]["allowed"], json!(allowed), "{fixture}: {:#}", resp["response"]);
    }

    // Cordon → Drain → Complete → delete, created and moved along as admin.
    create_maintenance(&admin, support::controller::maintenance("m", "Cordon", &[maintained.as_str()], None))
        .await
        .expect("maintenance created");
    wait_for(&format!("{maintained} cordoned"), WAIT, || async {
        let n = node(&admin, &maintained).await;
        if is_cordoned(&n) { Ok(()) } else { Err(format!("{:?}", n.spec)) }
    })
    .await;
    let m = maintenance_json(&admin, "m").await.expect("m");
    assert_eq!(m["metadata"]["finalizers"], json!(["nodemaintenance.k8s.io/maintenance-completion"]));

    set_stage(&admin, "m", "Drain").await;
    wait_for("m Drained=True", WAIT, || async {
        let m = maintenance_json(&admin, "m").await.ok_or("gone")?;
        let drained = m["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Drained" && c["status"] == "True");
        if drained { Ok(()) } else { Err(format!("{:#}", m["status"])) }
    })
    .await;
    wait_for(&format!("the web pod evicted from {maintained} and replaced on {other}"), WAIT, || async {
        let all: Vec<_> = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .expect("pods")
            .items
            .iter()
            .map(pod_state)
            .collect();
        let running = running_web_pods(&pods).await;
        let replaced = !all.iter().any(|(uid, _, _)| *uid == first_uid) && running.len() == 1 && running[0].1 == other;
        if replaced { Ok(()) } else { Err(format!("{all:?}")) }
    })
    .await;

    set_stage(&admin, "m", "Complete").await;
    wait_for(&format!("{maintained} uncordoned"), WAIT, || async {
        let n = node(&admin, &maintained).await;
        if is_cordoned(&n) { Err(format!("{:?}", n.spec)) } else { Ok(()) }
    })
    .await;
    delete_maintenance(&admin, "m").await;
    wait_for("m gone (finalizer removed by the controller)", WAIT, || async {
        match maintenance_json(&admin, "m").await {
            None => Ok(()),
            Some(m) => Err(format!("{:#}", m["metadata"])),
        }
    })
    .await;

    // Leader election used the chart's Role: the Lease is in the release namespace.
    let lease = Api::<Lease>::namespaced(admin.clone(), RELEASE_NAMESPACE)
        .get_opt(&lease_name)
        .await
        .expect("get Lease")
        .unwrap_or_else(|| panic!("no Lease {RELEASE_NAMESPACE}/{lease_name}"));
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some_and(|h| !h.is_empty()), "the Lease has a holder");

    // Events are best effort in the program (a failure is only logged): check they arrived.
    let events = kubectl(&env, &["get", "events.events.k8s.io", "-A", "-o", "json"], None).await;
    let events: Value = serde_json::from_str(&events).expect("events JSON");
    let reasons: BTreeSet<&str> = events["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|e| e["reportingController"] == "node-maintenance")
        .filter_map(|e| e["reason"].as_str())
        .collect();
    for reason in ["Cordoned", "Drained", "Uncordoned"] {
        assert!(reasons.contains(reason), "no {reason} Event from node-maintenance: {reasons:?}");
    }

    // No reconcile failed, no SubjectAccessReview failed, evictions went through.
    let metrics = reqwest::get(format!("http://{}/metrics", bound.metrics_addr))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .expect("metrics text");
    let reconciles = metric_sum(&metrics, "node_maintenance_reconciles_total", &[]).unwrap_or(0.0);
    assert!(reconciles > 0.0, "no reconciles counted:\n{metrics}");
    // A reconcile may fail on a 409 Conflict (the fake kubelet writes the Node between the
    // controller's read and its resourceVersion-guarded patch) and is retried; any other
    // failure, a 403 above all, fails the test.
    let errors = metric_sum(&metrics, "node_maintenance_reconcile_errors_total", &[]).unwrap_or(0.0);
    let failed: Vec<String> = logs.lines().into_iter().filter(|l| l.contains("reconcile failed")).collect();
    assert_eq!(errors, failed.len() as f64, "every failed reconcile is logged:\n{failed:#?}\n{metrics}");
    let not_conflicts: Vec<&String> = failed.iter().filter(|l| !l.contains("Conflict")).collect();
    assert!(not_conflicts.is_empty(), "reconciles failed as the chart's ServiceAccount: {not_conflicts:#?}");
    let forbidden: Vec<String> =
        logs.lines().into_iter().filter(|l| l.contains("Forbidden") || l.contains("forbidden")).collect();
    assert!(forbidden.is_empty(), "the program was refused something: {forbidden:#?}");
    eprintln!("reconciles: {reconciles}, failed (409 Conflict, retried): {errors}");
    let sar_errors = metrics
        .lines()
        .filter(|l| l.starts_with("node_maintenance_subject_access_reviews_total{") && l.contains("result=\"error\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert_eq!(sar_errors, 0.0, "{metrics}");
    assert!(
        metric_sum(&metrics, "node_maintenance_subject_access_reviews_total", &[]).unwrap_or(0.0) > 0.0,
        "{metrics}"
    );
    let accepted = metrics
        .lines()
        .filter(|l| l.starts_with("node_maintenance_evictions_total{") && l.contains("result=\"accepted\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(accepted >= 1.0, "no accepted eviction:\n{metrics}");

    // And the apiserver refused nothing the program asks for (no 403 on its resources since it
    // started; the other components run with their own, bootstrapped, rights).
    let forbidden_after = forbidden_requests(&env.metrics().await);
    let new_403: Vec<_> = forbidden_after
        .iter()
        .filter(|((resource, _), _)| PROGRAM_RESOURCES.contains(&resource.as_str()))
        .filter(|(k, n)| **n > forbidden_before.get(k).copied().unwrap_or(0))
        .collect();
    assert!(new_403.is_empty(), "403 Forbidden at the apiserver: {new_403:?}");

    let _ = stop.send(());
    let ended = tokio::time::timeout(Duration::from_secs(30), task).await.expect("serve stops in time");
    ended.expect("serve task").expect("serve returns Ok");
}
