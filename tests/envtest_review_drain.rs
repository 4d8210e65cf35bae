//! Issue 16 against a real kube-apiserver with kube-controller-manager (so PodDisruptionBudget
//! status is computed by the real disruption controller): `review` in cluster mode, with the
//! admin kubeconfig, gives the same drain preview as the offline review of a dump taken from
//! that same cluster with `kubectl get nodes,pods,pdb,rs -A -o yaml`.

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use support::cli::run;
use support::envtest::objects::{create_node, wait_for};
use support::envtest::requests::RequestCounts;
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(120);

/// The objects of tests/fixtures/cluster-dump.yaml, created for real: a Deployment behind a
/// PDB allowing 1 disruption, a StatefulSet behind a PDB at 0, a Job, a bare pod with an
/// emptyDir, two DaemonSets (one tolerating every taint) and a mirror pod.
const WORKLOADS: &str = r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 1000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: databases}
value: 100000
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: apps}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      priorityClassName: low
      terminationGracePeriodSeconds: 1
      containers: [{name: web, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: apps}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: apps}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      priorityClassName: databases
      terminationGracePeriodSeconds: 1
      containers: [{name: db, image: postgres}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: apps}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: db}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: report, namespace: batch}
spec:
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      containers: [{name: report, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: default, labels: {run: debug}}
spec:
  nodeName: worker-1
  containers: [{name: sh, image: busybox, volumeMounts: [{name: scratch, mountPath: /scratch}]}]
  volumes: [{name: scratch, emptyDir: {}}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: agent, image: agent}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: log-shipper, namespace: kube-system}
spec:
  selector: {matchLabels: {app: log-shipper}}
  template:
    metadata: {labels: {app: log-shipper}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      terminationGracePeriodSeconds: 1
      containers: [{name: shipper, image: fluent-bit}]
---
apiVersion: v1
kind: Pod
metadata:
  name: kube-proxy-worker-1
  namespace: kube-system
  annotations: {kubernetes.io/config.mirror: "3f1e0c2b9a8d", kubernetes.io/config.source: file}
spec:
  nodeName: worker-1
  priorityClassName: system-node-critical
  containers: [{name: kube-proxy, image: kube-proxy}]
"#;

async fn review(args: Vec<String>) -> Value {
    let (code, out) =
        tokio::task::spawn_blocking(move || run(&args.iter().map(String::as_str).collect::<Vec<_>>())).await.unwrap();
    assert_eq!(code, 0, "{out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_review_previews_the_same_drain_as_a_dump_of_the_cluster() {
    let Some(env) = Envtest::start(Options { workloads: true, ..Options::default() }).await else { return };
    let c = env.client();
    for n in ["worker-1", "worker-2"] {
        create_node(&c, n, &[("pool", "general")]).await;
    }
    for ns in ["apps", "batch"] {
        env.kubectl_ok(&["create", "namespace", ns]).await;
    }
    // Until the controller-manager made each namespace's `default` ServiceAccount, pods are refused.
    wait_for("the workloads applied", WAIT, || async {
        let out = env.kubectl(&["apply", "-f", "-"], Some(WORKLOADS)).await;
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    })
    .await;
    // 2 web, db-0, the Job's pod, debug, 2 agents, 2 log-shippers, the mirror pod.
    wait_for("every workload pod bound and Running, PDB status observed", WAIT, || async {
        let pods = Api::<Pod>::all(c.clone()).list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let running = pods
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        let pdbs = Api::<PodDisruptionBudget>::namespaced(c.clone(), "apps")
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items;
        let allowed: Vec<(String, Option<i32>, Option<i32>)> = pdbs
            .iter()
            .map(|p| {
                let s = p.status.as_ref();
                (
                    p.metadata.name.clone().unwrap_or_default(),
                    s.and_then(|s| s.current_healthy),
                    s.and_then(|s| s.disruptions_allowed),
                )
            })
            .collect();
        let settled =
            allowed.contains(&("web".into(), Some(2), Some(1))) && allowed.contains(&("db".into(), Some(1), Some(0)));
        if running == 10 && settled { Ok(()) } else { Err(format!("{running} running; PDBs {allowed:?}")) }
    })
    .await;

    let dir = tempfile::tempdir().unwrap();
    // The general pool, default plan (the preview does not depend on the stage).
    let manifest = support::envtest::fixture("manifests/nm-general.yaml");
    let kubeconfig = path(&env.admin_kubeconfig);
    let live = review(
        ["review", "-f", &path(&manifest), "--kubeconfig", &kubeconfig, "-o", "json"].map(String::from).to_vec(),
    )
    .await;
    let dump = env.kubectl_ok(&["get", "nodes,pods,pdb,rs", "-A", "-o", "yaml"]).await;
    let dump_file = dir.path().join("dump.yaml");
    std::fs::write(&dump_file, dump).unwrap();
    let offline = review(
        ["review", "-f", &path(&manifest), "--nodes-file", &path(&dump_file), "-o", "json"].map(String::from).to_vec(),
    )
    .await;

    let preview = &live["drainPreview"];
    assert_eq!(preview, &offline["drainPreview"], "cluster mode and the dump disagree");
    assert_eq!(live["selected"], offline["selected"]);
    assert_eq!(preview["ownerResolution"], "replicaSets");
    assert_eq!(preview["outcome"]["stuckAt"], 1, "{preview:#}");
    assert_eq!(preview["outcome"]["reason"], "PodDisruptionBudget apps/db allows no eviction");
    let owners: Vec<String> = preview["steps"][0]["byOwner"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| format!("{}/{}", g["owner"]["kind"].as_str().unwrap(), g["owner"]["name"].as_str().unwrap()))
        .collect();
    assert!(owners.contains(&"Deployment/web".to_string()), "{owners:?}");
    assert!(owners.contains(&"Job/report".to_string()), "{owners:?}");
    assert!(owners.contains(&"Pod/debug".to_string()), "{owners:?}");
    assert_eq!(preview["notComingBack"]["pods"], serde_json::json!(["default/debug"]));
    assert_eq!(preview["emptyDirLost"]["pods"], serde_json::json!(["default/debug (scratch)"]));
}

/// `review` in cluster mode as the kubeconfig's own user (SelfSubjectReview for the name and
/// groups, SelfSubjectAccessReviews for the node rights), answered by real RBAC: alice (`ops`:
/// may delete worker-1 and worker-2) is denied the rest of the general pool, and the what-if
/// writes nothing (moved from the stand-in, issue 24).
#[tokio::test]
async fn cluster_review_uses_the_current_users_own_access() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    support::envtest::objects::create_fixture_nodes(&env.client()).await;
    let before = RequestCounts::parse(&env.metrics().await);
    let kubeconfig = env.kubeconfig_as("alice", Some("ops"));
    let manifest = support::envtest::fixture("manifests/nm-general.yaml");
    let args = ["review".to_owned(), "-f".into(), path(&manifest), "--kubeconfig".into(), path(&kubeconfig)];
    let (code, out) =
        tokio::task::spawn_blocking(move || run(&args.iter().map(String::as_str).collect::<Vec<_>>())).await.unwrap();
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("as user \"alice\": DENIED (403 Forbidden)"), "{out}");
    assert!(out.contains("Authorization: user \"alice\" may not delete worker-3, worker-4"), "{out}");
    let sent = RequestCounts::parse(&env.metrics().await).since(&before);
    assert!(sent.get("POST", "selfsubjectaccessreviews", "") >= 1, "{sent:?}");
    assert_eq!(sent.writes_on("nodemaintenances"), 0, "the what-if writes nothing: {:?}", sent.writes());
}
