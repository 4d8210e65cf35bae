//! The soak (issue 25, docs/reliability.md "Soak"): nothing in `serve` may grow while
//! maintenances come and go for a long time. A bench, not a timed test.
//!
//! **Set-up.** The real-apiserver tier (tests/support/envtest): etcd and kube-apiserver
//! v1.36.2, kube-controller-manager (ReplicaSets, DaemonSets, PodDisruptionBudget status),
//! kube-scheduler and the fake kubelet (pods Running, evicted pods finished 3-4 s after).
//! Four nodes in two pools, `pool=a` and `pool=b`; in namespace `soak` a Deployment `web` of
//! 6 replicas with a PodDisruptionBudget `maxUnavailable: 2` and a DaemonSet `agent`, all on
//! both pools. `node-maintenance serve` (this build's binary) runs as deployed: webhooks
//! registered with the apiserver, leader election, evictions through the Eviction API.
//!
//! A one-replica Deployment `solo` annotated `nodemaintenance.k8s.io/evacuation: surge` is
//! moved by rollouts (issue 21).
//!
//! **The loop.** Cycle `i` drains pool `a` (even `i`) or `b` (odd). It creates a bare pod
//! `keep-<i>` on the pool's first node, opted out (`karpenter.sh/do-not-disrupt`), in
//! `kube-system` at `system-cluster-critical` (a later drain-plan entry than the workloads),
//! then NodeMaintenance `soak-<i>` at stage Drain over the pool, through admission: cordoned,
//! drained (the web pods move to the other pool, `solo` by a rollout, the agent pods are
//! evicted last) up to `keep-<i>`, which its status names as in the way (a `PodOptedOut`
//! Event). With it comes `soak-<i>-roll` over the same pool with `maxUnavailable: 1`
//! (rolling, issue 20): it holds one node at a time (the hold goes through the holds in
//! flight), and the loop marks each node it shows `Drained` done (the
//! `nodemaintenance.k8s.io/done` annotation, as hack/scale.sh's roll phase does) until it
//! released both, never holding more than one. Then `soak-<i>-again` enters Drain over the
//! pool *and* the other pool's first node, whose web pods are at the plan's first entry: as
//! in the KEP's maintenance-c example, its proposal starts below where the pool's nodes are,
//! so they are fast-forwarded (the loop waits for its `FastForwarded` Event, which goes
//! once, when the maintenance's status first records `fastForwarded` on the node); it drains the joined node and then waits on `keep-<i>`
//! too (its own `PodOptedOut` Event). The loop deletes that pod and every drain ends. All
//! three move to Complete (the nodes are given back, the agents come back), are deleted, and
//! the next cycle waits until every workload pod runs again. Every name is new, so whatever
//! is kept per maintenance, pod or node would pile up.
//!
//! **Every minute** it records serve's VmRSS and RssAnon (/proc/PID/status), the heap in use
//! (`node_maintenance_heap_in_use_bytes`: what the program holds, without the pages the
//! allocator keeps free), open file descriptors (/proc/PID/fd), `node_maintenance_tokio_alive_tasks` and every
//! `node_maintenance_controller_memory_entries{memory}` from serve's `/metrics`, and the
//! cycles done. At the end, after a warm-up of [`WARM_UP_MINUTES`]: each figure's range over the
//! earlier and the later half of the run, and whether it stayed flat ([`report`]).
//!
//! Run: `hack/soak.sh` (`SOAK_MINUTES`, default 40: two windows of 10 minutes after the
//! warm-up). Without `--bench` (`cargo test --all-targets` runs benches that way) it is a smoke
//! run of one cycle.

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../tests/support/envtest/mod.rs"]
mod envtest;
#[path = "common/proc.rs"]
mod proc_status;

use envtest::process::{Proc, free_port};
use envtest::requests::metric_sum;
use envtest::{Envtest, Options};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use node_maintenance::api::NodeMaintenance;
// The controller memories sampled (`node_maintenance_controller_memory_entries{memory}`).
use node_maintenance::controller::janitor::MEMORIES;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WORKLOADS: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: soak}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {soak: "yes"}
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: soak}
spec:
  maxUnavailable: 2
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: solo
  namespace: soak
  annotations: {nodemaintenance.k8s.io/evacuation: surge}
spec:
  replicas: 1
  selector: {matchLabels: {app: solo}}
  template:
    metadata: {labels: {app: solo}}
    spec:
      nodeSelector: {soak: "yes"}
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: nginx}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: soak}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      nodeSelector: {soak: "yes"}
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: agent}]
"#;

/// How long one wait of a cycle may take before the soak fails.
const WAIT: Duration = Duration::from_secs(300);

/// One minute's figures.
struct Sample {
    minute: u64,
    cycles: u64,
    rss_mib: f64,
    /// RssAnon: the heap and other private memory, what a leak raises. VmRSS also counts the
    /// binary's file-backed pages (RssFile, about 17 MiB of a release build), resident once
    /// their code first runs.
    anon_mib: f64,
    /// `node_maintenance_heap_in_use_bytes`, MiB: what the program holds from the allocator.
    heap_mib: f64,
    fds: usize,
    tasks: f64,
    memories: Vec<f64>,
}

fn sample(minute: u64, cycles: u64, pid: u32, metrics: &str) -> Sample {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    let gauge = |labels: &[&str], family: &str| metric_sum(metrics, family, labels).unwrap_or(f64::NAN);
    Sample {
        minute,
        cycles,
        rss_mib: proc_status::rss_mib(pid).0,
        anon_mib: proc_status::status_mib(&pid, "RssAnon:"),
        heap_mib: gauge(&[], "node_maintenance_heap_in_use_bytes") / 1_048_576.0,
        fds,
        tasks: gauge(&[], "node_maintenance_tokio_alive_tasks"),
        memories: MEMORIES
            .iter()
            .map(|m| gauge(&[&format!("memory=\"{m}\"")], "node_maintenance_controller_memory_entries"))
            .collect(),
    }
}

/// With `SOAK_KEEP_DIR` set (hack/soak.sh sets it): a failing soak leaves there every log
/// of its control plane and of serve, and what the cluster held when it failed (the
/// maintenances, nodes, pods, budgets, Deployments and Events as YAML). The hook runs before
/// the panic unwinds, so before the run's temporary directory is removed.
fn keep_on_failure(env: &Envtest) {
    let Some(keep) = std::env::var_os("SOAK_KEEP_DIR").map(std::path::PathBuf::from) else { return };
    let (dir, kubectl, kubeconfig) =
        (env.dir.path().to_owned(), env.assets.kubectl.clone(), env.admin_kubeconfig.clone());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = std::fs::create_dir_all(&keep);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.path().extension().is_some_and(|e| e == "log") {
                let _ = std::fs::copy(entry.path(), keep.join(entry.file_name()));
            }
        }
        let what = "nodemaintenances,nodes,pods,poddisruptionbudgets,deployments,events";
        let dump = std::process::Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["get", what, "-A", "-o", "yaml"])
            .output();
        if let Ok(out) = dump {
            let _ = std::fs::write(keep.join("cluster.yaml"), out.stdout);
        }
        eprintln!("soak failed: logs and cluster state kept in {}", keep.display());
        previous(info);
    }));
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        match check().await {
            Ok(()) => return,
            Err(last) if Instant::now() > deadline => panic!("soak: timed out waiting for {what}; last: {last}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

async fn drained(c: &Client, name: &str) -> Result<(), String> {
    let m = envtest::objects::maintenance_json(c, name).await.ok_or("gone")?;
    let cond = m["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|x| x["type"] == "Drained").cloned());
    if cond.as_ref().is_some_and(|c| c["status"] == "True") { Ok(()) } else { Err(format!("{cond:?}")) }
}

async fn all_released(c: &Client) -> Result<(), String> {
    let nodes = Api::<Node>::all(c.clone()).list(&ListParams::default().labels("soak=yes")).await;
    let nodes = nodes.map_err(|e| e.to_string())?.items;
    let held = nodes.iter().filter(|n| envtest::objects::is_cordoned(n) || envtest::objects::holders(n).is_some());
    let held: Vec<_> = held.filter_map(|n| n.metadata.name.clone()).collect();
    if held.is_empty() { Ok(()) } else { Err(format!("still held: {held:?}")) }
}

async fn workloads_back(c: &Client) -> Result<(), String> {
    let pods = Api::<Pod>::namespaced(c.clone(), "soak").list(&ListParams::default()).await;
    let pods = pods.map_err(|e| e.to_string())?.items;
    let running = |app: &str| {
        pods.iter()
            .filter(|p| p.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str) == Some(app))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count()
    };
    let counts = (running("web"), running("solo"), running("agent"));
    if counts == (6, 1, 4) { Ok(()) } else { Err(format!("web, solo, agent running: {counts:?} of (6, 1, 4)")) }
}

/// NodeMaintenance `name` at stage Drain over `pool`, and over node `also` if given; with
/// `maxUnavailable` if given (rolling).
fn drain_of(name: &str, pool: &str, also: Option<&str>, max_unavailable: Option<i32>) -> Value {
    let mut terms = vec![json!({"matchExpressions": [{"key": "pool", "operator": "In", "values": [pool]}]})];
    terms.extend(also.map(|n| json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]})));
    let mut nm = json!({"apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": name},
        "spec": {"stage": "Drain", "reason": "soak", "nodeSelector": {"nodeSelectorTerms": terms}}});
    if let Some(n) = max_unavailable {
        nm["spec"]["maxUnavailable"] = json!(n);
    }
    nm
}

/// Whether a `FastForwarded` Event about maintenance `name` was recorded.
async fn fast_forwarded(c: &Client, name: &str) -> Result<(), String> {
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), "default");
    let fields = format!("reason=FastForwarded,involvedObject.name={name}");
    let found = events.list(&ListParams::default().fields(&fields)).await.map_err(|e| e.to_string())?.items;
    if found.is_empty() { Err("no FastForwarded Event yet".into()) } else { Ok(()) }
}

/// Marks every node the rolling maintenance `name` shows `Drained` done (the
/// `nodemaintenance.k8s.io/done` annotation, as an automation that reboots a drained node
/// would; hack/scale.sh's roll phase does the same) until it released all `total`; fails if
/// it ever held more than `max_unavailable` of them.
async fn rolled(c: &Client, name: &str, total: u64, max_unavailable: usize) -> Result<(), String> {
    let m = envtest::objects::maintenance_json(c, name).await.ok_or("gone")?;
    let statuses = m["status"]["nodeStatuses"].as_array().cloned().unwrap_or_default();
    let phase = |s: &Value| s["phase"].as_str().unwrap_or_default().to_owned();
    let held = statuses.iter().filter(|s| !matches!(phase(s).as_str(), "Waiting" | "Released")).count();
    assert!(held <= max_unavailable, "{name} holds {held} nodes, maxUnavailable {max_unavailable}: {statuses:?}");
    let nodes = Api::<Node>::all(c.clone());
    for s in statuses.iter().filter(|s| phase(s) == "Drained") {
        let node = s["nodeRef"]["name"].as_str().unwrap_or_default();
        let done = json!({"metadata": {"annotations": {"nodemaintenance.k8s.io/done": name}}});
        nodes.patch(node, &PatchParams::default(), &Patch::Merge(done)).await.map_err(|e| e.to_string())?;
    }
    let released = m["status"]["nodeCounts"]["released"].as_u64().unwrap_or(0);
    if released == total { Ok(()) } else { Err(format!("{released} of {total} released: {statuses:?}")) }
}

/// Whether the `Drained` message of `name` names `what`.
async fn in_the_way(c: &Client, name: &str, what: &str) -> Result<(), String> {
    let m = envtest::objects::maintenance_json(c, name).await.ok_or("gone")?;
    let cond = m["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|x| x["type"] == "Drained").cloned());
    let message = cond.as_ref().and_then(|c| c["message"].as_str()).unwrap_or_default();
    if message.contains(what) { Ok(()) } else { Err(message.to_owned()) }
}

/// One cycle over pool `a` or `b` (the module's doc says what it does).
async fn cycle(c: &Client, i: u64) {
    let (pool, other) = if i.is_multiple_of(2) { ("a", "b") } else { ("b", "a") };
    let (first, again, roll, keep) =
        (format!("soak-{i}"), format!("soak-{i}-again"), format!("soak-{i}-roll"), format!("keep-{i}"));
    // In kube-system, where a pod may take the system priority classes.
    let pods = Api::<Pod>::namespaced(c.clone(), "kube-system");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": keep, "namespace": "kube-system",
        "annotations": {"karpenter.sh/do-not-disrupt": "true"}},
        "spec": {"nodeName": format!("soak-{pool}-1"), "terminationGracePeriodSeconds": 0, "priorityClassName": "system-cluster-critical",
            "containers": [{"name": "c", "image": "keep"}]}}))
    .expect("a Pod");
    pods.create(&Default::default(), &pod).await.expect("opted-out pod created");
    let create = |nm| envtest::objects::create_maintenance(c, nm);
    create(drain_of(&first, pool, None, None)).await.expect("NodeMaintenance created");
    create(drain_of(&roll, pool, None, Some(1))).await.expect("NodeMaintenance created");
    wait_until(&format!("{first} waiting on {keep}"), || in_the_way(c, &first, &keep)).await;
    // Over the pool, now drained up to keep's entry, and a node of the other pool whose web
    // pods are at the plan's first entry: the pool's nodes are fast-forwarded.
    let joined = format!("soak-{other}-1");
    create(drain_of(&again, pool, Some(&joined), None)).await.expect("NodeMaintenance created");
    wait_until(&format!("a FastForwarded Event of {again}"), || fast_forwarded(c, &again)).await;
    wait_until(&format!("{again} waiting on {keep}"), || in_the_way(c, &again, &keep)).await;
    pods.delete(&keep, &Default::default()).await.expect("opted-out pod deleted");
    wait_until(&format!("{first} drained"), || drained(c, &first)).await;
    wait_until(&format!("{again} drained"), || drained(c, &again)).await;
    wait_until(&format!("{roll} rolled"), || rolled(c, &roll, 2, 1)).await;
    let nms = Api::<NodeMaintenance>::all(c.clone());
    let all = [&first, &again, &roll];
    for name in all {
        envtest::objects::set_stage(c, name, "Complete").await;
    }
    wait_until("every node given back", || all_released(c)).await;
    for name in all {
        envtest::objects::delete_maintenance(c, name).await;
        wait_until(&format!("{name} gone"), || async {
            match nms.get_opt(name).await {
                Ok(None) => Ok(()),
                other => Err(format!("{:?}", other.map(|m| m.is_some()))),
            }
        })
        .await;
    }
    wait_until("the workloads running again", || workloads_back(c)).await;
}

fn print_row(s: &Sample) {
    let memories: Vec<String> = s.memories.iter().map(|m| format!("{m:.0}")).collect();
    println!(
        "| {} | {} | {:.1} | {:.1} | {:.2} | {} | {:.0} | {} |",
        s.minute,
        s.cycles,
        s.rss_mib,
        s.anon_mib,
        s.heap_mib,
        s.fds,
        s.tasks,
        memories.join(" | ")
    );
}

/// `(min, max)` of `values`.
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// A figure of the report: its name, how to read it from a sample, the growth tolerated as
/// (fraction, absolute), and whether its peak is judged besides its floor.
type Column = (String, Box<dyn Fn(&Sample) -> f64>, (f64, f64), bool);

/// Minutes left out of the verdict, measured (docs/reliability.md "Soak"). kube-runtime's Event
/// `Recorder` keeps every Event it published in the last 6 minutes (its `CACHE_TTL`, for
/// series) in a `HashMap`, which fills for 6 minutes. The entries it drops after that leave
/// tombstones; once they use up the map's spare room, the next insert rehashes it, into twice
/// the slots when the live entries are more than half of them (hashbrown's rule). In this loop
/// that is at cycle ~50, minute 17-18 in two runs: one step of the heap in use by +0.7 MiB
/// (512 to 1024 slots of ~1.4 KiB), flat before and after, and the map keeps that size.
const WARM_UP_MINUTES: usize = 20;

/// The verdict per figure after warm-up: the samples are split into an earlier and a later
/// half, and a figure is flat when its floor (minimum) did not rise from the earlier half to
/// the later one beyond a tolerance (RSS 5 %, counts 10 % + 2), nor, for RSS, fds and tasks,
/// its peak (maximum). A leak raises the floor with every cycle. The controller's memories
/// are judged on the floor alone: their peak is where in a cycle the minute's sample landed
/// (one opted-out pod reported by a cycle's three maintenances is 3 entries, 0 a moment later);
/// so is the heap in use, whose sample counts the requests in flight at that moment.
fn report(samples: &[Sample], warmup: usize) -> bool {
    let steady = &samples[warmup.min(samples.len())..];
    if steady.len() < 4 {
        println!("too short for a verdict ({} samples after a warm-up of {warmup} minutes)", steady.len());
        return true;
    }
    let (earlier, later) = steady.split_at(steady.len() / 2);
    let mut columns: Vec<Column> = vec![
        ("VmRSS MiB".into(), Box::new(|s: &Sample| s.rss_mib), (0.05, 0.0), true),
        ("RssAnon MiB".into(), Box::new(|s: &Sample| s.anon_mib), (0.05, 0.0), true),
        // A sample lands anywhere in a cycle, with its requests in flight: the floor says what stays.
        ("heap in use MiB".into(), Box::new(|s: &Sample| s.heap_mib), (0.05, 0.0), false),
        ("open fds".into(), Box::new(|s: &Sample| s.fds as f64), (0.1, 2.0), true),
        ("tokio tasks".into(), Box::new(|s: &Sample| s.tasks), (0.1, 2.0), true),
    ];
    for (i, m) in MEMORIES.iter().enumerate() {
        columns.push((m.to_string(), Box::new(move |s: &Sample| s.memories[i]), (0.1, 2.0), false));
    }
    let mut flat = true;
    println!(
        "\n| figure | minutes {}-{} (min-max) | minutes {}-{} (min-max) | flat |",
        earlier[0].minute,
        earlier[earlier.len() - 1].minute,
        later[0].minute,
        later[later.len() - 1].minute
    );
    println!("|---|---|---|---|");
    for (name, get, (fraction, absolute), peak_too) in &columns {
        let (elo, ehi) = range(earlier.iter().map(get));
        let (llo, lhi) = range(later.iter().map(get));
        let within = |before: f64, after: f64| after <= before * (1.0 + fraction) + absolute;
        let ok = within(elo, llo) && (!peak_too || within(ehi, lhi));
        flat &= ok;
        println!("| {name} | {elo:.1}-{ehi:.1} | {llo:.1}-{lhi:.1} | {} |", if ok { "yes" } else { "**NO**" });
    }
    flat
}

async fn run(env: Envtest, minutes: u64, full: bool) {
    let c = env.client();
    for (n, pool) in [("soak-a-1", "a"), ("soak-a-2", "a"), ("soak-b-1", "b"), ("soak-b-2", "b")] {
        envtest::objects::create_node(&c, n, &[("pool", pool), ("soak", "yes")]).await;
    }
    env.kubectl_ok(&["create", "namespace", "soak"]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(WORKLOADS)).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    wait_until("the workloads running", || workloads_back(&c)).await;

    let (port, metrics_port) = (free_port(), free_port());
    let log = std::env::var("SOAK_RUST_LOG").unwrap_or_else(|_| "warn".into());
    let cmd = env.serve_command(port, metrics_port, &log);
    let mut serve = Proc::spawn("node-maintenance", cmd, env.dir.path());
    keep_on_failure(&env);
    let metrics_url = format!("http://127.0.0.1:{metrics_port}/metrics");
    let http = reqwest::Client::new();
    let scrape = || async { http.get(&metrics_url).send().await.ok()?.text().await.ok() };
    wait_until("serve leading", || async {
        let m = scrape().await.unwrap_or_default();
        if metric_sum(&m, "node_maintenance_leader", &[]) == Some(1.0) { Ok(()) } else { Err(serve.tail(5)) }
    })
    .await;
    env.register_webhooks(port, env.pki.ca_pem.as_bytes()).await;

    let started = Instant::now();
    let end = started + Duration::from_secs(60 * minutes);
    let mut samples: Vec<Sample> = Vec::new();
    let mut cycles = 0u64;
    println!(
        "| minute | cycles | VmRSS MiB | RssAnon MiB | heap in use MiB | open fds | tokio tasks | {} |",
        MEMORIES.join(" | ")
    );
    println!("|{}", "---|".repeat(7 + MEMORIES.len()));
    let first = sample(0, 0, serve.pid(), &scrape().await.unwrap_or_default());
    print_row(&first);
    samples.push(first);
    let mut per_cycle = BTreeMap::new();
    loop {
        let t = Instant::now();
        cycle(&c, cycles).await;
        cycles += 1;
        *per_cycle.entry(t.elapsed().as_secs()).or_insert(0u32) += 1;
        let minute = started.elapsed().as_secs() / 60;
        if minute > samples.last().map_or(0, |s| s.minute) {
            let s = sample(minute, cycles, serve.pid(), &scrape().await.unwrap_or_default());
            print_row(&s);
            samples.push(s);
        }
        if !full || Instant::now() >= end {
            break;
        }
    }
    let secs: Vec<u64> = per_cycle.keys().copied().collect();
    assert!(serve.exited().is_none(), "serve exited: {}", serve.tail(20));
    // What the cycles made the controller announce: each memory was exercised.
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(c.clone(), "default");
    let mut by_reason: BTreeMap<String, u32> = BTreeMap::new();
    for e in events.list(&ListParams::default()).await.expect("events").items {
        *by_reason.entry(e.reason.unwrap_or_default()).or_default() += e.series.map_or(1, |s| s.count.max(1) as u32);
    }
    println!("Events by reason: {by_reason:?}");
    let fast_forwards = u64::from(by_reason.get("FastForwarded").copied().unwrap_or(0));
    assert!(fast_forwards >= cycles, "{fast_forwards} FastForwarded Events in {cycles} cycles");
    println!(
        "\n{cycles} cycles in {:.1} min (each {}-{} s)",
        started.elapsed().as_secs_f64() / 60.0,
        secs.first().unwrap_or(&0),
        secs.last().unwrap_or(&0),
    );
    if full {
        let flat = report(&samples, WARM_UP_MINUTES);
        assert!(flat, "a figure grew after warm-up (table above)");
    } else {
        let last = sample(0, cycles, serve.pid(), &scrape().await.unwrap_or_default());
        let text: Value = json!({"tasks": last.tasks, "memories": last.memories});
        assert!(last.memories.iter().all(|m| m.is_finite()), "memory gauges exported: {text}");
        println!("soak smoke run: one cycle done; {text}");
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let minutes = std::env::var("SOAK_MINUTES").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let Some(env) = Envtest::start(Options { workloads: true, ..Options::default() }).await else { return };
        println!(
            "== soak: {} on a real kube-apiserver {}",
            if full { format!("{minutes} min") } else { "smoke, one cycle".into() },
            envtest::assets::VERSION
        );
        run(env, minutes, full).await;
    });
}
