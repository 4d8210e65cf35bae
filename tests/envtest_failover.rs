//! Issue 25 on a real kube-apiserver with kube-controller-manager (the disruption controller
//! computes PodDisruptionBudget status), kube-scheduler and the fake kubelet: two `serve`
//! processes share the Lease; the leader is SIGKILLed at a random point of a drain, and the
//! eviction it was making is left half-applied: the PodDisruptionBudget records it in
//! `status.disruptedPods` (the eviction handler's first write, done here as the apiserver
//! does it) and the pod is never deleted. The other replica takes the Lease and finishes the
//! drain within the Lease duration plus the drain time, not the disruption controller's
//! 2-minute `DeletionTimeout`; the budget is never violated; nothing stays cordoned by us
//! after Complete. And where deleting pods is denied (403), such an eviction is left to the
//! Eviction API: nothing forced.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use node_maintenance::api::MAINTENANCES_ANNOTATION;
use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::controller::{Rng, maintenance};
use support::envtest::objects::{
    create_maintenance, create_node, is_cordoned, maintenance_json, node, set_stage, wait_for,
};
use support::envtest::process::Proc;
use support::envtest::requests::metric_sum;
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(120);
/// `serve`'s Lease duration (app.rs: 15 s): how long a killed leader keeps it.
const LEASE: Duration = Duration::from_secs(15);
/// What the rest of the drain may take once the new leader runs: three web pods evicted one
/// at a time (each waits for its replacement to be Ready and the budget to be recomputed).
/// Well below the 2-minute `DeletionTimeout` a half-applied eviction would otherwise cost.
const DRAIN: Duration = Duration::from_secs(30);
const MIN_AVAILABLE: usize = 2;

/// A Deployment `web` of 3 replicas under a PodDisruptionBudget `minAvailable: 2` (one
/// disruption at a time), pinned to `pool=general`.
const WORKLOADS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {pool: general}
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: apps}
spec:
  minAvailable: 2
  selector: {matchLabels: {app: web}}
"#;

/// Running, Ready web pods not being deleted, by name, with their node.
async fn healthy_web(pods: &Api<Pod>) -> BTreeMap<String, String> {
    let Ok(list) = pods.list(&ListParams::default().labels("app=web")).await else { return BTreeMap::new() };
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let status = p.status.as_ref();
            let ready = status
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            ready && status.and_then(|s| s.phase.as_deref()) == Some("Running")
        })
        .map(|p| (p.metadata.name.unwrap_or_default(), p.spec.and_then(|s| s.node_name).unwrap_or_default()))
        .collect()
}

/// The web pods on worker-1 not being deleted.
async fn web_on_worker(pods: &Api<Pod>) -> Vec<String> {
    let list = pods.list(&ListParams::default().labels("app=web")).await.expect("pods");
    list.items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some("worker-1"))
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// The fewest healthy web pods seen, sampled every 100 ms until stopped.
struct Sampler {
    fewest: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(pods: Api<Pod>) -> Self {
        let (fewest, stop) = (Arc::new(AtomicUsize::new(usize::MAX)), Arc::new(AtomicBool::new(false)));
        let (f, s) = (fewest.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                f.fetch_min(healthy_web(&pods).await.len(), Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Sampler { fewest, stop, task }
    }

    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("sampler");
        self.fewest.load(Ordering::SeqCst)
    }
}

/// `node-maintenance serve` with the controller on, as replica `name` (its Lease identity
/// starts with it), against the envtest apiserver as admin.
fn replica(env: &Envtest, name: &'static str) -> Proc {
    replica_with_delay(env, name, "0s")
}

/// [`replica`] with the webhook's `--shutdown-delay`.
fn replica_with_delay(env: &Envtest, name: &'static str, shutdown_delay: &str) -> Proc {
    let certs = node_maintenance::server::devcert::ensure_dev_certs(&env.dir.path().join(format!("certs-{name}")), &[])
        .expect("development certificates");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_node-maintenance"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--shutdown-delay", shutdown_delay])
        .arg("--tls-cert-file")
        .arg(&certs.cert)
        .arg("--tls-key-file")
        .arg(&certs.key)
        .arg("--kubeconfig")
        .arg(&env.admin_kubeconfig)
        .args(["--controller=true", "--lease-namespace", "default"])
        .env("POD_NAME", name)
        .env("RUST_LOG", "node_maintenance=debug");
    Proc::spawn(name, cmd, env.dir.path())
}

/// The identity holding the controller's Lease, once someone other than `not` does.
async fn leader(c: &kube::Client, not: &str) -> String {
    wait_for(&format!("a leader other than {not:?}"), WAIT, || async {
        let lease = Api::<Lease>::namespaced(c.clone(), "default").get("node-maintenance-controller").await;
        let holder = lease.ok().and_then(|l| l.spec).and_then(|s| s.holder_identity);
        holder.filter(|h| !h.is_empty() && h != not).ok_or("no holder yet".to_owned())
    })
    .await
}

/// The controller steps down first: at SIGTERM it stops and releases the Lease at once, while
/// the webhook goes on serving through its 5 s shutdown delay, and the standby, which
/// watches the Lease, holds it within 4 s (before: the delay plus up to a Lease duration).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_sigterm_the_leader_steps_down_first_and_the_standby_holds_the_lease_within_4_s() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    let mut a = Some(replica_with_delay(&env, "replica-a", "5s"));
    let mut b = Some(replica_with_delay(&env, "replica-b", "5s"));
    let first = leader(&c, "").await;
    // Both replicas are up (the standby's Lease watch too) before the leader goes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (mut leaving, standby) =
        if first.starts_with("replica-a") { (a.take(), "replica-b") } else { (b.take(), "replica-a") };
    let leaving = leaving.as_mut().expect("the leader is one of the two");
    // SAFETY: kill(2) with the pid of our own child and a valid signal number.
    assert_eq!(unsafe { libc::kill(leaving.pid() as libc::pid_t, libc::SIGTERM) }, 0);
    let signalled = Instant::now();
    let second = leader(&c, &first).await;
    let took = signalled.elapsed();
    eprintln!("{second} holds the Lease {took:?} after the leader's SIGTERM");
    assert!(second.starts_with(standby), "the standby took the Lease: {second}");
    assert!(took < Duration::from_secs(4), "handover took {took:?}");
    // The leaving replica still serves through its delay, then exits cleanly.
    assert!(leaving.exited().is_none(), "the webhook is still in its shutdown delay");
    let exited = loop {
        if let Some(status) = leaving.exited() {
            break status;
        }
        assert!(signalled.elapsed() < Duration::from_secs(30), "still running: {}", leaving.tail(40));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(exited.success(), "a clean exit: {exited:?}\n{}", leaving.tail(40));
}

/// What the eviction handler writes before it deletes the pod
/// (`pkg/registry/core/pod/storage/eviction.go`, `checkAndDecrement`): the pod in
/// `disruptedPods` at the apiserver's now, one disruption fewer allowed, as an update of the
/// status at the budget's resourceVersion. Only when the budget allows a disruption and its
/// status counts what is healthy now, as the apiserver would accept the eviction. Returns
/// whether it was written.
async fn half_apply_eviction(pdbs: &Api<PodDisruptionBudget>, pods: &Api<Pod>, pod: &str) -> bool {
    let Ok(mut pdb) = pdbs.get("web").await else { return false };
    let healthy = healthy_web(pods).await;
    let Some(status) = pdb.status.as_mut() else { return false };
    let current = status.observed_generation == pdb.metadata.generation
        && status.current_healthy.and_then(|h| usize::try_from(h).ok()) == Some(healthy.len());
    let allowed = status.disruptions_allowed.unwrap_or(0);
    if !current || allowed < 1 || !healthy.contains_key(pod) {
        return false;
    }
    status.disruptions_allowed = Some(allowed - 1);
    status.disrupted_pods.get_or_insert_default().insert(pod.to_owned(), Time(Timestamp::now()));
    pdbs.replace_status("web", &PostParams::default(), &pdb).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_killed_mid_eviction_costs_the_lease_not_the_deletion_timeout() {
    let Some(env) = Envtest::start(Options { workloads: true, ..Options::default() }).await else { return };
    let c = env.client();
    // A new kill point every run; `NM_FAILOVER_SEED=0x...` replays one.
    let seed = std::env::var("NM_FAILOVER_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or(Timestamp::now().as_nanosecond().unsigned_abs() as u64)
        | 1;
    let mut rng = Rng(seed);
    eprintln!("seed {seed:#x} (the kill point; NM_FAILOVER_SEED replays it)");
    create_node(&c, "worker-1", &[("pool", "general")]).await;
    env.kubectl_ok(&["create", "namespace", "apps"]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(WORKLOADS)).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "apps");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "apps");
    wait_for("three web pods healthy on worker-1, one disruption allowed", WAIT, || async {
        let healthy = healthy_web(&pods).await;
        let allowed = pdbs.get("web").await.ok().and_then(|p| p.status).and_then(|s| s.disruptions_allowed);
        if healthy.len() == 3 && allowed == Some(1) { Ok(()) } else { Err(format!("{healthy:?} allowed {allowed:?}")) }
    })
    .await;
    // Room for the replacements.
    create_node(&c, "spare-1", &[("pool", "general")]).await;
    let sampler = Sampler::start(pods.clone());

    let mut a = Some(replica(&env, "replica-a"));
    let mut b = Some(replica(&env, "replica-b"));
    let first = leader(&c, "").await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.expect("created");
    wait_for("worker-1 cordoned by the leader", WAIT, || async {
        if is_cordoned(&node(&c, "worker-1").await) { Ok(()) } else { Err("not yet".to_owned()) }
    })
    .await;
    // A random point of the drain: before, between or during its evictions.
    tokio::time::sleep(Duration::from_millis(rng.below(1500))).await;
    let killed = if first.starts_with("replica-a") { a.take() } else { b.take() };
    drop(killed.expect("the leader is one of the two"));
    let killed_at = Instant::now();
    // Mid-eviction: the eviction the leader was making is accepted by the budget and the pod
    // never deleted, for a web pod still on worker-1 (the drain evicts one at a time).
    let mut half_applied = None;
    while half_applied.is_none() && killed_at.elapsed() < LEASE / 2 {
        if let Some(pod) = web_on_worker(&pods).await.first()
            && half_apply_eviction(&pdbs, &pods, pod).await
        {
            half_applied = Some(pod.clone());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let half_applied = half_applied.unwrap_or_else(|| panic!("no web pod left to half-evict (seed {seed:#x})"));

    let second = leader(&c, &first).await;
    wait_for("m drained", LEASE + DRAIN, || async {
        let m = maintenance_json(&c, "m").await.ok_or("gone")?;
        let drained = &m["status"]["conditions"][0];
        if drained["status"] == "True" { Ok(()) } else { Err(format!("{drained} {:?}", web_on_worker(&pods).await)) }
    })
    .await;
    let took = killed_at.elapsed();
    assert!(web_on_worker(&pods).await.is_empty(), "no web pod left on worker-1");
    assert!(pods.get_opt(&half_applied).await.expect("get").is_none_or(|p| p.metadata.deletion_timestamp.is_some()));
    let reasons = env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await;
    assert!(reasons.contains("EvictionCompleted"), "the half-applied eviction was finished by us: {reasons}");

    set_stage(&c, "m", "Complete").await;
    wait_for("worker-1 released after Complete", WAIT, || async {
        let n = node(&c, "worker-1").await;
        let ours = n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(MAINTENANCES_ANNOTATION));
        if !is_cordoned(&n) && !ours { Ok(()) } else { Err(format!("{:?}", n.metadata.annotations)) }
    })
    .await;
    let fewest = sampler.finish().await;
    assert!(fewest >= MIN_AVAILABLE, "the budget was never violated: {fewest} healthy at worst (seed {seed:#x})");
    eprintln!("seed {seed:#x}: {first} killed, {second} finished the drain {took:?} after the kill");
    drop((a, b));
}

/// A cluster policy that leaves pods to the Eviction API: a DELETE of a pod in `apps` that
/// is not terminating already is denied (403). The eviction handler's own delete skips
/// admission, and the fake kubelet's delete of a terminating pod passes.
const EVICTIONS_ONLY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: evictions-only}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["DELETE"], resources: ["pods"]}
  validations:
  - expression: "has(oldObject.metadata.deletionTimestamp)"
    message: "pods are removed through the Eviction API"
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: evictions-only}
spec:
  policyName: evictions-only
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: apps}}
"#;

/// `DELETE pods` answered 403, from the apiserver's own `apiserver_request_total`.
async fn pod_deletes_denied(env: &Envtest) -> f64 {
    let labels = ["code=\"403\"", "resource=\"pods\"", "verb=\"DELETE\""];
    metric_sum(&env.metrics().await, "apiserver_request_total", &labels).unwrap_or(0.0)
}

/// Issue 25: where deleting pods is denied (a ValidatingAdmissionPolicy here; a ClusterRole
/// without `pods/delete` answers the same 403), an eviction the apiserver accepted and did not
/// carry out cannot be finished by a delete: the controller tries it, is denied, and asks the
/// Eviction API instead, which the budget refuses while the entry stands. Nothing forced: the
/// pod keeps running until the disruption controller drops the entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_applied_eviction_whose_delete_is_denied_is_left_to_the_eviction_api() {
    let Some(env) = Envtest::start(Options { workloads: true, ..Options::default() }).await else { return };
    let c = env.client();
    create_node(&c, "worker-1", &[("pool", "general")]).await;
    env.kubectl_ok(&["create", "namespace", "apps"]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(WORKLOADS)).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    let out = env.kubectl(&["apply", "-f", "-"], Some(EVICTIONS_ONLY)).await;
    assert!(out.status.success(), "policy: {}", String::from_utf8_lossy(&out.stderr));
    let pods: Api<Pod> = Api::namespaced(c.clone(), "apps");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "apps");
    let listed = wait_for("a web pod's eviction half-applied", WAIT, || async {
        let pod = web_on_worker(&pods).await.first().cloned().ok_or("no web pod yet")?;
        if half_apply_eviction(&pdbs, &pods, &pod).await { Ok(pod) } else { Err(format!("{pod} not yet")) }
    })
    .await;
    wait_for("the policy in force", WAIT, || async {
        match pods.delete(&listed, &DeleteParams { dry_run: true, ..Default::default() }).await {
            Err(kube::Error::Api(s)) if s.code == 403 => Ok(()),
            other => Err(format!("{:?}", other.map(|_| "allowed"))),
        }
    })
    .await;
    create_node(&c, "spare-1", &[("pool", "general")]).await;
    let denied_before = pod_deletes_denied(&env).await;
    let serve = replica(&env, "replica-a");
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.expect("created");
    // The apiserver counts the denied deletes; which pod each request was about, and that the
    // eviction of the listed pod followed its denied delete, only serve's log says (Events
    // are aggregated into series that keep the first pod's note).
    let (delete_denied, evicted) = (
        format!("accepted eviction not finished pod=apps/{listed} code=403"),
        format!("eviction pod=apps/{listed} node=worker-1 outcome=\"blocked_by_pdb\""),
    );
    wait_for("the delete denied, then the pod asked through the Eviction API", WAIT, || async {
        let denied = pod_deletes_denied(&env).await - denied_before;
        let log = serve.tail(5000);
        let fallback = log.find(&delete_denied).is_some_and(|d| log[d..].contains(&evicted));
        if denied >= 1.0 && fallback {
            Ok(())
        } else {
            let about: Vec<&str> = log.lines().filter(|l| l.contains(&listed)).collect();
            Err(format!("{denied} deletes denied; serve's log of {listed}: {about:#?}"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pod = pods.get(&listed).await.expect("the listed pod is still there");
    assert!(pod.metadata.deletion_timestamp.is_none(), "nothing forced: {listed} not deleted");
    let reasons = env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await;
    assert!(!reasons.contains("EvictionCompleted"), "no eviction finished by a delete: {reasons}");
    drop(serve);
}
