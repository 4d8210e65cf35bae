//! SubjectAccessReview authorization at scale (docs/benchmarks.md, "SubjectAccessReview
//! authorization"): one admission decision — `admission::validate` of a NodeMaintenance
//! CREATE with a `SarAuthorizer` — that selects 5,000 nodes for a user with no permission on
//! "all nodes", so that after the denied all-nodes review every node needs its own
//! SubjectAccessReview (5,001 in all). The SARs go through the real `kube::Client` over HTTP
//! to the kube-apiserver stand-in of the tests (`tests/support/apiserver`), which answers each
//! after about 1 ms and records how many are in flight at once.
//!
//! Every decision starts with a cold cache (a new authorizer). Measured at `--sar-concurrency`
//! 16 and 64: time per decision (min, median, max of the runs), SARs sent and the most SARs in
//! flight at once, which must never exceed the bound. The decision is a 403 naming the
//! nodes: the work is the same as for an allowed one, since every answer is needed either way.
//!
//! Run: `cargo bench --bench sar_authz` (`-- --runs N` for more runs, default 10).

#[path = "../tests/support/apiserver/mod.rs"]
mod apiserver;

use k8s_openapi::api::core::v1::Node;
use kube::api::ObjectMeta;
use node_maintenance::admission::review::{Request, decode};
use node_maintenance::admission::validate;
use node_maintenance::cluster::sar::{SarAuthorizer, SarOptions};
use node_maintenance::cluster::standalone::StaticView;
use node_maintenance::metrics::Metrics;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const NODES: usize = 5_000;
/// The stand-in's delay before each answer (tokio's timer rounds it up to the next
/// millisecond tick: 1 to 2 ms in practice). `-- --latency-us N` changes it.
const SAR_LATENCY: Duration = Duration::from_millis(1);

fn nodes() -> Vec<Arc<Node>> {
    (0..NODES)
        .map(|i| {
            let labels = BTreeMap::from([
                ("pool".to_string(), "general".to_string()),
                ("kubernetes.io/hostname".to_string(), format!("node-{i:05}")),
            ]);
            Arc::new(Node {
                metadata: ObjectMeta { name: Some(format!("node-{i:05}")), labels: Some(labels), ..Default::default() },
                ..Default::default()
            })
        })
        .collect()
}

/// bob's recorded create of a maintenance of `pool=general` (fixture 13), unchanged: bob may
/// delete no node. The body is leaked: the request borrows from it for the whole run.
fn request() -> Request<'static> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/apiserver/13-create-by-bob-denied-validate.json");
    decode(std::fs::read(path).expect("fixture readable").leak()).expect("fixture decodes").request
}

struct Run {
    elapsed: Duration,
    sars: usize,
    max_in_flight: usize,
}

async fn decide_once(api: &apiserver::ApiServer, view: &StaticView, req: &Request<'_>, concurrency: usize) -> Run {
    let options = SarOptions { concurrency, cache_ttl: Duration::from_secs(60), timeout: Duration::from_secs(3) };
    let (metrics, _registry) = Metrics::new();
    // A new authorizer (and so an empty cache) per decision; its client's connections too.
    let authz = SarAuthorizer::new(api.client(), options, metrics);
    api.sar_reset();
    let started = Instant::now();
    let decision = validate(req, view, &authz).await;
    let elapsed = started.elapsed();
    let denial = decision.denial.expect("bob is denied");
    assert_eq!(denial.code, 403, "{}", denial.message);
    assert!(denial.message.contains(&format!("and {} more", NODES - 10)), "{}", denial.message);
    Run { elapsed, sars: api.sar_requests().len(), max_in_flight: api.sar_max_concurrency() }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| -> Option<u64> {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|n| n.parse().ok())
    };
    // `cargo test --all-targets` runs bench targets without `--bench`: one run as a smoke test.
    let default_runs = if args.iter().any(|a| a == "--bench") { 10 } else { 1 };
    let runs = flag("--runs").map_or(default_runs, |n| n.max(1) as usize);
    let latency = flag("--latency-us").map_or(SAR_LATENCY, Duration::from_micros);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    rt.block_on(async {
        let api = apiserver::ApiServer::start().await;
        api.sar_latency(latency);
        let view = StaticView::new(nodes(), vec![]);
        let req = request();
        println!(
            "sar_authz: validate CREATE selecting {NODES} nodes, no all-nodes permission, SAR latency {latency:?}, \
             cold cache, {runs} runs, {} tokio workers",
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
        );
        for concurrency in [16usize, 64] {
            // Warm-up: connections, allocator.
            decide_once(&api, &view, &req, concurrency).await;
            let mut times = Vec::with_capacity(runs);
            let mut max_in_flight = 0;
            for _ in 0..runs {
                let run = decide_once(&api, &view, &req, concurrency).await;
                assert_eq!(run.sars, NODES + 1, "the all-nodes review and one per node");
                assert!(
                    run.max_in_flight <= concurrency,
                    "{} SARs in flight with --sar-concurrency {concurrency}",
                    run.max_in_flight
                );
                max_in_flight = max_in_flight.max(run.max_in_flight);
                times.push(run.elapsed);
            }
            times.sort();
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let median = times[times.len() / 2];
            println!(
                "sar_authz/concurrency={concurrency:<3} time per decision: min {:.1} ms, median {:.1} ms, max {:.1} ms; \
                 {} SARs per decision; max in flight {max_in_flight} (bound {concurrency}); \
                 effective SAR round trip {:.2} ms (median x bound / SARs)",
                ms(times[0]),
                ms(median),
                ms(times[times.len() - 1]),
                NODES + 1,
                ms(median) * concurrency as f64 / (NODES + 1) as f64,
            );
        }
    });
}
