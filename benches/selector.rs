//! Node selection over 5,000 and 50,000 nodes (docs/benchmarks.md; target: <= 1 ms and
//! <= 10 ms per selector evaluation over the whole cluster).
//!
//! Nodes carry the labels a managed cloud cluster gives them (hostname, arch, os,
//! instance type, region and zone, node pool, capacity type, a numeric CPU-count label and,
//! on some, a GPU or control-plane label): 14 to 17 labels each. Each selector shape is
//! compiled once, as the webhook does, and then evaluated over every node, which is what
//! `/validate` does for a CREATE (`select` in `admission/validate.rs`).
//!
//! - `compile/<shape>`: `NodeMatcher::compile` alone.
//! - `select/<shape>/<nodes>`: one pass over all nodes, counting matches.
//! - `index/build/<nodes>`: building a `NodeIndex` (once per change of the Nodes, in a view
//!   that keeps one); `index/<shape>/<nodes>`: the same selections through it.
//! - `validate/<fixture>/<nodes>`: a recorded CREATE review (`tests/fixtures/apiserver`,
//!   unchanged) decoded, validated against a standalone view of these nodes plus 10 active
//!   maintenances (selection, authorization, warnings), and encoded: what one `/validate`
//!   request costs at that cluster size. `01` (admin, `pool In general`: 1/6 of the nodes),
//!   `13` (bob, same selector, denied: every selected node is named and counted), `14`
//!   (admin, `kubernetes.io/os In linux`: every node, with the all-nodes warning). Every view
//!   (the standalone file, the cluster cache) selects through its `NodeIndex`.
//!
//! Run: `cargo bench --bench selector`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use node_maintenance::admission::review::{decode, encode};
use node_maintenance::admission::{ClusterView, StandaloneAuthorizer, validate};
use node_maintenance::api::{NodeMaintenance, NodeMaintenanceSpec, Stage};
use node_maintenance::cluster::standalone::StaticView;
use node_maintenance::selector::{NodeIndex, NodeMatcher};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const ZONES: [&str; 3] = ["a", "b", "c"];
const POOLS: [&str; 6] = ["general", "general-arm", "memory", "compute", "gpu", "batch"];
const TYPES: [&str; 6] = ["m6i.2xlarge", "m7g.2xlarge", "r6i.4xlarge", "c6i.8xlarge", "p4d.24xlarge", "m6i.xlarge"];
const CPUS: [&str; 6] = ["8", "8", "16", "32", "96", "4"];

/// A deterministic pseudo-random sequence (no extra dependency, same nodes every run).
fn mix(i: usize) -> usize {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 32)) as usize
}

fn node(i: usize) -> Arc<Node> {
    let r = mix(i);
    let pool = r % POOLS.len();
    let zone = ZONES[(r / 7) % ZONES.len()];
    let name = format!("ip-10-{}-{}-{}.eu-west-1.compute.internal", (i >> 16) & 255, (i >> 8) & 255, i & 255);
    let mut labels: BTreeMap<String, String> = [
        ("beta.kubernetes.io/arch", if pool == 1 { "arm64" } else { "amd64" }),
        ("beta.kubernetes.io/instance-type", TYPES[pool]),
        ("beta.kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", if pool == 1 { "arm64" } else { "amd64" }),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", TYPES[pool]),
        ("topology.kubernetes.io/region", "eu-west-1"),
        ("failure-domain.beta.kubernetes.io/region", "eu-west-1"),
        ("pool", POOLS[pool]),
        ("example.com/cpu-count", CPUS[pool]),
        ("karpenter.sh/capacity-type", if r.is_multiple_of(5) { "spot" } else { "on-demand" }),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert("topology.kubernetes.io/zone".into(), format!("eu-west-1{zone}"));
    labels.insert("failure-domain.beta.kubernetes.io/zone".into(), format!("eu-west-1{zone}"));
    if POOLS[pool] == "gpu" {
        labels.insert("nvidia.com/gpu.present".into(), "true".into());
        labels.insert("nvidia.com/gpu.product".into(), "A100-SXM4-40GB".into());
    }
    if i < 3 {
        labels.insert("node-role.kubernetes.io/control-plane".into(), String::new());
    }
    Arc::new(Node {
        metadata: ObjectMeta { name: Some(name), labels: Some(labels), ..Default::default() },
        ..Default::default()
    })
}

fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

fn term(exprs: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: (!exprs.is_empty()).then_some(exprs),
        match_fields: (!fields.is_empty()).then_some(fields),
    }
}

/// The selector shapes: each operator alone, a realistic combination, and ORed terms.
fn shapes(nodes: &[Arc<Node>]) -> Vec<(&'static str, NodeSelector)> {
    let one = |t| NodeSelector { node_selector_terms: vec![t] };
    // 200 node names spread over the cluster (a maintenance for one rack, by name).
    let names: Vec<String> =
        (0..200).map(|k| nodes[mix(k + 1_000_000) % nodes.len()].metadata.name.clone().unwrap_or_default()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    vec![
        ("in", one(term(vec![req("pool", "In", &["general"])], vec![]))),
        ("not_in", one(term(vec![req("topology.kubernetes.io/zone", "NotIn", &["eu-west-1a", "eu-west-1b"])], vec![]))),
        ("exists", one(term(vec![req("nvidia.com/gpu.present", "Exists", &[])], vec![]))),
        ("gt", one(term(vec![req("example.com/cpu-count", "Gt", &["16"])], vec![]))),
        ("match_fields_200", one(term(vec![], vec![req("metadata.name", "In", &names)]))),
        (
            "combined",
            one(term(
                vec![
                    req("pool", "In", &["general", "memory", "compute"]),
                    req("topology.kubernetes.io/zone", "In", &["eu-west-1a"]),
                    req("karpenter.sh/capacity-type", "NotIn", &["spot"]),
                    req("node-role.kubernetes.io/control-plane", "DoesNotExist", &[]),
                    req("example.com/cpu-count", "Lt", &["64"]),
                ],
                vec![],
            )),
        ),
        (
            "three_terms",
            NodeSelector {
                node_selector_terms: vec![
                    term(vec![req("pool", "In", &["gpu"]), req("nvidia.com/gpu.present", "Exists", &[])], vec![]),
                    term(vec![req("pool", "In", &["batch"])], vec![req("metadata.name", "NotIn", &names[..10])]),
                    term(vec![req("node-role.kubernetes.io/control-plane", "Exists", &[])], vec![]),
                ],
            },
        ),
    ]
}

fn select(matcher: &NodeMatcher, nodes: &[Arc<Node>]) -> usize {
    nodes.iter().filter(|n| matcher.matches(n)).count()
}

fn bench(c: &mut Criterion) {
    let small: Vec<Arc<Node>> = (0..5_000).map(node).collect();
    let large: Vec<Arc<Node>> = (0..50_000).map(node).collect();

    let mut group = c.benchmark_group("compile");
    for (shape, sel) in shapes(&large) {
        group.bench_with_input(BenchmarkId::from_parameter(shape), &sel, |b, s| {
            b.iter(|| NodeMatcher::compile(black_box(s)))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("select");
    for nodes in [&small, &large] {
        group.throughput(Throughput::Elements(nodes.len() as u64));
        for (shape, sel) in shapes(nodes) {
            let matcher = NodeMatcher::compile(&sel).expect("valid selector");
            group.bench_with_input(BenchmarkId::new(shape, nodes.len()), &matcher, |b, m| {
                b.iter(|| select(m, black_box(nodes)))
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("index");
    for nodes in [&small, &large] {
        group.throughput(Throughput::Elements(nodes.len() as u64));
        group.sample_size(10);
        group.bench_with_input(BenchmarkId::new("build", nodes.len()), nodes, |b, n| {
            b.iter(|| NodeIndex::new(black_box(n).iter().map(AsRef::as_ref)))
        });
        group.sample_size(50);
        let index = NodeIndex::new(nodes.iter().map(AsRef::as_ref));
        for (shape, sel) in shapes(nodes) {
            let matcher = NodeMatcher::compile(&sel).expect("valid selector");
            group.bench_with_input(BenchmarkId::new(shape, nodes.len()), &matcher, |b, m| {
                b.iter(|| m.select_indexed(black_box(&index)).len())
            });
        }
    }
    group.finish();
}

/// 10 maintenances, 8 of them active (Cordon or Drain), selecting pools and zones.
fn maintenances() -> Vec<Arc<NodeMaintenance>> {
    (0..10)
        .map(|i| {
            let sel = NodeSelector {
                node_selector_terms: vec![term(
                    vec![
                        req("pool", "In", &[POOLS[i % POOLS.len()]]),
                        req("topology.kubernetes.io/zone", "In", &[&format!("eu-west-1{}", ZONES[i % 3])]),
                    ],
                    vec![],
                )],
            };
            let stage = [Stage::Drain, Stage::Cordon, Stage::Drain, Stage::Cordon, Stage::Idle][i % 5];
            let spec = NodeMaintenanceSpec {
                node_selector: sel,
                stage,
                drain_plan: vec![],
                max_unavailable: None,
                release_nodes_on: None,
                reason: None,
                drain_timeout: None,
                evacuation: None,
                paused: None,
                wait_for_completion: None,
            };
            Arc::new(NodeMaintenance::new(&format!("maintenance-{i}"), spec))
        })
        .collect()
}

fn bench_validate(c: &mut Criterion) {
    let authz = StandaloneAuthorizer::new([], []);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apiserver");
    let mut group = c.benchmark_group("validate");
    group.sample_size(20);
    for n in [5_000, 50_000] {
        let nodes: Vec<Arc<Node>> = (0..n).map(node).collect();
        let view = StaticView::new(nodes, maintenances());
        let _ = view.node_index(); // built once, outside the measurement, as the views keep it
        for fixture in
            ["01-create-minimal-validate", "13-create-by-bob-denied-validate", "14-create-selects-all-nodes-validate"]
        {
            let body = std::fs::read(dir.join(format!("{fixture}.json"))).expect("fixture");
            group.bench_with_input(BenchmarkId::new(&fixture[..2], n), &body, |b, body| {
                b.iter(|| {
                    let rev = decode(black_box(body)).expect("decodes");
                    let d = futures::executor::block_on(validate(&rev.request, &view, &authz));
                    encode(&rev.api_version, &rev.request.uid, &d, false)
                })
            });
        }
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = bench, bench_validate }
criterion_main!(benches);
