//! Admission latency while the controller plans (issue 24, docs/benchmarks.md "Admission
//! while planning passes run"): the webhook and back-to-back planning passes over 5,000
//! nodes and 100,000 pods share one tokio runtime, as in `node-maintenance serve`.
//!
//! **Set-up.** One process, the runtime `node-maintenance` builds (multi-threaded, one
//! worker per core). The webhook is [`app::serve`] in standalone mode over
//! `examples/nodes.yaml`, as `hack/load.sh` runs it. The controller's side is the real
//! [`SharedPass`] over real caches: Node and NodeMaintenance stores filled with
//! `common/cluster.rs`'s 5,000 Nodes (every one held and cordoned by the two Drain
//! maintenances that select it) and 10 maintenances, and the real [`pod_cache`] filled
//! through kube's watcher from an in-process fake apiserver that lists `common/cluster.rs`'s
//! 100,000 Pods (7 KiB of JSON each, in pages of 500, generated per page) and then keeps
//! the watch open with no events. One task runs passes back to back while switched on, in
//! one of two ways: `pool`, as the controller does (a change signal, then
//! `SharedPass::decision` on tokio's blocking pool, where the loop decides), and `inline`, as it did
//! before (the same work, `planner_input`, `planner::plan` and `return_freed_memory`, on
//! the async worker itself).
//!
//! **Measurement.** wrk (as `hack/load.sh`: `hack/load/post.lua`, 2 threads, 64
//! connections, fixture `01-create-minimal-validate.json` to `/validate`) for
//! `NM_PASS_SECONDS` (10) after 2 s of warm-up, with the passes off, `pool`, `inline`,
//! off, ... for `NM_PASS_ROUNDS` (3) rounds, alternating so that the machine's other load
//! falls on every mode. Prints each run (requests/s, p50, p99, passes completed and their
//! mean duration) and the ratios of the medians to the runs without passes.
//!
//! Run: `cargo bench --bench pass_admission` (about 2 minutes; needs `wrk`, which
//! `hack/load.sh` installs). `NM_PASS_NODES` changes the node count (20 pods per node).
//! Without `--bench` (`cargo test --all-targets` runs bench targets that way) it is a smoke
//! run over 25 nodes without wrk: the caches fill, a pass plans every node, and a second
//! call without a change reuses it.

#[path = "common/cluster.rs"]
mod cluster;
#[path = "common/plans.rs"]
mod plans;

use axum::body::{Body, Bytes};
use clap::Parser;
use cluster::{MAINTENANCES, PODS_PER_NODE, maintenance, node, pod};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use node_maintenance::api::NodeMaintenance;
use node_maintenance::app::{self, ServeOptions};
use node_maintenance::cluster::pods::pod_cache;
use node_maintenance::controller::pass::{PassSources, SharedPass, planner_input, return_freed_memory};
use node_maintenance::metrics::Metrics;
use node_maintenance::planner::{PlannerOptions, plan};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Pods per page of the fake LIST (kube's watcher asks for 500).
const PAGE: usize = 500;

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The value of `key` in the query of `uri`, if any.
fn query<'a>(uri: &'a http::Uri, key: &str) -> Option<&'a str> {
    uri.query()?.split('&').find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// A kube client whose apiserver lists the `nodes * PODS_PER_NODE` Pods of
/// `common/cluster.rs` page by page (each page generated when asked for, so the JSON of
/// all of them never exists at once) and answers a watch with a stream that stays open.
fn fake_pod_apiserver(nodes: usize) -> kube::Client {
    let total = nodes * PODS_PER_NODE;
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| async move {
        let uri = req.uri().clone();
        assert_eq!(uri.path(), "/api/v1/pods", "the bench serves only the Pod list and watch");
        if query(&uri, "watch") == Some("true") {
            let open = futures::stream::pending::<Result<Bytes, Infallible>>();
            return Ok::<_, Infallible>(http::Response::new(Body::from_stream(open)));
        }
        let start: usize = query(&uri, "continue").and_then(|c| c.parse().ok()).unwrap_or(0);
        let end = (start + PAGE).min(total);
        let items: Vec<Value> = (start..end)
            .map(|id| {
                let mut p = pod(id / PODS_PER_NODE, id % PODS_PER_NODE);
                p["metadata"]["uid"] = json!(format!("pod-uid-{id}"));
                p["metadata"]["resourceVersion"] = json!("1");
                p
            })
            .collect();
        let more = if end < total { json!(end.to_string()) } else { Value::Null };
        let list = json!({"apiVersion": "v1", "kind": "PodList",
            "metadata": {"resourceVersion": "1", "continue": more}, "items": items});
        let body = serde_json::to_vec(&list).expect("a list serializes");
        Ok(http::Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("response"))
    });
    kube::Client::new(service, "default")
}

/// A store holding `objects`, as a synced reflector would.
fn store_of<K>(objects: impl Iterator<Item = Value>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + 'static,
{
    let (store, mut writer) = reflector::store::<K>();
    writer.apply_watcher_event(&Event::Init);
    for o in objects {
        writer.apply_watcher_event(&Event::InitApply(serde_json::from_value(o).expect("generated JSON parses")));
    }
    writer.apply_watcher_event(&Event::InitDone);
    store
}

/// The controller's pass sources over the generated cluster, once every cache is filled.
async fn sources(nodes: usize) -> PassSources {
    let started = Instant::now();
    let node_store: Store<Node> = store_of((0..nodes).map(|n| node(n, nodes)));
    let maintenances: Store<NodeMaintenance> = store_of((0..MAINTENANCES).map(|i| {
        let mut m = maintenance(i);
        m["metadata"]["uid"] = json!(format!("maintenance-uid-{i}"));
        m["metadata"]["generation"] = json!(1);
        m
    }));
    let (pods, changes) = pod_cache(fake_pod_apiserver(nodes));
    tokio::spawn(changes.for_each(|_| async {}));
    pods.wait_until_ready().await;
    assert_eq!(pods.len(), nodes * PODS_PER_NODE, "every pod cached");
    println!(
        "caches: {nodes} Nodes, {} Pods, {MAINTENANCES} NodeMaintenances (filled in {:.1} s)",
        pods.len(),
        started.elapsed().as_secs_f64()
    );
    let (metrics, _) = Metrics::new();
    PassSources {
        nodes: node_store,
        maintenances,
        pods,
        evictions: Arc::default(),
        reported_pods: Arc::default(),
        eviction_requests: None,
        gated: Arc::default(),
        options: PlannerOptions::default(),
        duration: metrics.planning_pass_duration,
    }
}

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    serve: ServeOptions,
}

/// One wrk run against `url`; returns its JSON summary (`hack/load/post.lua`).
async fn wrk(url: &str, seconds: usize) -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tokio::process::Command::new("wrk")
        .args(["-t2", "-c64", &format!("-d{seconds}s"), "-s"])
        .arg(root.join("hack/load/post.lua"))
        .arg(url)
        .env("WRK_BODY", root.join("tests/fixtures/apiserver/01-create-minimal-validate.json"))
        .output()
        .await
        .expect("wrk runs (hack/load.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rfind(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no summary from wrk: {text}"));
    serde_json::from_str(line).expect("wrk summary is JSON")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// How the passes run during a measurement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No passes: admission alone.
    Off,
    /// `SharedPass::decision` on tokio's blocking pool, as the controller's loop runs it.
    Pool,
    /// The pass called on the async worker (the controller before issue 24).
    Inline,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Off, Mode::Pool, Mode::Inline];

    fn name(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Pool => "pool",
            Mode::Inline => "inline",
        }
    }
}

/// The mode now (an index into [`Mode::ALL`]), passes completed and their summed duration.
#[derive(Default)]
struct PassCount {
    mode: AtomicUsize,
    done: AtomicU64,
    micros: AtomicU64,
}

async fn run(nodes: usize, bench: bool) {
    let sources = sources(nodes).await;
    // The Node or Pod watch's change signal, as the controller gives it.
    let (changed, changes) = tokio::sync::watch::channel(());
    let shared = Arc::new(SharedPass::new(vec![changes]));
    let on_pool = |shared: Arc<SharedPass>, sources: PassSources| async move {
        tokio::task::spawn_blocking(move || shared.decision(sources)).await.expect("the pass")
    };
    let first = on_pool(shared.clone(), sources.clone()).await;
    assert_eq!(first.nodes.len(), nodes, "a pass plans every held node");
    let evictions: usize = first.nodes.iter().map(|n| n.evict.len()).sum();
    println!("a pass plans {} nodes, {evictions} evictions", first.nodes.len());
    let again = on_pool(shared.clone(), sources.clone()).await;
    assert!(Arc::ptr_eq(&first, &again), "without a change the pass is reused");
    if !bench {
        return;
    }

    let dir = tempfile::tempdir().expect("temporary directory");
    let nodes_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/nodes.yaml");
    let flags = Flags::parse_from([
        "serve",
        "--standalone",
        "--nodes-file",
        nodes_file.to_str().expect("a UTF-8 path"),
        "--addr",
        "127.0.0.1:0",
        "--metrics-addr",
        "127.0.0.1:0",
        "--cert-dir",
        dir.path().to_str().expect("a UTF-8 path"),
    ]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound_tx, bound) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(app::serve(flags.serve, async { drop(stopped.await) }, Some(bound_tx)));
    let addr = bound.await.expect("the webhook starts").addr;
    let url = format!("https://127.0.0.1:{}/validate?timeout=10s", addr.port());

    let count = Arc::new(PassCount::default());
    let passes = tokio::spawn({
        let (shared, count) = (shared.clone(), count.clone());
        async move {
            loop {
                let started = Instant::now();
                match Mode::ALL[count.mode.load(Ordering::Relaxed)] {
                    Mode::Off => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                    Mode::Pool => {
                        changed.send_replace(());
                        drop(on_pool(shared.clone(), sources.clone()).await);
                    }
                    // As before issue 24: on this worker, then a yield (the old reconcile
                    // went on to its writes).
                    Mode::Inline => {
                        let s = &sources;
                        let input = planner_input(&s.nodes, &s.maintenances, &s.pods, |_| false, &s.gated, s.options);
                        drop(plan(&input));
                        drop(input);
                        return_freed_memory();
                        tokio::task::yield_now().await;
                    }
                }
                count.micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
                count.done.fetch_add(1, Ordering::Relaxed);
            }
        }
    });

    let (seconds, rounds) = (env_or("NM_PASS_SECONDS", 10), env_or("NM_PASS_ROUNDS", 3));
    println!("wrk -t2 -c64 -d{seconds}s /validate, {rounds} rounds of passes off / pool / inline, alternating");
    println!(
        "{:<4} {:<10} {:>9} {:>9} {:>9} {:>7} {:>9}",
        "run", "passes", "req/s", "p50 µs", "p99 µs", "passes", "mean ms"
    );
    let mut results: [Vec<(f64, f64, f64)>; 3] = Default::default();
    for round in 0..rounds {
        for (m, mode) in Mode::ALL.into_iter().enumerate() {
            count.mode.store(m, Ordering::Relaxed);
            wrk(&url, 2).await;
            let (done0, micros0) = (count.done.load(Ordering::Relaxed), count.micros.load(Ordering::Relaxed));
            let r = wrk(&url, seconds).await;
            let done = count.done.load(Ordering::Relaxed) - done0;
            let mean_ms = (count.micros.load(Ordering::Relaxed) - micros0) as f64 / done.max(1) as f64 / 1e3;
            let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
            let rps = f("requests") / (f("duration_us") / 1e6);
            let errors = ["connect_errors", "read_errors", "write_errors", "timeouts", "non2xx"].map(f);
            assert!(errors.iter().all(|e| *e == 0.0), "wrk saw errors: {r}");
            println!(
                "{:<4} {:<10} {rps:>9.0} {:>9.0} {:>9.0} {done:>7} {:>9}",
                round + 1,
                mode.name(),
                f("p50_us"),
                f("p99_us"),
                if mode == Mode::Off { "-".into() } else { format!("{mean_ms:.1}") }
            );
            results[m].push((rps, f("p50_us"), f("p99_us")));
        }
    }
    count.mode.store(0, Ordering::Relaxed);
    let med = |m: usize, pick: fn(&(f64, f64, f64)) -> f64| median(results[m].iter().map(pick).collect());
    for (what, pick) in [("throughput", (|r| r.0) as fn(&(f64, f64, f64)) -> f64), ("p50", |r| r.1), ("p99", |r| r.2)] {
        let (off, pool, inline) = (med(0, pick), med(1, pick), med(2, pick));
        println!(
            "median {what:<10}: off {off:>9.0}; pool {pool:>9.0} ({:.2}x); inline {inline:>9.0} ({:.2}x)",
            pool / off,
            inline / off
        );
    }
    passes.abort();
    let _ = stop.send(());
    let _ = server.await;
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let nodes = env_or("NM_PASS_NODES", if bench { 5_000 } else { 25 });
    // As `node-maintenance` builds its runtime (cli/mod.rs): one worker per core.
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(run(nodes, bench));
}
