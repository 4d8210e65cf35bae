//! Controller memory with realistic watch caches (docs/benchmarks.md, "Controller: planning
//! pass and memory"; target: RSS < 150 MiB with 5,000 Nodes and 100,000 Pods cached).
//!
//! The apiserver stand-in (tests/support/apiserver) runs in a **child process** (this binary
//! re-executed with `NM_RSS_ROLE=server`), filled with 5,000 realistic Nodes (labels as in
//! tests/fixtures/nodes.yaml plus images, addresses, capacity and conditions), 100,000
//! realistic Pods (2 to 3 containers with env, probes, resources and mounts, the projected
//! service-account volume, ownerReferences, annotations, status with conditions and
//! container statuses: 7 KiB of JSON on average; per node 3 DaemonSet pods, a static pod on
//! every fourth, the rest from ReplicaSets and StatefulSets of 7 pods, labelled as those
//! controllers label them) and 10 Drain-stage NodeMaintenances whose node sets overlap
//! (each node is selected by two, and held and cordoned by both: `common/cluster.rs`). This process is the controller alone:
//! it starts [`ClusterCache::start`] and [`pod_cache`] with the real kube client (kube's
//! defaults: paginated initial LIST of 500, then WATCH), waits until both are synced, and
//! prints VmRSS and VmHWM from /proc/self/status, the live heap (counted by a wrapping
//! global allocator around the system allocator the binary uses; the Node caches sync
//! first, so the growth while the Pod cache syncs is the heap per cached pod), one planning
//! pass built from the caches as `controller/pass.rs` builds it, and the JSON size of a full pod.
//!
//! Run: `cargo bench --bench controller_rss` (about two minutes on 2 cores). The stand-in
//! child keeps every object as a `serde_json::Value` and needs about 11 GiB (printed at the
//! end; not counted above). `NM_RSS_NODES` changes the node count (20 pods per node).
//! Without `--bench` (`cargo test --all-targets` runs bench targets that way) it is a smoke
//! run over 25 nodes.

#[path = "../tests/support/apiserver/mod.rs"]
mod apiserver;

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/plans.rs"]
mod plans;
#[path = "common/proc.rs"]
mod proc_status;
use cluster::{MAINTENANCES, PODS_PER_NODE, maintenance, node, pod, uid};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use node_maintenance::cluster::cache::ClusterCache;
use node_maintenance::cluster::pods::pod_cache;
use node_maintenance::controller::pass::{planner_input, return_freed_memory};
use node_maintenance::planner::{PlannerOptions, plan};
use proc_status::rss_mib;
use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator (as in the shipped binary), counting live bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
/// Highest `LIVE` since the last reset.
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MIB: f64 = 1024.0 * 1024.0;

/// `NM_RSS_NODES`, else 5,000 under `cargo bench` and 25 under `cargo test`.
fn node_count() -> usize {
    let default = if std::env::args().any(|a| a == "--bench") { 5_000 } else { 25 };
    std::env::var("NM_RSS_NODES").ok().and_then(|n| n.parse().ok()).unwrap_or(default)
}

/// Child process: the stand-in, filled; prints its URL, serves until stdin closes.
fn serve() {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let nodes = node_count();
        let api = apiserver::ApiServer::start().await;
        for n in 0..nodes {
            api.put_node(serde_json::from_value(node(n, nodes)).expect("node JSON is a Node"));
        }
        for n in 0..nodes {
            for k in 0..PODS_PER_NODE {
                api.put_pod(serde_json::from_value(pod(n, k)).expect("pod JSON is a Pod"));
            }
        }
        for i in 0..MAINTENANCES {
            api.put_maintenance(maintenance(i));
        }
        println!("{}", api.url());
        std::io::stdout().flush().expect("stdout");
        // Serve until the parent closes our stdin (or dies).
        tokio::task::spawn_blocking(|| {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        })
        .await
        .expect("stdin reader");
        drop(api);
    });
}

fn live_mib() -> f64 {
    LIVE.load(Ordering::Relaxed) as f64 / MIB
}

fn report(what: &str) {
    let (rss, hwm) = rss_mib("self");
    println!("{what:<44} VmRSS {rss:7.1} MiB  VmHWM {hwm:7.1} MiB  live heap {:7.1} MiB", live_mib());
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Parent process: the controller's caches.
fn controller() {
    let nodes = node_count();
    let started = Instant::now();
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .env("NM_RSS_ROLE", "server")
        .env("NM_RSS_NODES", nodes.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("stand-in child starts");
    let mut url = String::new();
    BufReader::new(child.stdout.take().expect("child stdout")).read_line(&mut url).expect("child URL");
    let url = url.trim().to_owned();
    assert!(url.starts_with("http://"), "stand-in did not start: {url:?}");
    println!(
        "stand-in (child pid {}) at {url} holds {nodes} Nodes, {} Pods, {MAINTENANCES} NodeMaintenances (filled in {:.1} s)",
        child.id(),
        nodes * PODS_PER_NODE,
        started.elapsed().as_secs_f64()
    );

    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = kube::Client::try_from(kube::Config::new(url.parse().expect("URL parses"))).expect("kube client");
        report("before the caches");
        let synced_at = Instant::now();
        let (cache, drive) = ClusterCache::start(client.clone());
        tokio::spawn(drive);
        cache.wait_synced().await;
        let nodes_synced = synced_at.elapsed();
        report("Node and NodeMaintenance caches synced");
        let live_before_pods = LIVE.load(Ordering::Relaxed);
        let synced_at = Instant::now();
        let (pods, pod_events) = pod_cache(client.clone());
        tokio::spawn(pod_events.for_each(|_| async {}));
        pods.wait_until_ready().await;
        let pods_synced = synced_at.elapsed();
        println!(
            "synced: {} Nodes in {:.1} s, then {} Pods in {:.1} s; {} NodeMaintenances",
            cache.node_store().len(),
            nodes_synced.as_secs_f64(),
            pods.len(),
            pods_synced.as_secs_f64(),
            cache.maintenance_store().len()
        );
        assert_eq!(pods.len(), nodes * PODS_PER_NODE, "every pod cached");
        tokio::time::sleep(Duration::from_secs(2)).await;
        report("all caches synced (watching)");
        let per_pod = LIVE.load(Ordering::Relaxed).saturating_sub(live_before_pods) as f64 / pods.len() as f64;

        // One planning pass as controller/pass.rs builds it from the caches.
        let (node_store, nm_store) = (cache.node_store(), cache.maintenance_store());
        let mut builds = Vec::new();
        let mut plans = Vec::new();
        let mut counts = (0, 0, 0, 0);
        let live_before = LIVE.load(Ordering::Relaxed);
        PEAK.store(live_before, Ordering::Relaxed);
        let mut previous = None;
        for _ in 0..5 {
            let t = Instant::now();
            let input =
                planner_input(&node_store, &nm_store, &pods, |_| false, &Default::default(), PlannerOptions::default());
            builds.push(t.elapsed());
            let t = Instant::now();
            let out = plan(&input);
            plans.push(t.elapsed());
            let evict: usize = out.nodes.iter().map(|n| n.evict.len()).sum();
            counts = (input.maintenances.len(), input.nodes.len(), input.pods.len(), evict);
            // As the controller's pass does (controller/pass.rs): the input and the previous
            // decision dropped, pages returned; the last decision stays, as the controller
            // keeps it.
            drop(input);
            drop(previous.replace(out));
            return_freed_memory();
        }
        let (m, n, p, evict) = counts;
        println!(
            "planning pass over {m} maintenances, {n} nodes, {p} pods ({evict} evictions planned): \
             build input from caches median {:.1} ms (min {:.1}), plan median {:.1} ms (min {:.1}), 5 runs; \
             input + plan peak at {:.1} MiB of heap above the caches",
            median(builds.clone()).as_secs_f64() * 1e3,
            builds.iter().min().expect("ran").as_secs_f64() * 1e3,
            median(plans.clone()).as_secs_f64() * 1e3,
            plans.iter().min().expect("ran").as_secs_f64() * 1e3,
            PEAK.load(Ordering::Relaxed).saturating_sub(live_before) as f64 / MIB,
        );
        report("after 5 planning passes");
        let settle = if std::env::args().any(|a| a == "--bench") { 15 } else { 1 };
        tokio::time::sleep(Duration::from_secs(settle)).await;
        report(&format!("{settle} s later (idle, watching)"));

        // Diagnostic: how much of the RSS is memory glibc holds free (not live data).
        let t = Instant::now();
        return_freed_memory();
        report(&format!("diagnostic: after malloc_trim(0) ({:.1} ms)", t.elapsed().as_secs_f64() * 1e3));

        // What a pod costs: the JSON the apiserver sends vs the heap the cache keeps.
        let created = cache.node_store().state().first().and_then(|n| n.metadata.creation_timestamp.clone());
        let mut full = 0usize;
        for n in 0..nodes {
            for k in 0..PODS_PER_NODE {
                let mut p: Pod = serde_json::from_value(pod(n, k)).expect("pod JSON is a Pod");
                p.metadata.uid = Some(uid(n * PODS_PER_NODE + k + 1));
                p.metadata.resource_version = Some("123456".into());
                p.metadata.creation_timestamp = created.clone();
                full += serde_json::to_vec(&p).expect("serializes").len();
            }
        }
        println!(
            "per pod: {:.0} B of JSON from the apiserver on average; {per_pod:.0} B of heap in the Pod cache",
            full as f64 / (nodes * PODS_PER_NODE) as f64,
        );
    });
    let (rss, hwm) = rss_mib(child.id());
    println!("(the stand-in child: VmRSS {rss:.0} MiB, VmHWM {hwm:.0} MiB)");
    drop(child.stdin.take());
    let _ = child.wait();
}

fn main() {
    if std::env::var("NM_RSS_ROLE").as_deref() == Ok("server") {
        serve();
    } else {
        controller();
    }
}
