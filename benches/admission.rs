//! Admission end to end, bytes in -> bytes out (docs/benchmarks.md).
//!
//! Every AdmissionReview a real kube-apiserver sent (`tests/fixtures/apiserver/*.json`, used
//! unchanged) goes through what the server does with a body:
//!
//! - `review/<fixture>`: `review::decode`, the decision (`mutate`, `validate` or
//!   `validate_node`, chosen by the file name, over the standalone view of
//!   `tests/fixtures/nodes.yaml` with only `system:masters` authorized), `review::encode`.
//! - `router/<fixture>`: the same body POSTed in process to `server::routes::router` wrapped
//!   in the production limits (`with_limits`): the handler, its tracing span, metrics, the
//!   concurrency limit and timeout layers, but no TLS and no socket. No tracing subscriber
//!   is installed, so spans and events cost next to nothing.
//! - `router_logged/<fixture>`: the same with the subscriber `node-maintenance` installs
//!   (`fmt`, filter `info`), writing into `io::sink`: the cost of the request span and of
//!   the info line each denial logs, without the write(2) itself.
//!
//! Run: `cargo bench --bench admission` (filter with e.g. `-- review/01`).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use node_maintenance::admission::review::{decode, encode};
use node_maintenance::admission::{Authorizer, ClusterView, Decision, mutate, validate, validate_node};
use node_maintenance::metrics::Metrics;
use node_maintenance::server::Readiness;
use node_maintenance::server::routes::{self, AppState};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    Mutate,
    Validate,
    ValidateNode,
}

impl Endpoint {
    fn of(file: &str) -> Endpoint {
        if file.ends_with("-validate-node.json") {
            Endpoint::ValidateNode
        } else if file.ends_with("-mutate.json") {
            Endpoint::Mutate
        } else {
            Endpoint::Validate
        }
    }

    fn path(self) -> &'static str {
        match self {
            Endpoint::Mutate => "/mutate",
            Endpoint::Validate => "/validate",
            Endpoint::ValidateNode => "/validate-node",
        }
    }
}

struct Fixture {
    name: String,
    endpoint: Endpoint,
    body: Vec<u8>,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn fixtures() -> Vec<Fixture> {
    let dir = root().join("tests/fixtures/apiserver");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/apiserver")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let file = p.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
            Fixture {
                name: file.trim_end_matches(".json").to_owned(),
                endpoint: Endpoint::of(&file),
                body: std::fs::read(&p).expect("fixture"),
            }
        })
        .collect()
}

fn standalone() -> (Arc<dyn ClusterView>, Arc<dyn Authorizer>) {
    node_maintenance::app::standalone_parts(Some(&root().join("tests/fixtures/nodes.yaml")), vec![], vec![])
        .expect("tests/fixtures/nodes.yaml")
}

/// What the handler does with a body, minus HTTP: decode, decide, encode.
fn review(endpoint: Endpoint, body: &[u8], view: &dyn ClusterView, authz: &dyn Authorizer) -> Vec<u8> {
    match decode(body) {
        Ok(rev) => {
            let req = &rev.request;
            let decision: Decision = match endpoint {
                Endpoint::Mutate => mutate(req),
                Endpoint::Validate => futures::executor::block_on(validate(req, view, authz)),
                Endpoint::ValidateNode => validate_node(req, view),
            };
            encode(&rev.api_version, &req.uid, &decision, endpoint == Endpoint::Mutate)
        }
        Err(e) => e.message.into_bytes(),
    }
}

fn bench_review(c: &mut Criterion) {
    let (view, authz) = standalone();
    let mut group = c.benchmark_group("review");
    for f in fixtures() {
        group.throughput(Throughput::Bytes(f.body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(&f.name), &f, |b, f| {
            b.iter(|| review(f.endpoint, black_box(&f.body), view.as_ref(), authz.as_ref()))
        });
    }
    group.finish();
}

fn bench_router(c: &mut Criterion) {
    router_group(c, "router");
}

fn bench_router_logged(c: &mut Criterion) {
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
        .with_writer(std::io::sink)
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, || router_group(c, "router_logged"));
}

fn router_group(c: &mut Criterion, name: &str) {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    let (view, authz) = standalone();
    let (metrics, _registry) = Metrics::new();
    let readiness = Arc::new(Readiness::default());
    let state = AppState { view, authz, metrics, readiness, max_review_time: Duration::from_secs(9) };
    let app = routes::with_limits(routes::router(state), 512, Duration::from_secs(10));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut group = c.benchmark_group(name);
    // The allowed and denied requests the load harness (hack/load.sh) drives, plus the
    // largest ones.
    let wanted = [
        "01-create-minimal-mutate",
        "01-create-minimal-validate",
        "05-update-cordon-to-drain-validate",
        "06-update-drain-to-cordon-validate",
        "13-create-by-bob-denied-validate",
        "20-node-uncordon-validate-node",
    ];
    for f in fixtures().into_iter().filter(|f| wanted.contains(&f.name.as_str())) {
        let body = axum::body::Bytes::from(f.body.clone());
        let uri = format!("{}?timeout=10s", f.endpoint.path());
        group.throughput(Throughput::Bytes(f.body.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(&f.name), |b| {
            b.iter(|| {
                let req = Request::post(uri.as_str())
                    .header("content-type", "application/json")
                    .body(Body::from(body.clone()))
                    .expect("request");
                rt.block_on(async {
                    let resp = app.clone().oneshot(req).await.expect("infallible");
                    axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body")
                })
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    // 38 fixtures: keep a full run near a minute on 2 shared cores.
    Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1))
}

criterion_group! { name = benches; config = config(); targets = bench_review, bench_router, bench_router_logged }
criterion_main!(benches);
