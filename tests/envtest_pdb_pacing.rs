//! Drains paced by PodDisruptionBudgets on a real kube-apiserver (SPEC 4.3): a Deployment of
//! 12 pods on one node behind a PDB `maxUnavailable: 1`, with kube-controller-manager (the
//! ReplicaSet and disruption controllers), kube-scheduler and the fake kubelet starting each
//! replacement within seconds. Our drain of one node and `kubectl drain` of an identical node
//! run side by side, on the same control plane at the same time: ours must not be slower
//! (kubectl retries a refused eviction every 5 s; we evict as soon as the budget's watched
//! `status.disruptionsAllowed` allows it).

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use std::time::{Duration, Instant};
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{create_maintenance, create_node, maintenance_json, wait_for};
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(300);
const REPLICAS: usize = 12;

/// Deployment `name` (12 replicas) allowed on the nodes of pool `pool` or `spare`, and its
/// PDB `maxUnavailable: 1`.
fn workload(name: &str, pool: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: apps}}
spec:
  replicas: {REPLICAS}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{{key: pool, operator: In, values: [{pool}, spare]}}]
      containers: [{{name: app, image: registry.k8s.io/pause:3.10}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: {name}, namespace: apps}}
spec:
  maxUnavailable: 1
  selector: {{matchLabels: {{app: {name}}}}}
"#
    )
}

/// The pods of `app` running (not terminating) on `node`.
async fn running_on(c: &kube::Client, app: &str, node: &str) -> usize {
    let pods = Api::<Pod>::namespaced(c.clone(), "apps")
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("pods")
        .items;
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_behind_a_pdb_goes_at_the_pace_the_pdb_allows_not_slower_than_kubectl_drain() {
    let Some(env) = Envtest::start(Options { workloads: true, ..Options::default() }).await else { return };
    let c = env.client();
    create_node(&c, "ours-1", &[("pool", "ours")]).await;
    create_node(&c, "kubectl-1", &[("pool", "kubectl")]).await;
    env.kubectl_ok(&["create", "namespace", "apps"]).await;
    let manifests = format!("{}---{}", workload("ours", "ours"), workload("theirs", "kubectl"));
    let out = env.kubectl(&["apply", "-f", "-"], Some(&manifests)).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    wait_for("every pod running on its node", WAIT, || async {
        let (ours, theirs) = (running_on(&c, "ours", "ours-1").await, running_on(&c, "theirs", "kubectl-1").await);
        if ours == REPLICAS && theirs == REPLICAS { Ok(()) } else { Err(format!("{ours} {theirs}")) }
    })
    .await;
    // Both PDBs allow one disruption before either drain starts.
    wait_for("the PDBs allow a disruption", WAIT, || async {
        let out =
            env.kubectl_ok(&["get", "pdb", "-n", "apps", "-o", "jsonpath={.items[*].status.disruptionsAllowed}"]).await;
        if out.trim() == "1 1" { Ok(()) } else { Err(out) }
    })
    .await;
    create_node(&c, "spare-1", &[("pool", "spare")]).await;
    let ctl = start_with(c.clone(), options(false)).await;

    let started = Instant::now();
    let kubectl = async {
        let out = env
            .kubectl(&["drain", "kubectl-1", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m"], None)
            .await;
        assert!(out.status.success(), "kubectl drain: {}", String::from_utf8_lossy(&out.stderr));
        started.elapsed()
    };
    let ours = async {
        create_maintenance(&c, maintenance("m", "Drain", &["ours-1"], None)).await.expect("m");
        wait_for("m drained", WAIT, || async {
            let m = maintenance_json(&c, "m").await.ok_or("gone")?;
            if m["status"]["conditions"][0]["status"] == "True" { Ok(()) } else { Err(m["status"].to_string()) }
        })
        .await;
        started.elapsed()
    };
    let (ours, kubectl) = tokio::join!(ours, kubectl);
    eprintln!("12 pods behind maxUnavailable 1: ours {ours:?}, kubectl drain {kubectl:?} (same run, side by side)");
    assert_eq!(running_on(&c, "ours", "ours-1").await, 0);
    // Same control plane, same moment, same workload: a margin of a tenth for the noise of
    // two drains sharing two cores.
    assert!(
        ours.as_secs_f64() <= kubectl.as_secs_f64() * 1.1,
        "ours {ours:?} is slower than kubectl drain {kubectl:?}"
    );
    ctl.stop().await;
}
