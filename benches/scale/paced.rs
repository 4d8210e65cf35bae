//! The PodDisruptionBudget-paced phase (`NM_SCALE_PACED` nodes per pool, 0 = none): drains
//! whose pace is set by the budgets, not by the apiserver.
//!
//! Two identical pools, `pool=paced` (our controller) and `pool=pacedkubectl` (`kubectl
//! drain`), each carry `NM_SCALE_PACED_WORKLOADS` ReplicaSets of `NM_SCALE_PACED_REPLICAS`
//! pods in namespace `paced`, spread round-robin over the pool's nodes, each behind a PDB
//! `maxUnavailable: 1`: the common production case. This harness plays the ReplicaSet
//! controller, the scheduler and the kubelet for them: as soon as a pod of theirs is
//! terminating it creates the replacement, bound to a `pool=general` node, and marks it
//! Running and Ready `NM_SCALE_PACED_START_MS` (1,000) later. Only then does the disruption
//! controller let the budget allow the next disruption, so each workload's drain is a chain
//! of `REPLICAS` replacements, the workloads side by side.
//!
//! **The PDB's own pace** is the longest chain: for each workload the sum of its
//! replacements' times to Ready (creation to the Ready patch), the largest over the workloads.
//! No drain can be faster; the controller's goal is within 1.5x of it, and not slower than
//! `kubectl drain` (which retries a refused eviction every 5 s) on the identical pool in the
//! same run.

use super::{
    Config, Phase, Probe, bulk, create_dynamic, dynamic, envtest, node_name, own, owner, pod_json, pool_of, settle,
    terminating, wait_until,
};
use envtest::Envtest;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NAMESPACE: &str = "paced";

/// The two pools: drained by the controller, and by `kubectl drain`.
pub const POOLS: [&str; 2] = ["paced", "pacedkubectl"];

/// The paced workloads of `pool`: (ReplicaSet name, the node index of each replica).
fn workloads(c: &Config, pool: &str) -> Vec<(String, Vec<usize>)> {
    let nodes: Vec<usize> = (0..c.nodes).filter(|&n| pool_of(c, n) == pool).collect();
    (0..c.paced_workloads)
        .map(|w| {
            let spread = (0..c.paced_replicas).map(|r| nodes[(w + r) % nodes.len()]).collect();
            (format!("{pool}-{w:02}"), spread)
        })
        .collect()
}

/// Replacements the stand-in ReplicaSet controller made: workload → (created, Ready) times.
#[derive(Default)]
pub struct Replacements {
    made: Mutex<BTreeMap<String, Vec<(Instant, Instant)>>>,
}

impl Replacements {
    /// The PDB's own pace for the workloads whose names start with `pool-`: the longest sum
    /// of one workload's replacement times to Ready, in seconds, and the replacements made.
    fn pace(&self, pool: &str) -> (f64, usize) {
        let made = self.made.lock().expect("lock");
        let chains = made.iter().filter(|(w, _)| w.strip_prefix(pool).is_some_and(|r| r.starts_with('-')));
        let mut longest: f64 = 0.0;
        let mut count = 0;
        for (_, times) in chains {
            count += times.len();
            longest = longest.max(times.iter().map(|(c, r)| (*r - *c).as_secs_f64()).sum());
        }
        (longest, count)
    }
}

/// The paced ReplicaSets' uids by name (their pods' `app` label).
pub type Owners = BTreeMap<String, String>;

/// Creates the namespace, the ReplicaSets, their PDBs and their pods (bound, Running,
/// Ready) on both pools, then waits until the disruption controller allows one disruption
/// per budget. Returns the ReplicaSets' uids.
pub async fn fill(env: &Envtest, c: &Config) -> Owners {
    let client = env.client();
    let ns_ar = dynamic("", "v1", "Namespace", "namespaces");
    let sa_ar = dynamic("", "v1", "ServiceAccount", "serviceaccounts");
    let rs_ar = dynamic("apps", "v1", "ReplicaSet", "replicasets");
    let pdb_ar = dynamic("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets");
    create_dynamic(&client, &ns_ar, None, json!({"metadata": {"name": NAMESPACE}})).await.expect("namespace");
    create_dynamic(&client, &sa_ar, Some(NAMESPACE), json!({"metadata": {"name": "default"}})).await.expect("SA");
    let wls: Vec<(String, Vec<usize>)> = POOLS.iter().flat_map(|p| workloads(c, p)).collect();
    let mut pods = Vec::new();
    let mut owners = Owners::new();
    for (name, nodes) in &wls {
        let template = json!({"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}});
        let rs = json!({"metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": nodes.len(), "selector": {"matchLabels": {"app": name}}, "template": template}});
        let uid = create_dynamic(&client, &rs_ar, Some(NAMESPACE), rs).await.expect("ReplicaSet");
        owners.insert(name.clone(), uid.clone());
        let pdb = json!({"metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}}});
        create_dynamic(&client, &pdb_ar, Some(NAMESPACE), pdb).await.expect("PodDisruptionBudget");
        for (r, &n) in nodes.iter().enumerate() {
            let mut p = pod_json(&format!("{name}-{r}"), NAMESPACE, &node_name(n), name, "medium");
            p["metadata"]["ownerReferences"] = owner("ReplicaSet", name, &uid);
            pods.push(p);
        }
    }
    let api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    bulk("paced Pods created and Ready", c.concurrency, pods, |p| {
        let api = api.clone();
        async move {
            let pod: Pod = serde_json::from_value(p).expect("Pod");
            own("POST", "pods", "");
            let created = api.create(&PostParams::default(), &pod).await?;
            ready(&api, &created.name_any()).await
        }
    })
    .await;
    let pdbs: Api<kube::api::DynamicObject> = Api::namespaced_with(client, NAMESPACE, &pdb_ar);
    wait_until("paced budgets allow one disruption each", c.timeout, Duration::from_millis(250), || async {
        own("LIST", "poddisruptionbudgets", "");
        let list = pdbs.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
        let allowing = list.items.iter().filter(|p| p.data["status"]["disruptionsAllowed"] == 1).count();
        if allowing == wls.len() { Ok(()) } else { Err(format!("{allowing} of {} budgets allow", wls.len())) }
    })
    .await;
    println!("   paced: {} ReplicaSets of {} pods behind PDBs maxUnavailable 1", wls.len(), c.paced_replicas);
    owners
}

/// A kubelet's status patch: Running and Ready now.
async fn ready(api: &Api<Pod>, name: &str) -> kube::Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
    let status = json!({"status": {"phase": "Running", "startTime": now, "conditions": [
        cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")]}});
    own("PATCH", "pods", "status");
    api.patch_status(name, &PatchParams::default(), &Patch::Strategic(status)).await.map(|_| ())
}

/// The ReplicaSet controller, scheduler and kubelet of namespace `paced`: a replacement for
/// every pod that starts terminating, bound round-robin to the `pool=general` nodes and
/// Ready `NM_SCALE_PACED_START_MS` after its creation. The reaper finishes the old pod.
pub fn start_replicator(
    client: Client,
    c: &Config,
    owners: Owners,
) -> (tokio::task::JoinHandle<()>, Arc<Replacements>) {
    let made = Arc::new(Replacements::default());
    let record = made.clone();
    let general: Vec<String> = (0..c.nodes).filter(|&n| pool_of(c, n) == "general").map(node_name).collect();
    assert!(!general.is_empty(), "the paced phase needs pool=general nodes for the replacements");
    let start = c.paced_start;
    let task = tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let next = AtomicUsize::new(0);
        terminating(Api::namespaced(client.clone(), NAMESPACE))
            .filter_map(|(o, _)| std::future::ready(o.labels().get("app").cloned()))
            .map(|app| {
                let (pods, record) = (pods.clone(), record.clone());
                let n = next.fetch_add(1, Ordering::Relaxed);
                let node = general[n % general.len()].clone();
                let uid = owners.get(&app).cloned().unwrap_or_default();
                async move {
                    let created = Instant::now();
                    let mut p = pod_json(&format!("{app}-r{n}"), NAMESPACE, &node, &app, "medium");
                    p["metadata"]["ownerReferences"] = owner("ReplicaSet", &app, &uid);
                    let pod: Pod = serde_json::from_value(p).expect("Pod");
                    own("POST", "pods", "");
                    if let Err(e) = pods.create(&PostParams::default(), &pod).await {
                        eprintln!("   paced replacement of {app}: {e}");
                        return;
                    }
                    tokio::time::sleep(start.saturating_sub(created.elapsed())).await;
                    match ready(&pods, &pod.name_any()).await {
                        Ok(()) => {
                            record.made.lock().expect("lock").entry(app).or_default().push((created, Instant::now()))
                        }
                        Err(e) => eprintln!("   paced replacement of {app} not made Ready: {e}"),
                    }
                }
            })
            .buffer_unordered(256)
            .collect::<()>()
            .await;
    });
    (task, made)
}

/// The pods of `pool`'s paced workloads still on the pool (terminating or not).
async fn left(client: &Client, c: &Config, pool: &str) -> Result<(), String> {
    own("LIST", "pods", "");
    let list = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    let on_pool = |p: &Pod| {
        let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
        (0..c.nodes).any(|n| pool_of(c, n) == pool && node_name(n) == node)
    };
    let n = list.items.iter().filter(|p| on_pool(p)).count();
    if n == 0 { Ok(()) } else { Err(format!("{n} paced pods left on pool={pool}")) }
}

/// What the two paced drains measured.
pub struct Paced {
    /// The controller's drain, to every paced pod gone from its pool.
    pub ours: Phase,
    /// `kubectl drain` of the identical pool (when `NM_SCALE_KUBECTL` is on).
    pub kubectl: Option<Phase>,
    /// The PDB's own pace on each pool, seconds: (ours, kubectl's).
    pub pace: (f64, f64),
}

/// Drains `pool=paced` with NodeMaintenance `scale-paced` (created at stage Drain) until
/// no paced pod is left on it, then the identical `pool=pacedkubectl` with `kubectl drain`.
pub async fn run(env: &Envtest, probe: &Probe, c: &Config, made: &Replacements) -> Paced {
    let client = env.client();
    let a = probe.snapshot(env).await;
    let nm = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": "scale-paced"},
        "spec": {"stage": "Drain", "reason": "scale bench, PDB-paced",
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": [POOLS[0]]}]}]}}});
    own("POST", "nodemaintenances", "");
    envtest::objects::create_maintenance(&client, nm).await.expect("NodeMaintenance scale-paced created");
    wait_until("the paced pool drained", c.timeout, Duration::from_millis(100), || left(&client, c, POOLS[0])).await;
    let goal = a.at.elapsed().as_secs_f64();
    let b = settle(env, probe).await;
    let ours = Phase { goal: Some(goal), ..Phase::between("paced drain (PDBs)", &a, &b, probe.serve_pid) };
    ours.print();
    let kubectl = if c.kubectl {
        let a = probe.snapshot(env).await;
        let selector = format!("pool={}", POOLS[1]);
        let out = env
            .kubectl(
                &["drain", "-l", &selector, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60m"],
                None,
            )
            .await;
        assert!(out.status.success(), "kubectl drain failed: {}", String::from_utf8_lossy(&out.stderr));
        wait_until("the kubectl pool drained", c.timeout, Duration::from_millis(100), || left(&client, c, POOLS[1]))
            .await;
        let goal = a.at.elapsed().as_secs_f64();
        let b = probe.snapshot(env).await;
        let p =
            Phase { goal: Some(goal), ..Phase::between("paced kubectl drain (reference)", &a, &b, probe.serve_pid) };
        p.print();
        Some(p)
    } else {
        None
    };
    let (ours_pace, ours_made) = made.pace(POOLS[0]);
    let (kubectl_pace, _) = made.pace(POOLS[1]);
    let want = c.paced_workloads * c.paced_replicas;
    assert_eq!(ours_made, want, "replacements made for the controller's paced pool");
    Paced { ours, kubectl, pace: (ours_pace, kubectl_pace) }
}
