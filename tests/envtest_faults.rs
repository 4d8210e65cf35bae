//! Faults of the control plane on a real kube-apiserver v1.36.2 (issue 25, part B;
//! docs/reliability.md): kube-apiserver killed for 20 s mid-drain and started again on the
//! same port and etcd; etcd compaction while the controller's watches are cut off (they must
//! re-list, and nothing stale may be written); kube-controller-manager down, so no
//! PodDisruptionBudget status is updated (evictions are refused and reported, nothing forced).
//!
//! The product reaches the apiserver through a TCP relay ([`Relay`]) that counts its
//! connections (a busy loop would show as thousands) and can cut it off alone.

mod support;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::{Client, ResourceExt};
use node_maintenance::api::{MAINTENANCES_ANNOTATION, NodeMaintenance};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cluster::{as_user, recorded, response, selector, with_selector};
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{
    create_maintenance, create_node, holders, is_cordoned, maintenance_json, node, wait_for,
};
use support::envtest::relay::Relay;
use support::envtest::requests::{RequestCounts, metric_sum};
use support::envtest::{Envtest, Options, client_from};

const WAIT: Duration = Duration::from_secs(180);

/// Deployment `web` (`replicas` pods on `pool=general`, 1 s grace) and its PodDisruptionBudget
/// (`budget`, e.g. `maxUnavailable: 1`), in namespace `apps`.
fn web(replicas: u32, budget: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: apps}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      nodeSelector: {{pool: general}}
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: nginx}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: apps}}
spec:
  {budget}
  selector: {{matchLabels: {{app: web}}}}
"#
    )
}

/// The pods of `apps`.
async fn pods(c: &Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(c.clone(), "apps").list(&ListParams::default()).await.expect("list pods").items
}

fn node_of(p: &Pod) -> &str {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default()
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") && p.metadata.deletion_timestamp.is_none()
}

/// A cluster with kube-controller-manager, the scheduler and the fake kubelet, worker-1 and
/// worker-2 in `pool=general` running every pod of [`web`], and `spares` more nodes of the
/// pool created afterwards for the replacements. Returns the web pods' UIDs.
async fn cluster(opts: Options, replicas: u32, budget: &str, spares: &[&str]) -> Option<(Envtest, BTreeSet<String>)> {
    let env = Envtest::start(Options { workloads: true, ..opts }).await?;
    let c = env.client();
    for n in ["worker-1", "worker-2"] {
        create_node(&c, n, &[("pool", "general")]).await;
    }
    env.kubectl_ok(&["create", "namespace", "apps"]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(&web(replicas, budget))).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    let uids = wait_for("every web pod Running and the PDB observed", WAIT, || async {
        let p = pods(&c).await;
        let pdb = env.kubectl(&["get", "pdb", "-n", "apps", "web", "-o", "json"], None).await;
        let pdb: Value = serde_json::from_slice(&pdb.stdout).unwrap_or_default();
        let observed = pdb["status"]["observedGeneration"] == pdb["metadata"]["generation"]
            && pdb["status"]["currentHealthy"] == json!(replicas);
        if p.iter().filter(|p| running(p)).count() == replicas as usize && observed {
            Ok(p.iter().filter_map(|p| p.uid()).collect())
        } else {
            Err(format!("{} pods, PDB status {}", p.len(), pdb["status"]))
        }
    })
    .await;
    for n in spares {
        create_node(&c, n, &[("pool", "general")]).await;
    }
    Some((env, uids))
}

/// The apiserver's port, for the relay.
fn apiserver_port(env: &Envtest) -> u16 {
    env.url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("apiserver URL has a port")
}

/// A kubeconfig for the product (`system:masters`) that goes through `relay`.
fn product_kubeconfig(env: &Envtest, relay: &Relay) -> std::path::PathBuf {
    env.pki.kubeconfig("product", &relay.url, "node-maintenance", Some("system:masters"))
}

/// The condition `type_` of a maintenance as stored.
async fn condition(c: &Client, name: &str, type_: &str) -> Value {
    let m = maintenance_json(c, name).await.unwrap_or_default();
    m["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|x| x["type"] == type_).cloned())
        .unwrap_or_default()
}

/// `node_maintenance_evictions_total{result}` of a `/metrics` text.
fn evictions(metrics: &str, result: &str) -> u64 {
    metric_sum(metrics, "node_maintenance_evictions_total", &[&format!("result=\"{result}\"")]).unwrap_or(0.0) as u64
}

/// Successful writes of PodDisruptionBudget status (`apiserver_request_total`, code 200).
fn pdb_status_writes(metrics: &str) -> u64 {
    let labels = ["resource=\"poddisruptionbudgets\"", "subresource=\"status\"", "code=\"200\""];
    metric_sum(metrics, "apiserver_request_total", &labels).unwrap_or(0.0) as u64
}

/// An admin CREATE review selecting `pool=general`: deciding it needs SubjectAccessReviews.
fn admin_create() -> Value {
    let admin = json!({"username": "admin", "uid": "uid-admin", "groups": ["system:masters", "system:authenticated"]});
    with_selector(
        &as_user(&recorded("13-create-by-bob-denied-validate").review(), admin),
        selector("pool", "In", &["general"]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apiserver_down_for_20s_mid_drain_fails_closed_and_the_drain_resumes_from_the_stored_status() {
    let Some((mut env, web_uids)) = cluster(Options::default(), 4, "maxUnavailable: 2", &["spare-1", "spare-2"]).await
    else {
        return;
    };
    let c = env.client();
    let relay = Relay::start(apiserver_port(&env)).await;
    let kubeconfig = product_kubeconfig(&env, &relay);
    let dir = tempfile::tempdir().expect("tempdir");
    let extra = ["--controller=true", "--lease-namespace", "default", "--sar-timeout", "1s", "--sar-cache-ttl", "1ms"];
    let hook = support::cluster::start_with_kubeconfig(dir, &kubeconfig, &extra).await;
    hook.wait_ready(Duration::from_secs(60)).await;
    let ca = std::fs::read(hook.dir.path().join("certs/ca.crt")).expect("dev CA");
    env.register_webhooks(hook.bound.addr.port(), &ca).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1", "worker-2"], None)).await.expect("created");

    // Mid-drain: one eviction accepted (a web pod terminating), others still to come.
    wait_for("the first eviction", WAIT, || async {
        let p = pods(&c).await;
        let terminating = p.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count();
        if terminating > 0 { Ok(()) } else { Err(format!("{} pods, none terminating", p.len())) }
    })
    .await;
    let stored = maintenance_json(&c, "m").await.expect("m");
    let stages_before = stored["status"]["stageStatuses"].clone();
    let requests_before_outage = RequestCounts::parse(&env.metrics().await)
        .0
        .iter()
        .fold(0, |n, ((v, r, s), k)| if v == "POST" && r == "pods" && s == "eviction" { n + k } else { n });
    let evictions_before = hook.metrics().await;

    env.kill("kube-apiserver");
    let down = Instant::now();
    let (connections_before, unreachable_before) = (relay.connections(), relay.unreachable());
    let (mut reviews, mut unavailable) = (0u64, 0u64);
    while down.elapsed() < Duration::from_secs(20) {
        let answer = hook.post("/validate?timeout=10s", &admin_create()).await;
        let r = response(&answer);
        reviews += 1;
        assert_eq!(r["allowed"], false, "allowed without a SubjectAccessReview answer: {r}");
        if r["status"]["code"] == 503 {
            unavailable += 1;
        }
        assert!(hook.is_running(), "serve stopped while the apiserver was down");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let outage_connections = relay.connections() - connections_before;
    let outage_unreachable = relay.unreachable() - unreachable_before;
    let metrics_during = hook.metrics().await;
    env.restart("kube-apiserver").await;
    let back = Instant::now();

    // The drain resumes: its cursor never goes back, and it finishes.
    let cursors = Mutex::new(Vec::new());
    let drained_at = wait_for("Drained=True after the restart", WAIT, || {
        let (c, cursors) = (c.clone(), &cursors);
        async move {
            let m = maintenance_json(&c, "m").await.unwrap_or_default();
            if let Some(i) = m["status"]["drainStatus"]["drainPlanIndex"].as_i64() {
                cursors.lock().expect("lock").push(i);
            }
            let cond = m["status"]["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|x| x["type"] == "Drained").cloned())
                .unwrap_or_default();
            if cond["status"] == "True" { Ok(back.elapsed()) } else { Err(cond.to_string()) }
        }
    })
    .await;
    let mut cursors = cursors.into_inner().expect("lock");
    cursors.dedup();
    let metrics_after = hook.metrics().await;
    let after = maintenance_json(&c, "m").await.expect("m");
    let left: Vec<String> = pods(&c)
        .await
        .iter()
        .filter(|p| p.uid().is_some_and(|u| web_uids.contains(&u)))
        .map(|p| format!("{} on {}", p.name_any(), node_of(p)))
        .collect();
    let accepted = evictions(&metrics_after, "accepted");
    let failed = evictions(&metrics_after, "error") - evictions(&evictions_before, "error");
    println!(
        "apiserver down 20 s: {reviews} admin reviews ({unavailable} answered 503), {outage_connections} connections \
         from serve to the apiserver meanwhile ({outage_unreachable} found it unreachable); drained {:.1} s after the restart; \
         evictions accepted {accepted} for {} pods ({requests_before_outage} eviction requests before the outage), failed {failed}, \
         refused by the PDB {}, not found {}; cursors seen {cursors:?}",
        drained_at.as_secs_f64(),
        web_uids.len(),
        evictions(&metrics_after, "blocked_by_pdb"),
        evictions(&metrics_after, "not_found"),
    );
    assert_eq!(unavailable, reviews, "every review needing a SubjectAccessReview is answered 503 (fail closed)");
    assert!(
        outage_connections < 10 * 20 + reviews,
        "no busy loop: {outage_connections} connections in 20 s (reviews: {reviews})"
    );
    assert!(metrics_during.contains("node_maintenance_reconciles_total"), "serve kept serving /metrics");
    assert!(left.is_empty(), "every web pod that ran on the drained nodes is gone: {left:?}");
    assert!(
        accepted <= web_uids.len() as u64,
        "no pod evicted twice: {accepted} accepted evictions for {} pods",
        web_uids.len()
    );
    assert!(cursors.windows(2).all(|w| w[0] <= w[1]), "the drain cursor never went back: {cursors:?}");
    assert_eq!(after["status"]["stageStatuses"], stages_before, "the stored stage times are kept");
}

/// Every change to the objects `api` lists from `rv` on, as (event type, object), recorded
/// until the returned task is aborted.
fn record<K>(api: Api<K>, rv: String) -> (Arc<Mutex<Vec<K>>>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = api.watch(&WatchParams::default(), &rv).await.expect("watch").boxed();
        while let Ok(Some(event)) = stream.try_next().await {
            if let WatchEvent::Added(o) | WatchEvent::Modified(o) = event {
                out.lock().expect("lock").push(o);
            }
        }
    });
    (seen, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_that_fall_behind_a_compaction_relist_and_nothing_stale_is_written() {
    // Without the watch cache a watch resumed from a compacted revision gets 410 Gone from
    // etcd itself; etcd is compacted every 5 s.
    let opts =
        Options { apiserver_args: &["--etcd-compaction-interval=5s", "--watch-cache=false"], ..Options::default() };
    let Some(env) = Envtest::start(opts).await else { return };
    let c = env.client();
    for (n, pool) in [("worker-1", "a"), ("worker-2", "a"), ("worker-3", "b")] {
        create_node(&c, n, &[("pool", pool)]).await;
    }
    let relay = Relay::start(apiserver_port(&env)).await;
    let product = client_from(&product_kubeconfig(&env, &relay)).await;
    let ctl = start_with(product, options(false)).await;
    let mut m = maintenance("m", "Cordon", &[], None);
    m["spec"]["nodeSelector"] =
        json!({"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]});
    create_maintenance(&c, m).await.expect("created");
    wait_for("pool a cordoned by m", WAIT, || async {
        for n in ["worker-1", "worker-2"] {
            let n = node(&c, n).await;
            if !is_cordoned(&n) || holders(&n).is_none_or(|h| !h.contains('m')) {
                return Err(format!("{} {:?}", n.name_any(), holders(&n)));
            }
        }
        Ok(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // The controller is cut off; meanwhile the world changes and the history is compacted.
    relay.set_cut(true);
    let nodes = Api::<Node>::all(c.clone());
    let rv = nodes.list_metadata(&ListParams::default().limit(1)).await.expect("list").metadata.resource_version;
    // After this test's own LIST: from here on only the controller lists.
    let before = RequestCounts::parse(&env.metrics().await);
    let (node_versions, node_watch) = record(nodes.clone(), rv.clone().unwrap_or_default());
    let (nm_versions, nm_watch) = record(Api::<NodeMaintenance>::all(c.clone()), rv.unwrap_or_default());
    let label = |pool: &str| Patch::Merge(json!({"metadata": {"labels": {"pool": pool}}}));
    nodes.patch("worker-2", &PatchParams::default(), &label("b")).await.expect("worker-2 leaves pool a");
    nodes.patch("worker-3", &PatchParams::default(), &label("a")).await.expect("worker-3 joins pool a");
    support::envtest::objects::set_stage(&c, "m", "Drain").await;
    for i in 0..16 {
        // More revisions, and time for two compactions past the controller's last events.
        let touch = Patch::Merge(json!({"metadata": {"annotations": {"test/touch": i.to_string()}}}));
        nodes.patch("worker-1", &PatchParams::default(), &touch).await.expect("touch");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    relay.set_cut(false);
    let back = Instant::now();

    let settled = wait_for("m acts on the current pool", WAIT, || async {
        let (w2, w3) = (node(&c, "worker-2").await, node(&c, "worker-3").await);
        let cond = condition(&c, "m", "Drained").await;
        let m = maintenance_json(&c, "m").await.unwrap_or_default();
        let current = m["status"]["observedGeneration"] == m["metadata"]["generation"];
        if !is_cordoned(&w2) && holders(&w2).is_none() && is_cordoned(&w3) && cond["status"] == "True" && current {
            Ok(back.elapsed())
        } else {
            Err(format!("worker-2 {:?}, worker-3 {:?}, Drained {cond}", holders(&w2), holders(&w3)))
        }
    })
    .await;
    // Every cache re-lists once its watch is back (each after its own backoff).
    let counts = wait_for("every cache re-listed", WAIT, || async {
        let counts = RequestCounts::parse(&env.metrics().await).since(&before);
        let missing: Vec<&str> = ["nodes", "nodemaintenances", "pods", "nodedisruptionbudgets"]
            .into_iter()
            .filter(|r| counts.get("LIST", r, "") == 0)
            .collect();
        if missing.is_empty() { Ok(counts) } else { Err(format!("no LIST yet of {missing:?}")) }
    })
    .await;
    node_watch.abort();
    nm_watch.abort();
    let lists = |r: &str| counts.get("LIST", r, "");
    println!(
        "cut off 16 s with 2+ compactions: settled {:.1} s after; re-lists: nodes {}, nodemaintenances {}, pods {}, \
         nodedisruptionbudgets {}; writes meanwhile (refused ones included): {:?}",
        settled.as_secs_f64(),
        lists("nodes"),
        lists("nodemaintenances"),
        lists("pods"),
        lists("nodedisruptionbudgets"),
        counts.writes()
    );
    // No stale write: worker-2, out of the pool while the controller was away, is never
    // held by m again once released; every status m got carries the generation it was
    // computed for (a status from the stale cache would say generation 1).
    let w2: Vec<Option<String>> = node_versions
        .lock()
        .expect("lock")
        .iter()
        .filter(|n| n.name_any() == "worker-2")
        .map(|n| n.annotations().get(MAINTENANCES_ANNOTATION).cloned())
        .collect();
    let released = w2.iter().position(Option::is_none).expect("worker-2 released");
    assert!(w2[released..].iter().all(Option::is_none), "worker-2 held again after its release: {w2:?}");
    let versions = nm_versions.lock().expect("lock").clone();
    let mut last_status = None;
    for v in &versions {
        let status = serde_json::to_value(&v.status).expect("status");
        if last_status.as_ref() != Some(&status) && last_status.is_some() {
            assert_eq!(
                v.status.as_ref().and_then(|s| s.observed_generation),
                v.metadata.generation,
                "a status written after the cut is for the current generation: {status}"
            );
        }
        last_status = Some(status);
    }
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_controller_manager_down_evictions_are_refused_and_reported_nothing_forced() {
    let Some((mut env, web_uids)) = cluster(Options::default(), 2, "minAvailable: 1", &["spare-1"]).await else {
        return;
    };
    let c = env.client();
    // No disruption controller from now on: the PDB's status is only what the eviction
    // handler itself writes (one disruption allowed, then none), and no ReplicaSet controller.
    env.kill("kube-controller-manager");
    let before = RequestCounts::parse(&env.metrics().await);
    let pdb_status_writes_before = pdb_status_writes(&env.metrics().await);
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1", "worker-2"], None)).await.expect("created");
    let reported = wait_for("the refusal reported", WAIT, || async {
        let cond = condition(&c, "m", "Drained").await;
        let message = cond["message"].as_str().unwrap_or_default().to_owned();
        if message.contains("blocked by PDB apps/web") { Ok(message) } else { Err(cond.to_string()) }
    })
    .await;
    // Long enough for several retries (backoff 2, 4, 8 s ...).
    tokio::time::sleep(Duration::from_secs(15)).await;
    let during = RequestCounts::parse(&env.metrics().await).since(&before);
    let left: Vec<Pod> =
        pods(&c).await.into_iter().filter(|p| p.uid().is_some_and(|u| web_uids.contains(&u))).collect();
    let events = Api::<Event>::namespaced(c.clone(), "default").list(&ListParams::default()).await.expect("events");
    let blocked = events.items.iter().filter(|e| e.reason.as_deref() == Some("EvictionBlocked")).count();
    let refused = evictions(&ctl.metrics_text(), "blocked_by_pdb");
    let accepted = evictions(&ctl.metrics_text(), "accepted");
    let evictions = during.get("POST", "pods", "eviction");
    println!(
        "kube-controller-manager down: {reported:?}; eviction requests {evictions} (accepted {accepted}, refused \
         {refused} by the PDB) in ~20 s; EvictionBlocked Events {blocked}; PDB write requests {} (conflicts included)",
        during.writes_on("poddisruptionbudgets")
    );
    // The eviction handler records each accepted eviction in the PDB's status itself (a
    // loopback request); nothing else may write it.
    let status_writes = pdb_status_writes(&env.metrics().await) - pdb_status_writes_before;
    assert_eq!(status_writes, accepted, "only accepted evictions updated the PDB status");
    assert_eq!(left.len(), 1, "one pod went (the one disruption allowed), the other stays: {left:?}");
    assert!(left[0].metadata.deletion_timestamp.is_none(), "the refused pod was not deleted or forced");
    // A budget that allows nothing holds its pods until its status allows again or, since
    // that status cannot move without the controller-manager, for up to a minute: one refusal
    // in these 20 s, reported; the retry after the restart below ends the drain.
    assert!(refused >= 1 && blocked >= 1, "refusals reported (Event EvictionBlocked)");
    assert!(evictions <= 10, "refused evictions back off: {evictions} requests");
    assert_eq!(condition(&c, "m", "Drained").await["status"], "False");

    // The controller-manager back: a replacement starts, the PDB allows again, the drain ends.
    env.restart("kube-controller-manager").await;
    let back = Instant::now();
    wait_for("Drained=True once kube-controller-manager is back", WAIT, || async {
        let cond = condition(&c, "m", "Drained").await;
        if cond["status"] == "True" { Ok(()) } else { Err(cond.to_string()) }
    })
    .await;
    println!("drained {:.1} s after kube-controller-manager came back", back.elapsed().as_secs_f64());
    ctl.stop().await;
}
