//! The controller at cluster scale on a real kube-apiserver (docs/benchmarks.md
//! "Controller at scale on a real apiserver (hack/scale.sh)"). A bench, not a timed test.
//!
//! **Set-up.** etcd and kube-apiserver v1.36.2 on loopback (tests/support/envtest, etcd data
//! in /dev/shm), kube-controller-manager with only the `disruption` controller (real
//! PodDisruptionBudget status; without it every eviction is refused as "not yet observed"),
//! no scheduler and no kubelet: this process plays both in bulk. Through the API, with the
//! admin client and at most `NM_SCALE_CONCURRENCY` (64) requests in flight, it creates:
//! - `NODES` Nodes `node-00000...` labelled `pool=drain` (the first `POOL`, default `NODES / 5`),
//!   `pool=kubectl` (the next `POOL`), `pool=bare` (the next `POOL`), `pool=roll` (the next
//!   `ROLL`, 100), `pool=paced` and `pool=pacedkubectl` (`NM_SCALE_PACED` each, 4; see
//!   `scale/paced.rs`) and `pool=general` (the rest), with a Ready status;
//! - PriorityClasses `low` (1000), `medium` (10000), `high` (100000);
//! - per node one DaemonSet pod of DaemonSet `kube-system/agent` (`system-node-critical`);
//! - `PODS_PER_NODE - 1` workload pods per node from ReplicaSets (priorities low and medium)
//!   and StatefulSets (high) of `NM_SCALE_REPLICAS` (10) pods in namespaces `team-0..9`,
//!   spread over the cluster (replica r of workload w on node `(s * step) % NODES`, s the
//!   slot, `step` coprime with `NODES`), owned by those real objects (ownerReferences with
//!   their uids), bound with `spec.nodeName`, then `Running` and `Ready` (pods/status);
//! - a PodDisruptionBudget for every other workload, `minAvailable` = its pods outside the
//!   three drained pools and the rolled one, so every drained pod can go (each eviction still
//!   goes through the PDB in the apiserver) and the disruption controller is not on the
//!   critical path.
//!
//! Evicted pods get a deletionTimestamp and would stay: a metadata watch of all pods
//! deletes every terminating pod with `gracePeriodSeconds=0` (the kubelet's part).
//!
//! **The product** runs as in production: `node-maintenance serve` (the optimised binary
//! of this build) with `--kubeconfig` (admin), its webhooks registered with the apiserver by
//! URL (a serving certificate from the envtest CA), leader election on a Lease in
//! `default`, `--skip-daemonset-pods` (so it evicts exactly what `kubectl drain
//! --ignore-daemonsets` evicts; `NM_SCALE_EVICT_DAEMONSETS=1` turns that off). It starts
//! after the cluster is filled, as when it is deployed into an existing cluster.
//!
//! **Phases.** `sync` (serve started until its pod cache is synced), `cordon`
//! (NodeMaintenance `scale-drain` over `pool=drain` created at stage Cordon, until every
//! node of the pool is unschedulable), `steady-cordoned` (`NM_SCALE_STEADY` seconds, 30),
//! `drain` (stage Drain until the `Drained` condition is True; the controller's own count of
//! accepted evictions is read at each look, printed as a timeline), `steady-drained`, `bare
//! evictions (reference)` (below), `roll` (NodeMaintenance `scale-roll` over `pool=roll` in
//! stage Drain with `maxUnavailable: NM_SCALE_ROLL_MAX_UNAVAILABLE` (10%); each node is marked done as soon as
//! the status shows it Drained, until every node is Released; the held count is sampled every
//! 250 ms and must never pass the limit), then the reference: `kubectl drain -l pool=kubectl --ignore-daemonsets
//! --delete-emptydir-data --timeout=60m` (kubectl cordons the nodes and drains them one
//! after another, each with its pods evicted concurrently and waited for) on the second,
//! identical pool, timed in the same run; last the PDB-paced drains (`scale/paced.rs`: our
//! drain of `pool=paced` against the PDBs' own pace, then `kubectl drain` of the identical
//! `pool=pacedkubectl`). During steady windows the harness heartbeats
//! Node status as kubelets do (each node once every `NM_SCALE_HEARTBEAT_SECS`, 300 s; 0
//! turns it off).
//!
//! **The bare reference** (`NM_SCALE_BARE`, 1; 0 skips it and labels no `pool=bare`): what the apiserver itself can
//! take, so that the controller's drain rate reads against this machine's ceiling rather than
//! against kubectl. On the third identical pool, `pool=bare`, the harness alone (no
//! NodeMaintenance; nothing is cordoned) lists the pods of each node (`spec.nodeName` field
//! selector, from the watch cache), leaves out the pods the controller would leave out (mirror pods, and DaemonSet
//! pods unless `NM_SCALE_EVICT_DAEMONSETS=1`), and evicts the rest through policy/v1
//! `pods/eviction` with the pod UID as precondition, as the controller does, with
//! `NM_SCALE_CONCURRENCY` (64) requests in flight; a 429 (a PodDisruptionBudget refusal) is
//! asked again after a short backoff (50 ms per attempt, at most 500 ms). Its goal is the
//! controller's: no evictable pod left on the pool (every evicted pod deleted by the
//! harness's kubelet, checked by listing again). The table shows each phase's evictions/s
//! and its ratio to this bare rate, measured in the same run.
//!
//! **Measurements.** Per phase: wall time; requests counted by the apiserver
//! (`apiserver_request_total`, snapshots around the phase) minus the requests this harness
//! counted for itself (by verb, resource and subresource) and minus PodDisruptionBudget
//! requests (kube-controller-manager's status writes, and the LIST the apiserver sends itself
//! for every eviction): what remains is the controller's (or kubectl's in the kubectl
//! phase; the idle controller's reads fall in there too). Lease writes are counted apart
//! (leader election; the apiserver also renews its own identity Lease every 10 s). Evictions accepted (2xx) and refused (429);
//! CPU seconds of serve, kube-apiserver and etcd (/proc/PID/stat utime+stime); serve's
//! VmRSS and VmHWM (/proc/PID/status); reconciles and reconcile pass time from serve's
//! /metrics (`node_maintenance_reconcile_duration_seconds`: mean, and p50/p99 as bucket
//! upper bounds); the load average.
//!
//! Run: `hack/scale.sh [NODES] [PODS_PER_NODE]` (or `cargo bench --bench scale`, knobs as
//! `NM_SCALE_*` variables). Without `--bench` (`cargo test --all-targets` runs benches
//! that way) it is a smoke run over 12 nodes (pools of 2, paced pools of 1, every phase) that takes about half
//! a minute, and prints SKIPPED when the envtest assets are missing (unless
//! `NM_ENVTEST_REQUIRED=1`).

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/support/envtest/mod.rs"]
mod envtest;
#[path = "scale/paced.rs"]
mod paced;
#[path = "common/proc.rs"]
mod proc_status;
use proc_status::rss_mib;

use envtest::process::{Proc, free_port};
use envtest::requests::{RequestCounts, metric_sum};
use envtest::{Envtest, Options};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::PartialObjectMeta;
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The knobs, from `NM_SCALE_*` variables (defaults differ between bench and smoke runs).
#[derive(Clone, Debug)]
struct Config {
    nodes: usize,
    pods_per_node: usize,
    pool: usize,
    replicas: usize,
    concurrency: usize,
    steady: Duration,
    heartbeat_secs: u64,
    evict_daemonsets: bool,
    kubectl: bool,
    /// The bare eviction reference on `pool=bare`.
    bare: bool,
    timeout: Duration,
    /// Nodes of the rolled pool (0: no roll phase).
    roll: usize,
    /// Its `spec.maxUnavailable`.
    roll_max_unavailable: String,
    /// Nodes of each PDB-paced pool (0: no paced phase).
    paced: usize,
    /// Paced ReplicaSets per pool.
    paced_workloads: usize,
    /// Pods of each.
    paced_replicas: usize,
    /// A paced replacement's time from creation to Ready.
    paced_start: Duration,
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

impl Config {
    fn from_env() -> Config {
        let full = std::env::args().any(|a| a == "--bench");
        // Three identical drained pools (controller, kubectl, bare), the rolled one and the
        // rest: fifths at the default 500 nodes, so the rest still spreads the workloads.
        let nodes = env_or("NM_SCALE_NODES", if full { 500 } else { 12 });
        let pool = env_or("NM_SCALE_POOL", (nodes / 5).max(1));
        let roll = env_or("NM_SCALE_ROLL", if full { 100 } else { 2 });
        let bare = env_or("NM_SCALE_BARE", 1) == 1;
        let pools = 2 + usize::from(bare);
        let paced = env_or("NM_SCALE_PACED", if full { 4 } else { 1 });
        assert!(
            pools * pool + roll + paced::POOLS.len() * paced < nodes,
            "{pools} pools of {pool} nodes, {roll} rolled and two paced pools of {paced} do not fit in {nodes} nodes \
             with one left for pool=general"
        );
        Config {
            nodes,
            pods_per_node: env_or("NM_SCALE_PODS_PER_NODE", if full { 20 } else { 4 }).max(1),
            pool,
            replicas: env_or("NM_SCALE_REPLICAS", if full { 10 } else { 3 }).max(1),
            concurrency: env_or("NM_SCALE_CONCURRENCY", 64),
            steady: Duration::from_secs(env_or("NM_SCALE_STEADY", if full { 30 } else { 2 })),
            heartbeat_secs: env_or("NM_SCALE_HEARTBEAT_SECS", 300),
            evict_daemonsets: env_or("NM_SCALE_EVICT_DAEMONSETS", 0) == 1,
            kubectl: env_or("NM_SCALE_KUBECTL", 1) == 1,
            bare,
            timeout: Duration::from_secs(env_or("NM_SCALE_TIMEOUT", if full { 1800 } else { 120 })),
            roll,
            roll_max_unavailable: env_or(
                "NM_SCALE_ROLL_MAX_UNAVAILABLE",
                (if full { "10%" } else { "50%" }).to_owned(),
            ),
            paced,
            paced_workloads: env_or("NM_SCALE_PACED_WORKLOADS", if full { 8 } else { 2 }).max(1),
            paced_replicas: env_or("NM_SCALE_PACED_REPLICAS", if full { 12 } else { 3 }).max(1),
            paced_start: Duration::from_millis(env_or("NM_SCALE_PACED_START_MS", 1000)),
        }
    }

    /// Identical pools drained one way each: the controller's, kubectl's, and the bare
    /// reference's unless it is off (then its nodes are not taken from the rest).
    fn drained_pools(&self) -> usize {
        2 + usize::from(self.bare)
    }

    /// Nodes in a pool that some phase drains; the rest are `pool=general`.
    fn drained_nodes(&self) -> usize {
        self.drained_pools() * self.pool + self.roll + paced::POOLS.len() * self.paced
    }

    /// Workload pods (all pods but the DaemonSet's).
    fn slots(&self) -> usize {
        self.nodes * (self.pods_per_node - 1)
    }
}

fn node_name(n: usize) -> String {
    format!("node-{n:05}")
}

fn pool_of(c: &Config, n: usize) -> &'static str {
    let drained = c.drained_pools() * c.pool;
    if n < drained {
        ["drain", "kubectl", "bare"][n / c.pool]
    } else if n < drained + c.roll {
        "roll"
    } else if n < c.drained_nodes() {
        paced::POOLS[(n - drained - c.roll) / c.paced]
    } else {
        "general"
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A workload: owner kind, namespace, name, priority class and its pods' nodes.
struct Workload {
    kind: &'static str,
    namespace: String,
    name: String,
    priority_class: &'static str,
    nodes: Vec<usize>,
}

fn workloads(c: &Config) -> Vec<Workload> {
    // Replicas of one workload `step` nodes apart: spread over pools like real Deployments.
    let mut step = (c.nodes / c.replicas).max(1) + 1;
    while gcd(step, c.nodes) != 1 {
        step += 1;
    }
    let mut out: Vec<Workload> = Vec::new();
    for s in 0..c.slots() {
        let w = s / c.replicas;
        if out.len() == w {
            let (kind, class, prefix) = match w % 5 {
                0 => ("StatefulSet", "high", "db"),
                1 | 2 => ("ReplicaSet", "low", "batch"),
                _ => ("ReplicaSet", "medium", "web"),
            };
            out.push(Workload {
                kind,
                namespace: format!("team-{}", w % 10),
                name: format!("{prefix}-{w:05}"),
                priority_class: class,
                nodes: Vec::new(),
            });
        }
        out[w].nodes.push((s * step) % c.nodes);
    }
    out
}

// ---------------------------------------------------------------------------------------
// Requests this harness sends, by (verb, resource, subresource), as the apiserver counts.

/// `(verb, resource, subresource)` → requests.
type Counts = BTreeMap<(String, String, String), u64>;

static OWN: LazyLock<Mutex<Counts>> = LazyLock::new(Default::default);

fn own(verb: &str, resource: &str, sub: &str) {
    *OWN.lock().expect("lock").entry((verb.into(), resource.into(), sub.into())).or_default() += 1;
}

fn own_snapshot() -> RequestCounts {
    RequestCounts(OWN.lock().expect("lock").clone())
}

/// Runs `f` for every item with at most `concurrency` in flight, retrying throttling,
/// conflicts on status and transport errors; prints the rate.
async fn bulk<T, F, Fut>(what: &str, concurrency: usize, items: Vec<T>, f: F)
where
    T: Clone,
    F: Fn(T) -> Fut,
    Fut: Future<Output = kube::Result<()>>,
{
    let started = Instant::now();
    let n = items.len();
    let f = &f;
    futures::stream::iter(items)
        .map(|item| async move {
            let mut attempt = 0;
            loop {
                match f(item.clone()).await {
                    Ok(()) => return,
                    Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => return,
                    Err(e) if attempt < 20 => {
                        attempt += 1;
                        if attempt == 1 {
                            eprintln!("   {what}: retrying after {e}");
                        }
                        tokio::time::sleep(Duration::from_millis(200 * attempt)).await;
                    }
                    Err(e) => panic!("{what}: {e}"),
                }
            }
        })
        .buffer_unordered(concurrency)
        .collect::<()>()
        .await;
    let secs = started.elapsed().as_secs_f64();
    println!("   {what}: {n} in {secs:.1} s ({:.0}/s)", n as f64 / secs.max(1e-9));
}

fn dynamic(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn create_dynamic(client: &Client, ar: &ApiResource, ns: Option<&str>, obj: Value) -> kube::Result<String> {
    let obj: DynamicObject = serde_json::from_value(obj).expect("object JSON");
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
        None => Api::all_with(client.clone(), ar),
    };
    own("POST", &ar.plural, "");
    match api.create(&PostParams::default(), &obj).await {
        Ok(o) => Ok(o.uid().unwrap_or_default()),
        Err(kube::Error::Api(s)) if s.code == 409 && s.reason == "AlreadyExists" => {
            own("GET", &ar.plural, "");
            Ok(api.get(&obj.name_any()).await?.uid().unwrap_or_default())
        }
        Err(e) => Err(e),
    }
}

// ---------------------------------------------------------------------------------------
// Filling the cluster.

async fn fill(env: &Envtest, c: &Config) -> usize {
    let client = env.client();
    let conc = c.concurrency;
    let ns_ar = dynamic("", "v1", "Namespace", "namespaces");
    let sa_ar = dynamic("", "v1", "ServiceAccount", "serviceaccounts");
    let pc_ar = dynamic("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses");
    let mut namespaces: Vec<String> = (0..10).map(|i| format!("team-{i}")).collect();
    for ns in &namespaces {
        create_dynamic(&client, &ns_ar, None, json!({"metadata": {"name": ns}})).await.expect("namespace");
    }
    namespaces.push("kube-system".into());
    // No kube-controller-manager ServiceAccount controller: the admission plugin needs them.
    for ns in &namespaces {
        create_dynamic(&client, &sa_ar, Some(ns), json!({"metadata": {"name": "default"}})).await.expect("SA");
    }
    for (name, value) in [("low", 1000), ("medium", 10_000), ("high", 100_000)] {
        create_dynamic(&client, &pc_ar, None, json!({"metadata": {"name": name}, "value": value}))
            .await
            .expect("PriorityClass");
    }

    // Nodes, Ready.
    let nodes: Api<Node> = Api::all(client.clone());
    let ids: Vec<usize> = (0..c.nodes).collect();
    bulk("Nodes created", conc, ids.clone(), |n| {
        let nodes = nodes.clone();
        let node: Node = serde_json::from_value(json!({"metadata": {"name": node_name(n), "labels": {
            "pool": pool_of(c, n), "kubernetes.io/hostname": node_name(n), "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": format!("zone-{}", n % 3)}},
            "spec": {"podCIDR": format!("10.{}.{}.0/24", 64 + n / 256, n % 256)}}))
        .expect("Node");
        async move {
            own("POST", "nodes", "");
            nodes.create(&PostParams::default(), &node).await.map(|_| ())
        }
    })
    .await;
    bulk("Node status Ready", conc, ids.clone(), |n| {
        let nodes = nodes.clone();
        async move { heartbeat(&nodes, &node_name(n)).await }
    })
    .await;

    // Owners: the DaemonSet, the ReplicaSets and StatefulSets, the PDBs.
    let ds_ar = dynamic("apps", "v1", "DaemonSet", "daemonsets");
    let rs_ar = dynamic("apps", "v1", "ReplicaSet", "replicasets");
    let sts_ar = dynamic("apps", "v1", "StatefulSet", "statefulsets");
    let pdb_ar = dynamic("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets");
    let template = |app: &str| json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}});
    let ds_uid = create_dynamic(
        &client,
        &ds_ar,
        Some("kube-system"),
        json!({"metadata": {"name": "agent", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template("agent")}}),
    )
    .await
    .expect("DaemonSet");
    let wls = workloads(c);
    let uids: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    bulk("ReplicaSets and StatefulSets created", conc, (0..wls.len()).collect(), |i| {
        let w = &wls[i];
        let (client, uids) = (client.clone(), uids.clone());
        let ar = if w.kind == "StatefulSet" { &sts_ar } else { &rs_ar };
        let mut spec = json!({"replicas": w.nodes.len(), "selector": {"matchLabels": {"app": w.name}},
            "template": template(&w.name)});
        if w.kind == "StatefulSet" {
            spec["serviceName"] = json!(w.name);
        }
        let obj = json!({"metadata": {"name": w.name, "namespace": w.namespace}, "spec": spec});
        async move {
            let uid = create_dynamic(&client, ar, Some(&w.namespace), obj).await?;
            uids.lock().expect("lock").insert(w.name.clone(), uid);
            Ok(())
        }
    })
    .await;
    let in_pools = |w: &Workload| w.nodes.iter().filter(|&&n| n < c.drained_nodes()).count();
    let with_pdb: Vec<usize> = (0..wls.len()).filter(|i| i % 2 == 0).collect();
    bulk("PodDisruptionBudgets created", conc, with_pdb.clone(), |i| {
        let w = &wls[i];
        let client = client.clone();
        let obj = json!({"metadata": {"name": w.name, "namespace": w.namespace},
            "spec": {"minAvailable": w.nodes.len() - in_pools(w), "selector": {"matchLabels": {"app": w.name}}}});
        let pdb_ar = &pdb_ar;
        async move { create_dynamic(&client, pdb_ar, Some(&w.namespace), obj).await.map(|_| ()) }
    })
    .await;

    // Pods, bound, then Running and Ready.
    let uids = uids.lock().expect("lock").clone();
    let mut pods: Vec<(String, Value)> = Vec::new();
    for n in 0..c.nodes {
        let name = format!("agent-{}", node_name(n));
        let mut p = pod_json(&name, "kube-system", &node_name(n), "agent", "system-node-critical");
        p["metadata"]["ownerReferences"] = owner("DaemonSet", "agent", &ds_uid);
        p["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        pods.push(("kube-system".into(), p));
    }
    for w in &wls {
        for (r, &n) in w.nodes.iter().enumerate() {
            let mut p = pod_json(&format!("{}-{r}", w.name), &w.namespace, &node_name(n), &w.name, w.priority_class);
            p["metadata"]["ownerReferences"] = owner(w.kind, &w.name, &uids[&w.name]);
            pods.push((w.namespace.clone(), p));
        }
    }
    let total = pods.len();
    bulk("Pods created (bound)", conc, pods.clone(), |(ns, p)| {
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let pod: Pod = serde_json::from_value(p).expect("Pod");
        async move {
            own("POST", "pods", "");
            api.create(&PostParams::default(), &pod).await.map(|_| ())
        }
    })
    .await;
    bulk("Pod status Running/Ready", conc, pods, |(ns, p)| {
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let name = p["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        async move {
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
            let status = json!({"status": {"phase": "Running", "startTime": now, "conditions": [
                cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")]}});
            own("PATCH", "pods", "status");
            api.patch_status(&name, &PatchParams::default(), &Patch::Strategic(status)).await.map(|_| ())
        }
    })
    .await;

    // The disruption controller has seen every PDB and every pod.
    let started = Instant::now();
    let pdbs: Api<DynamicObject> = Api::all_with(client.clone(), &pdb_ar);
    loop {
        own("LIST", "poddisruptionbudgets", "");
        let list = pdbs.list(&ListParams::default()).await.expect("list PDBs");
        let want: BTreeMap<String, usize> =
            with_pdb.iter().map(|&i| (wls[i].name.clone(), wls[i].nodes.len())).collect();
        let ready = list
            .items
            .iter()
            .filter(|p| {
                let s = &p.data["status"];
                s["observedGeneration"].as_i64() == p.metadata.generation
                    && s["currentHealthy"].as_u64() == want.get(&p.name_any()).map(|&n| n as u64)
            })
            .count();
        if ready == want.len() {
            println!("   PodDisruptionBudgets observed: {ready} in {:.1} s", started.elapsed().as_secs_f64());
            break;
        }
        assert!(started.elapsed() < c.timeout, "PDB status: {ready} of {} observed", want.len());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    total
}

fn owner(kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true}])
}

fn pod_json(name: &str, ns: &str, node: &str, app: &str, class: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
        "spec": {"nodeName": node, "priorityClassName": class, "terminationGracePeriodSeconds": 30,
            "automountServiceAccountToken": false,
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}})
}

/// A kubelet's Node status update (Ready, heartbeat now).
async fn heartbeat(nodes: &Api<Node>, name: &str) -> kube::Result<()> {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
        "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}});
    own("PATCH", "nodes", "status");
    nodes.patch_status(name, &PatchParams::default(), &Patch::Strategic(status)).await.map(|_| ())
}

// ---------------------------------------------------------------------------------------
// The kubelet's part: finish terminating pods.

/// What the harness's kubelet finished.
#[derive(Default)]
struct Reaped {
    /// Pods it deleted.
    count: AtomicU64,
    /// UIDs of the pods it deleted or found gone (404, or the name taken by another pod): the
    /// bare reference waits on these rather than listing the pool over and over.
    gone: Mutex<HashSet<String>>,
}

impl Reaped {
    fn all_gone<'a>(&self, uids: impl IntoIterator<Item = &'a String>) -> bool {
        let gone = self.gone.lock().expect("lock");
        uids.into_iter().all(|u| gone.contains(u))
    }
}

/// Each pod of `api` once, when the watch first shows it terminating, with its uid.
fn terminating(api: Api<PartialObjectMeta<Pod>>) -> impl futures::Stream<Item = (PartialObjectMeta<Pod>, String)> {
    let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
    watcher(api, watcher::Config::default().any_semantic()).default_backoff().applied_objects().filter_map(move |o| {
        let seen = seen.clone();
        async move {
            let o = o.ok()?;
            o.metadata.deletion_timestamp.as_ref()?;
            let uid = o.metadata.uid.clone()?;
            seen.lock().expect("lock").insert(uid.clone()).then_some((o, uid))
        }
    })
}

fn start_pod_reaper(client: Client, concurrency: usize) -> (tokio::task::JoinHandle<()>, Arc<Reaped>) {
    let reaped = Arc::new(Reaped::default());
    let done = reaped.clone();
    let task = tokio::spawn(async move {
        terminating(Api::all(client.clone()))
            .filter_map(|(o, uid)| async move { Some((o.namespace()?, o.name_any(), uid)) })
            .map(|(ns, name, uid)| {
                let (client, done) = (client.clone(), done.clone());
                async move {
                    let dp = DeleteParams {
                        grace_period_seconds: Some(0),
                        preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
                        ..Default::default()
                    };
                    own("DELETE", "pods", "");
                    let gone = match Api::<Pod>::namespaced(client, &ns).delete(&name, &dp).await {
                        Ok(_) => {
                            done.count.fetch_add(1, Ordering::Relaxed);
                            true
                        }
                        Err(kube::Error::Api(s)) => s.code == 404 || s.code == 409,
                        Err(_) => false,
                    };
                    if gone {
                        done.gone.lock().expect("lock").insert(uid);
                    }
                }
            })
            .buffer_unordered(concurrency)
            .collect::<()>()
            .await;
    });
    (task, reaped)
}

// ---------------------------------------------------------------------------------------
// Measuring.

const CLK_TCK: f64 = 100.0;

/// utime + stime of a process, in seconds.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
    // Fields 14 and 15 of stat; `after` starts at field 3.
    (tick(11) + tick(12)) / CLK_TCK
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `apiserver_request_total` by code for one verb, resource and subresource.
fn by_code(metrics: &str, verb: &str, resource: &str, sub: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let want = [format!("verb=\"{verb}\""), format!("resource=\"{resource}\""), format!("subresource=\"{sub}\"")];
    for line in metrics.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
        if !want.iter().all(|w| line.contains(w.as_str())) || !line.contains("dry_run=\"\"") {
            continue;
        }
        let Some((labels, value)) = line.rsplit_once("} ") else { continue };
        let code = labels.split("code=\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("").to_owned();
        *out.entry(code).or_default() += value.trim().parse::<f64>().unwrap_or(0.0) as u64;
    }
    out
}

/// One look at everything measured.
struct Snapshot {
    at: Instant,
    apiserver: String,
    own: RequestCounts,
    serve: String,
    cpu: BTreeMap<&'static str, f64>,
}

struct Probe {
    serve_pid: u32,
    metrics_url: String,
    http: reqwest::Client,
    pids: Vec<(&'static str, u32)>,
}

impl Probe {
    async fn snapshot(&self, env: &Envtest) -> Snapshot {
        let serve = match self.http.get(&self.metrics_url).send().await {
            Ok(r) => r.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        };
        let mut cpu: BTreeMap<&'static str, f64> = self.pids.iter().map(|&(n, p)| (n, cpu_secs(p))).collect();
        cpu.insert("serve", cpu_secs(self.serve_pid));
        Snapshot { at: Instant::now(), apiserver: env.metrics().await, own: own_snapshot(), serve, cpu }
    }
}

/// Reconcile pass time between two snapshots: (count, mean, p50 bound, p99 bound) in ms.
fn reconcile_stats(a: &str, b: &str) -> (u64, f64, f64, f64) {
    const FAMILY: &str = "node_maintenance_reconcile_duration_seconds";
    let d = |f: &str| metric_sum(b, f, &[]).unwrap_or(0.0) - metric_sum(a, f, &[]).unwrap_or(0.0);
    let count = d(&format!("{FAMILY}_count"));
    let sum = d(&format!("{FAMILY}_sum"));
    let buckets = |text: &str| -> Vec<(f64, f64)> {
        text.lines()
            .filter_map(|l| l.strip_prefix(&format!("{FAMILY}_bucket{{le=\"")))
            .filter_map(|r| {
                let (le, rest) = r.split_once('"')?;
                let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
                Some((le, rest.rsplit(' ').next()?.parse().ok()?))
            })
            .collect()
    };
    let (ba, bb) = (buckets(a), buckets(b));
    let quantile = |q: f64| {
        for (i, (le, v)) in bb.iter().enumerate() {
            let before = ba.get(i).map_or(0.0, |x| x.1);
            if count > 0.0 && v - before >= q * count {
                return *le * 1e3;
            }
        }
        f64::NAN
    };
    let mean = if count > 0.0 { sum / count * 1e3 } else { f64::NAN };
    (count as u64, mean, quantile(0.5), quantile(0.99))
}

/// What one phase cost.
struct Phase {
    name: String,
    /// Until its goal (all cordoned, Drained=True), when it has one.
    goal: Option<f64>,
    /// Until the controller stopped writing (snapshot to snapshot).
    secs: f64,
    /// Requests of the product (or kubectl) by `verb resource[/sub]`.
    requests: RequestCounts,
    leases: u64,
    evictions_ok: u64,
    evictions_429: u64,
    cpu: BTreeMap<&'static str, f64>,
    rss: f64,
    hwm: f64,
    reconciles: (u64, f64, f64, f64),
    load: String,
}

impl Phase {
    fn between(name: &str, a: &Snapshot, b: &Snapshot, serve_pid: u32) -> Phase {
        let total = RequestCounts::parse(&b.apiserver).since(&RequestCounts::parse(&a.apiserver));
        let mine = b.own.since(&a.own);
        let mut requests = BTreeMap::new();
        let mut leases = 0;
        for (k, v) in total.0 {
            let rest = v.saturating_sub(mine.0.get(&k).copied().unwrap_or(0));
            let (verb, resource, _) = &k;
            // PDB requests are kube-controller-manager's status writes and the apiserver's
            // own reads while it admits evictions; nobody else touches PDBs here.
            if rest == 0 || resource == "poddisruptionbudgets" {
                continue;
            }
            if resource == "leases" && envtest::requests::WRITE_VERBS.contains(&verb.as_str()) {
                leases += rest;
                continue;
            }
            requests.insert(k, rest);
        }
        let ev = |t: &str| by_code(t, "POST", "pods", "eviction");
        let (ea, eb) = (ev(&a.apiserver), ev(&b.apiserver));
        let delta = |pred: &dyn Fn(&str) -> bool| -> u64 {
            eb.iter().filter(|(c, _)| pred(c)).map(|(c, v)| v - ea.get(c).copied().unwrap_or(0)).sum()
        };
        let cpu = b.cpu.iter().map(|(k, v)| (*k, v - a.cpu.get(k).copied().unwrap_or(0.0))).collect();
        let (rss, hwm) = rss_mib(serve_pid);
        Phase {
            name: name.into(),
            goal: None,
            secs: (b.at - a.at).as_secs_f64(),
            requests: RequestCounts(requests),
            leases,
            evictions_ok: delta(&|c| c.starts_with('2')),
            evictions_429: delta(&|c| c == "429"),
            cpu,
            rss,
            hwm,
            reconciles: reconcile_stats(&a.serve, &b.serve),
            load: loadavg(),
        }
    }

    fn writes(&self) -> u64 {
        self.requests
            .0
            .iter()
            .filter(|((v, _, _), _)| envtest::requests::WRITE_VERBS.contains(&v.as_str()))
            .map(|(_, n)| n)
            .sum()
    }

    fn print(&self) {
        let cpu = |k: &str| self.cpu.get(k).copied().unwrap_or(f64::NAN);
        println!(
            "== {}: {}{:.1} s; writes {} (+{} lease renewals); evictions {} accepted, {} refused (429); \
             CPU s: serve {:.2} ({:.1}% of a core), apiserver {:.1}, etcd {:.1}; serve VmRSS {:.0} MiB VmHWM {:.0} MiB; \
             reconciles {} (mean {:.1} ms, p50 <= {:.1} ms, p99 <= {:.1} ms); load {}",
            self.name,
            self.goal.map_or(String::new(), |g| format!("goal reached in {g:.1} s, settled after ")),
            self.secs,
            self.writes(),
            self.leases,
            self.evictions_ok,
            self.evictions_429,
            cpu("serve"),
            100.0 * cpu("serve") / self.secs.max(1e-9),
            cpu("kube-apiserver"),
            cpu("etcd"),
            self.rss,
            self.hwm,
            self.reconciles.0,
            self.reconciles.1,
            self.reconciles.2,
            self.reconciles.3,
            self.load,
        );
        let list: Vec<String> = self
            .requests
            .0
            .iter()
            .map(|((v, r, s), n)| format!("{v} {r}{}{s} {n}", if s.is_empty() { "" } else { "/" }))
            .collect();
        println!("   requests: {}", if list.is_empty() { "none".into() } else { list.join(", ") });
    }
}

// ---------------------------------------------------------------------------------------
// The run.

async fn wait_until<F, Fut>(what: &str, timeout: Duration, every: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) if Instant::now() > deadline => panic!("timed out waiting for {what}; last seen: {last}"),
            Err(_) => tokio::time::sleep(every).await,
        }
    }
}

/// Heartbeats Node status (each node once every `period`) until `stop`.
fn heartbeats(client: &Client, c: &Config, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let (count, period) = (c.nodes, c.heartbeat_secs);
    tokio::spawn(async move {
        if period == 0 {
            return;
        }
        let mut tick = tokio::time::interval(Duration::from_secs_f64(period as f64 / count as f64));
        for n in (0..count).cycle() {
            tokio::select! {
                _ = tick.tick() => {}
                () = stop.cancelled() => return,
            }
            let _ = heartbeat(&nodes, &node_name(n)).await;
        }
    })
}

/// Waits until the controller sent no write for 2 s in a row (at most 60 s) and returns
/// the snapshot that shows it.
async fn settle(env: &Envtest, probe: &Probe) -> Snapshot {
    let mut last = probe.snapshot(env).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = probe.snapshot(env).await;
        if Phase::between("", &last, &now, probe.serve_pid).writes() == 0 || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

async fn steady(name: &str, env: &Envtest, probe: &Probe, c: &Config) -> Phase {
    // Heartbeats start after the first snapshot and the last one has been answered before
    // the second: the apiserver counts each of them inside the window, as this harness does.
    let a = probe.snapshot(env).await;
    let stop = CancellationToken::new();
    let beats = heartbeats(&env.client(), c, stop.clone());
    tokio::time::sleep(c.steady).await;
    stop.cancel();
    let _ = beats.await;
    let b = probe.snapshot(env).await;
    Phase::between(name, &a, &b, probe.serve_pid)
}

async fn pool_cordoned(nodes: &Api<Node>, pool: &str) -> Result<(), String> {
    own("LIST", "nodes", "");
    let list = nodes.list(&ListParams::default().labels(&format!("pool={pool}"))).await.map_err(|e| e.to_string())?;
    let left = list.items.iter().filter(|n| !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)).count();
    if left == 0 { Ok(()) } else { Err(format!("{left} of {} nodes not cordoned", list.items.len())) }
}

/// What the roll phase adds to its [`Phase`].
struct Rolled {
    /// Most nodes of the pool held (not Waiting, not Released) at one sample.
    most_held: usize,
    /// Its maxUnavailable resolved.
    limit: usize,
}

/// The roll phase: NodeMaintenance `scale-roll` over `pool=roll` in stage Drain
/// with `spec.maxUnavailable`; every node the status shows `Drained` is marked done (the
/// `nodemaintenance.k8s.io/done` annotation) at once, as an automation that reboots a
/// drained node would; the goal is every node `Released`. Samples the held count every
/// 250 ms.
async fn roll(env: &Envtest, probe: &Probe, c: &Config) -> (Phase, Rolled) {
    let client = env.client();
    let nodes: Api<Node> = Api::all(client.clone());
    let a = probe.snapshot(env).await;
    let nm = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": "scale-roll"},
        "spec": {"stage": "Drain", "reason": "scale bench, rolling", "maxUnavailable": c.roll_max_unavailable,
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["roll"]}]}]}}});
    own("POST", "nodemaintenances", "");
    envtest::objects::create_maintenance(&client, nm).await.expect("NodeMaintenance scale-roll created");
    let marked = std::cell::RefCell::new(HashSet::new());
    let most_held = std::cell::Cell::new(0);
    let last_print = std::cell::Cell::new(Instant::now());
    wait_until("every rolled node released", c.timeout, Duration::from_millis(250), || async {
        own("GET", "nodemaintenances", "");
        let m = envtest::objects::maintenance_json(&client, "scale-roll").await.unwrap_or_default();
        let statuses = m["status"]["nodeStatuses"].as_array().cloned().unwrap_or_default();
        let phase_of = |s: &Value| s["phase"].as_str().unwrap_or("").to_owned();
        let held = statuses.iter().filter(|s| !matches!(phase_of(s).as_str(), "Waiting" | "Released")).count();
        most_held.set(most_held.get().max(held));
        for s in statuses.iter().filter(|s| phase_of(s) == "Drained") {
            let node = s["nodeRef"]["name"].as_str().unwrap_or_default().to_owned();
            if marked.borrow().contains(&node) {
                continue;
            }
            let done = json!({"metadata": {"annotations": {"nodemaintenance.k8s.io/done": "scale-roll"}}});
            own("PATCH", "nodes", "");
            nodes.patch(&node, &PatchParams::default(), &Patch::Merge(done)).await.map_err(|e| e.to_string())?;
            marked.borrow_mut().insert(node);
        }
        let released = m["status"]["nodeCounts"]["released"].as_u64().unwrap_or(0);
        if released as usize == c.roll {
            return Ok(());
        }
        if last_print.get().elapsed() > Duration::from_secs(15) {
            last_print.set(Instant::now());
            println!(
                "   rolling for {:.0} s: {released} of {} released, {held} held",
                a.at.elapsed().as_secs_f64(),
                c.roll
            );
        }
        Err(format!("{released} of {} released", c.roll))
    })
    .await;
    let goal = a.at.elapsed().as_secs_f64();
    let b = settle(env, probe).await;
    let limit = node_maintenance::api::scaled_count(
        &k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(c.roll_max_unavailable.clone()),
        c.roll,
    )
    .unwrap_or(0);
    let phase = Phase { goal: Some(goal), ..Phase::between("roll", &a, &b, probe.serve_pid) };
    (phase, Rolled { most_held: most_held.get(), limit })
}

/// A pod of the bare pool that the controller would evict.
#[derive(Clone)]
struct BarePod {
    namespace: String,
    name: String,
    uid: String,
    terminating: bool,
}

/// The pods of `nodes` the controller would evict: neither mirror pods nor (with
/// `--skip-daemonset-pods`, the bench's default) DaemonSet pods, as its planner classifies
/// them. Listed from the apiserver's watch cache (`resourceVersion=0`, as kubelets list
/// their pods): a consistent list goes to etcd here (etcd 3.4 cannot confirm the cache is
/// fresh) and reads every pod of the cluster for each node, which would cost the apiserver
/// more CPU than the evictions being measured.
async fn evictable_pods(client: &Client, nodes: &[String], c: &Config) -> Vec<BarePod> {
    let api: Api<Pod> = Api::all(client.clone());
    let lists = futures::stream::iter(nodes)
        .map(|node| {
            let api = api.clone();
            async move {
                own("LIST", "pods", "");
                api.list(&ListParams::default().match_any().fields(&format!("spec.nodeName={node}"))).await
            }
        })
        .buffer_unordered(c.concurrency)
        .collect::<Vec<_>>()
        .await;
    let mut out = Vec::new();
    for list in lists {
        for p in list.expect("list the pods of a bare node").items {
            let mirror = p.annotations().contains_key("kubernetes.io/config.mirror");
            let daemonset = p.owner_references().iter().any(|o| o.controller == Some(true) && o.kind == "DaemonSet");
            if mirror || (daemonset && !c.evict_daemonsets) {
                continue;
            }
            out.push(BarePod {
                namespace: p.namespace().unwrap_or_default(),
                name: p.name_any(),
                uid: p.uid().unwrap_or_default(),
                terminating: p.metadata.deletion_timestamp.is_some(),
            });
        }
    }
    out
}

/// Evicts `pod` (policy/v1, its UID as precondition, as the controller sends it), asking
/// again after a 429 (a PodDisruptionBudget refusal) or a transport error until `deadline`.
/// A 404 or 409 (the pod, or that UID, is gone) ends it too: the next listing tells.
async fn evict_bare(client: &Client, pod: &BarePod, deadline: Instant) {
    let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
    let body = Eviction {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            ..Default::default()
        },
        delete_options: Some(DeleteOptions {
            preconditions: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions {
                uid: Some(pod.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        }),
    };
    for attempt in 1u64.. {
        own("POST", "pods", "eviction");
        let result: kube::Result<kube::core::Status> =
            api.create_subresource("eviction", &pod.name, &PostParams::default(), &body).await;
        match result {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => return,
            Err(e) => {
                let refused = matches!(&e, kube::Error::Api(s) if s.code == 429);
                assert!(Instant::now() < deadline, "evicting {}/{}: {e}", pod.namespace, pod.name);
                if !refused && attempt == 1 {
                    eprintln!("   bare eviction of {}/{}: retrying after {e}", pod.namespace, pod.name);
                }
                tokio::time::sleep(Duration::from_millis(50 * attempt.min(10))).await;
            }
        }
    }
}

/// The bare reference: every evictable pod of `pool=bare` evicted by this harness alone,
/// `NM_SCALE_CONCURRENCY` in flight, until none is left on the pool. No controller work is
/// involved (the pool is not under maintenance), so its rate is what the apiserver, etcd and
/// this kubelet stand-in manage on this machine; the controller's drain is read against it.
async fn bare(env: &Envtest, probe: &Probe, c: &Config, reaped: &Reaped) -> Phase {
    let client = env.client();
    let a = probe.snapshot(env).await;
    let deadline = a.at + c.timeout;
    own("LIST", "nodes", "");
    let nodes: Vec<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default().labels("pool=bare"))
        .await
        .expect("list the bare pool")
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(nodes.len(), c.pool, "nodes labelled pool=bare");
    let mut rounds = Vec::new();
    loop {
        let listed = a.at.elapsed().as_secs_f64();
        let pods = evictable_pods(&client, &nodes, c).await;
        if pods.is_empty() {
            rounds.push(format!("none left at {:.2} s (listed from {listed:.2} s)", a.at.elapsed().as_secs_f64()));
            break;
        }
        assert!(Instant::now() < deadline, "bare evictions: {} pods left on the pool", pods.len());
        let evicting = a.at.elapsed().as_secs_f64();
        let live: Vec<&BarePod> = pods.iter().filter(|p| !p.terminating).collect();
        let asked = live.len();
        futures::stream::iter(live)
            .map(|p| evict_bare(&client, p, deadline))
            .buffer_unordered(c.concurrency)
            .collect::<()>()
            .await;
        let evicted = a.at.elapsed().as_secs_f64();
        // Every pod listed is on its way out: wait for the kubelet's part, then list again
        // (at most 10 s: a pod the kubelet missed or an eviction not accepted shows there).
        let waited = Instant::now();
        while !reaped.all_gone(pods.iter().map(|p| &p.uid)) && waited.elapsed() < Duration::from_secs(10) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        rounds.push(format!(
            "{} pods listed {listed:.2}-{evicting:.2} s, {asked} evicted by {evicted:.2} s, deleted by {:.2} s",
            pods.len(),
            a.at.elapsed().as_secs_f64()
        ));
    }
    println!("   bare rounds: {}", rounds.join("; "));
    let goal = a.at.elapsed().as_secs_f64();
    let b = probe.snapshot(env).await;
    Phase { goal: Some(goal), ..Phase::between("bare evictions (reference)", &a, &b, probe.serve_pid) }
}

/// Evictions per second to a phase's goal (its whole length when it has none).
fn eviction_rate(p: &Phase) -> f64 {
    p.evictions_ok as f64 / p.goal.unwrap_or(p.secs).max(1e-9)
}

async fn run(env: Envtest, c: Config) {
    let client = env.client();
    let started = Instant::now();
    println!("== filling the cluster: {} nodes, {} pods per node", c.nodes, c.pods_per_node);
    let pods = fill(&env, &c).await;
    let replicator = if c.paced > 0 {
        let owners = paced::fill(&env, &c).await;
        Some(paced::start_replicator(client.clone(), &c, owners))
    } else {
        None
    };
    let fill_secs = started.elapsed().as_secs_f64();
    println!("   filled in {fill_secs:.0} s: {} Nodes, {pods} Pods; load {}", c.nodes, loadavg());
    let (reaper, reaped) = start_pod_reaper(client.clone(), c.concurrency);

    // serve, as deployed.
    let dir = env.dir.path();
    let (port, metrics_port) = (free_port(), free_port());
    let log = std::env::var("NM_SCALE_RUST_LOG").unwrap_or_else(|_| "info".into());
    let mut cmd = env.serve_command(port, metrics_port, &log);
    if !c.evict_daemonsets {
        cmd.arg("--skip-daemonset-pods");
    }
    let t0 = Instant::now();
    let mut pids = env.pids();
    pids.retain(|(n, _)| matches!(*n, "kube-apiserver" | "etcd" | "kube-controller-manager"));
    let serve = Proc::spawn("node-maintenance", cmd, dir);
    let http = reqwest::Client::new();
    let probe =
        Probe { serve_pid: serve.pid(), metrics_url: format!("http://127.0.0.1:{metrics_port}/metrics"), http, pids };
    let before_serve = probe.snapshot(&env).await;
    wait_until("serve's pod cache synced", c.timeout, Duration::from_millis(100), || async {
        let log = std::fs::read_to_string(&serve.log).unwrap_or_default();
        if log.contains("pod and cluster caches synced") { Ok(()) } else { Err(serve.tail(5)) }
    })
    .await;
    let synced = probe.snapshot(&env).await;
    let sync_secs = t0.elapsed().as_secs_f64();
    let mut phases = vec![Phase::between("sync", &before_serve, &synced, probe.serve_pid)];
    phases[0].print();
    env.register_webhooks(port, env.pki.ca_pem.as_bytes()).await;

    // Cordon the pool.
    let nodes: Api<Node> = Api::all(client.clone());
    let a = probe.snapshot(&env).await;
    let nm = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": "scale-drain"},
        "spec": {"stage": "Cordon", "reason": "scale bench",
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["drain"]}]}]}}});
    own("POST", "nodemaintenances", "");
    envtest::objects::create_maintenance(&client, nm).await.expect("NodeMaintenance created");
    wait_until("pool cordoned", c.timeout, Duration::from_millis(250), || pool_cordoned(&nodes, "drain")).await;
    let goal = a.at.elapsed().as_secs_f64();
    let b = settle(&env, &probe).await;
    phases.push(Phase { goal: Some(goal), ..Phase::between("cordon", &a, &b, probe.serve_pid) });
    phases.last().expect("phase").print();

    phases.push(steady("steady-cordoned", &env, &probe, &c).await);
    phases.last().expect("phase").print();

    // Drain it.
    let a = probe.snapshot(&env).await;
    own("PATCH", "nodemaintenances", "");
    envtest::objects::set_stage(&client, "scale-drain", "Drain").await;
    let last_print = std::cell::Cell::new(Instant::now());
    // Evictions the controller had accepted at each look (its own counter): where the drain
    // waits between rounds, if it does.
    let timeline = std::cell::RefCell::new(Vec::<(f64, u64)>::new());
    wait_until("Drained=True", c.timeout, Duration::from_millis(250), || async {
        own("GET", "nodemaintenances", "");
        let m = envtest::objects::maintenance_json(&client, "scale-drain").await.unwrap_or_default();
        if let Ok(r) = probe.http.get(&probe.metrics_url).send().await {
            let text = r.text().await.unwrap_or_default();
            let accepted = metric_sum(&text, "node_maintenance_evictions_total", &["result=\"accepted\""]);
            timeline.borrow_mut().push((a.at.elapsed().as_secs_f64(), accepted.unwrap_or(0.0) as u64));
        }
        let cond = m["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Drained").cloned())
            .unwrap_or_default();
        if cond["status"] == "True" {
            return Ok(());
        }
        if last_print.get().elapsed() > Duration::from_secs(15) {
            last_print.set(Instant::now());
            println!(
                "   draining for {:.0} s: {} pods finished by the harness; {}",
                a.at.elapsed().as_secs_f64(),
                reaped.count.load(Ordering::Relaxed),
                cond["message"].as_str().unwrap_or("").chars().take(160).collect::<String>()
            );
        }
        Err(cond.to_string())
    })
    .await;
    let goal = a.at.elapsed().as_secs_f64();
    let b = settle(&env, &probe).await;
    let drain = Phase { goal: Some(goal), ..Phase::between("drain", &a, &b, probe.serve_pid) };
    drain.print();
    let timeline = timeline.into_inner();
    let base = metric_sum(&a.serve, "node_maintenance_evictions_total", &["result=\"accepted\""]).unwrap_or(0.0) as u64;
    let mut seen = base;
    let mut steps = Vec::new();
    for &(at, n) in &timeline {
        if n != seen {
            steps.push(format!("{at:.2}s:{}", n.saturating_sub(base)));
            seen = n;
        }
    }
    println!("   evictions accepted by the controller, at each look that saw more: {}", steps.join(" "));
    let drain_rate = drain.evictions_ok as f64 / goal;
    phases.push(drain);

    phases.push(steady("steady-drained", &env, &probe, &c).await);
    phases.last().expect("phase").print();

    // The bare reference on the third pool, next to the controller's drain in time.
    let bare_rate = if c.bare {
        let p = bare(&env, &probe, &c, &reaped).await;
        p.print();
        let rate = eviction_rate(&p);
        phases.push(p);
        Some(rate)
    } else {
        None
    };

    // Roll a pool node by node.
    let rolled = if c.roll > 0 {
        let (p, rolled) = roll(&env, &probe, &c).await;
        p.print();
        assert!(rolled.most_held <= rolled.limit, "{} nodes held at once, limit {}", rolled.most_held, rolled.limit);
        phases.push(p);
        Some(rolled)
    } else {
        None
    };

    // The reference: kubectl drain of the second pool, node after node.
    if c.kubectl {
        let a = probe.snapshot(&env).await;
        let out = env
            .kubectl(
                &["drain", "-l", "pool=kubectl", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60m"],
                None,
            )
            .await;
        let b = probe.snapshot(&env).await;
        assert!(out.status.success(), "kubectl drain failed: {}", String::from_utf8_lossy(&out.stderr));
        let p = Phase::between("kubectl drain (reference)", &a, &b, probe.serve_pid);
        p.print();
        phases.push(p);
    }

    // Drains paced by PodDisruptionBudgets: ours, then kubectl's on the identical pool.
    let paced = match &replicator {
        Some((_, made)) => {
            let p = paced::run(&env, &probe, &c, made).await;
            Some(p)
        }
        None => None,
    };
    reaper.abort();
    if let Some((task, _)) = replicator {
        task.abort();
    }

    let (rss, hwm) = rss_mib(probe.serve_pid);
    let evictable = (c.pods_per_node - usize::from(!c.evict_daemonsets)) * c.pool;
    println!();
    println!(
        "## scale: {} nodes x {} pods per node = {pods} pods; drained pools of {} nodes ({evictable} evictable pods each); {}",
        c.nodes,
        c.pods_per_node,
        c.pool,
        machine()
    );
    println!(
        "filled in {fill_secs:.0} s; serve synced its caches in {sync_secs:.1} s; drain: {drain_rate:.0} evictions/s; serve now VmRSS {rss:.0} MiB, VmHWM {hwm:.0} MiB"
    );
    if let (Some(bare_rate), Some(p)) = (bare_rate, phases.iter().find(|p| p.name.starts_with("bare"))) {
        println!(
            "bare evictions (reference): {} in {:.1} s = {bare_rate:.0} evictions/s ({} refused); controller drain {drain_rate:.0} evictions/s = {:.2} of the bare rate",
            p.evictions_ok,
            p.goal.unwrap_or(f64::NAN),
            p.evictions_429,
            drain_rate / bare_rate
        );
    }
    if let (Some(r), Some(p)) = (&rolled, phases.iter().find(|p| p.name == "roll")) {
        println!(
            "roll: {} nodes, maxUnavailable {} ({} nodes): all released in {:.1} s ({:.1} s per node); at most {} held at once; {} writes = {:.1} per node; {} evictions",
            c.roll,
            c.roll_max_unavailable,
            r.limit,
            p.goal.unwrap_or(f64::NAN),
            p.goal.unwrap_or(f64::NAN) / c.roll as f64,
            r.most_held,
            p.writes(),
            p.writes() as f64 / c.roll as f64,
            p.evictions_ok
        );
    }
    if let Some(p) = paced {
        let ours = p.ours.goal.unwrap_or(f64::NAN);
        let kubectl = p.kubectl.as_ref().and_then(|k| k.goal);
        println!(
            "paced by PDBs: {} ReplicaSets x {} pods behind maxUnavailable 1 on {} nodes, replacements Ready {} ms after creation: \
             controller {ours:.1} s = {:.2} of the PDBs' own pace ({:.1} s); kubectl drain {} (its pace {:.1} s); controller / kubectl = {}",
            c.paced_workloads,
            c.paced_replicas,
            c.paced,
            c.paced_start.as_millis(),
            ours / p.pace.0,
            p.pace.0,
            kubectl.map_or("-".into(), |k| format!("{k:.1} s")),
            p.pace.1,
            kubectl.map_or("-".into(), |k| format!("{:.2}", ours / k)),
        );
        phases.push(p.ours);
        phases.extend(p.kubectl);
    }
    println!();
    println!(
        "| phase | to goal / settled (s) | writes (+ Lease writes) | evictions ok / 429 | evictions/s (/ bare) | serve CPU s (% core) | apiserver CPU s | etcd CPU s | serve VmRSS / VmHWM (MiB) | reconciles (mean / p99 ms) | load |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for p in &phases {
        let cpu = |k: &str| p.cpu.get(k).copied().unwrap_or(f64::NAN);
        let rate = match (p.evictions_ok, bare_rate) {
            (0, _) => "-".to_owned(),
            (_, Some(bare)) => format!("{:.0} ({:.2})", eviction_rate(p), eviction_rate(p) / bare),
            (_, None) => format!("{:.0}", eviction_rate(p)),
        };
        println!(
            "| {} | {} / {:.1} | {} (+{}) | {} / {} | {rate} | {:.2} ({:.1}%) | {:.1} | {:.1} | {:.0} / {:.0} | {} ({:.1} / {:.0}) | {} |",
            p.name,
            p.goal.map_or("-".into(), |g| format!("{g:.1}")),
            p.secs,
            p.writes(),
            p.leases,
            p.evictions_ok,
            p.evictions_429,
            cpu("serve"),
            100.0 * cpu("serve") / p.secs.max(1e-9),
            cpu("kube-apiserver"),
            cpu("etcd"),
            p.rss,
            p.hwm,
            p.reconciles.0,
            p.reconciles.1,
            p.reconciles.3,
            p.load
        );
    }
    println!();
    println!(
        "requests by verb (apiserver_request_total, minus the harness's own and PodDisruptionBudget requests; Lease writes in the table apart):"
    );
    for p in &phases {
        let list: Vec<String> = p
            .requests
            .0
            .iter()
            .map(|((v, r, s), n)| format!("{v} {r}{}{s} {n}", if s.is_empty() { "" } else { "/" }))
            .collect();
        println!("- {}: {}", p.name, if list.is_empty() { "none".into() } else { list.join(", ") });
    }
    drop(serve);
    drop(env);
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned()))
        .unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores ({cpu}), {}", chrono_now())
}

fn chrono_now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC").to_string()
}

fn main() {
    let c = Config::from_env();
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let Some(env) = Envtest::start(Options { controllers: Some("disruption"), ..Options::default() }).await else {
            return;
        };
        println!("{c:?}");
        run(env, c).await;
    });
}
