//! Drain with real workloads on a real kube-apiserver (SPEC 4.3): kube-controller-manager
//! (ReplicaSets re-create evicted pods, the disruption controller computes PDB status, the
//! DaemonSet controller), kube-scheduler and the fake kubelet. Evictions go through the real
//! Eviction API, so PodDisruptionBudgets are honoured by the apiserver itself.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use node_maintenance::api::{DrainPlanEntry, PodType, default_plan};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{create_node, create_pods, is_cordoned, maintenance_json, node, set_stage, wait_for};
use support::envtest::requests::metric_sum;
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(120);

/// Workloads pinned to `pool=general`: a low-priority Deployment `web` (2 replicas, PDB
/// minAvailable 1), a DaemonSet `agent`, and a mirror pod `etcd-worker-1` on worker-1;
/// `extra` is more YAML (e.g. a blocked workload).
fn workloads(extra: &str) -> String {
    format!(
        r#"
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: low}}
value: 1000
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: apps}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      priorityClassName: low
      nodeSelector: {{pool: general}}
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: nginx}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: apps}}
spec:
  minAvailable: 1
  selector: {{matchLabels: {{app: web}}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: agent, namespace: apps}}
spec:
  selector: {{matchLabels: {{app: agent}}}}
  template:
    metadata: {{labels: {{app: agent}}}}
    spec:
      nodeSelector: {{pool: general}}
      terminationGracePeriodSeconds: 1
      containers: [{{name: c, image: agent}}]
---
apiVersion: v1
kind: Pod
metadata:
  name: etcd-worker-1
  namespace: apps
  annotations: {{kubernetes.io/config.mirror: "abc", kubernetes.io/config.source: file}}
spec:
  nodeName: worker-1
  containers: [{{name: c, image: etcd}}]
{extra}"#
    )
}

/// Pods in `apps`: name → (node, terminating).
async fn pods(c: &kube::Client) -> BTreeMap<String, (String, bool)> {
    Api::<Pod>::namespaced(c.clone(), "apps")
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            (p.metadata.name.clone().unwrap_or_default(), (node, p.metadata.deletion_timestamp.is_some()))
        })
        .collect()
}

fn running_on(pods: &BTreeMap<String, (String, bool)>, node: &str) -> Vec<String> {
    pods.iter().filter(|(_, (n, t))| n == node && !t).map(|(p, _)| p.clone()).collect()
}

/// A cluster with worker-1 and worker-2 running the workloads, and spare-1 (same pool)
/// created afterwards for the replacements.
async fn cluster(extra: &str) -> Option<(Envtest, kube::Client)> {
    let env = Envtest::start(Options { workloads: true, ..Options::default() }).await?;
    let c = env.client();
    for n in ["worker-1", "worker-2"] {
        create_node(&c, n, &[("pool", "general")]).await;
    }
    env.kubectl_ok(&["create", "namespace", "apps"]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(&workloads(extra))).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    // Every workload pod Running on a worker before spare-1 exists.
    let want = if extra.is_empty() { 5 } else { 6 };
    wait_for("every workload pod Running on a worker", WAIT, || async {
        let p = pods(&c).await;
        let bound = p.values().filter(|(node, _)| !node.is_empty()).count();
        // Running too: the Eviction API ignores PDBs for Pending pods.
        let running = Api::<Pod>::namespaced(c.clone(), "apps").list(&ListParams::default()).await.expect("pods").items;
        let running = running.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        if running.count() != want {
            return Err(format!("not all Running: {p:?}"));
        }
        let agents = p.keys().filter(|n| n.starts_with("agent-")).count();
        if bound == want && p.len() == want && agents == 2 { Ok(()) } else { Err(format!("{p:?}")) }
    })
    .await;
    create_node(&c, "spare-1", &[("pool", "general")]).await;
    Some((env, c))
}

async fn drained_condition(c: &kube::Client, name: &str) -> Result<Value, String> {
    let m = maintenance_json(c, name).await.ok_or("gone")?;
    Ok(m["status"]["conditions"][0].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_honours_pdbs_evicts_daemonsets_last_and_keeps_static_pods() {
    let Some((env, c)) = cluster("").await else { return };
    let ctl = start_with(c.clone(), options(false)).await;
    support::envtest::objects::create_maintenance(&c, maintenance("m", "Drain", &["worker-1", "worker-2"], None))
        .await
        .unwrap();
    // Record when each pod is first seen terminating, to check the plan order.
    let started = Instant::now();
    let mut first_terminating: BTreeMap<String, Duration> = BTreeMap::new();
    loop {
        for (name, (_, terminating)) in pods(&c).await {
            if terminating {
                first_terminating.entry(name).or_insert_with(|| started.elapsed());
            }
        }
        let cond = drained_condition(&c, "m").await.unwrap_or_default();
        if cond["status"] == "True" {
            break;
        }
        assert!(started.elapsed() < WAIT, "not drained: {cond} {:?}", pods(&c).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let p = pods(&c).await;
    for n in ["worker-1", "worker-2"] {
        assert!(is_cordoned(&node(&c, n).await));
        let left = running_on(&p, n);
        let want: Vec<String> = if n == "worker-1" { vec!["etcd-worker-1".into()] } else { vec![] };
        assert_eq!(left, want, "only the static pod stays on {n}: {p:?}");
    }
    // The replacements of web run on spare-1; the PDB kept one web pod up throughout.
    wait_for("web replaced on spare-1", WAIT, || async {
        let p = pods(&c).await;
        let web = running_on(&p, "spare-1").iter().filter(|n| n.starts_with("web-")).count();
        if web == 2 { Ok(()) } else { Err(format!("{p:?}")) }
    })
    .await;
    let last_web = first_terminating.iter().filter(|(n, _)| n.starts_with("web-")).map(|(_, t)| *t).max();
    let first_agent = first_terminating.iter().filter(|(n, _)| n.starts_with("agent-")).map(|(_, t)| *t).min();
    assert!(last_web.is_some() && first_agent.is_some(), "{first_terminating:?}");
    assert!(last_web < first_agent, "DaemonSet pods go after every Default pod: {first_terminating:?}");
    // The draining taint keeps the DaemonSet from coming back.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let p = pods(&c).await;
    for n in ["worker-1", "worker-2"] {
        assert!(!running_on(&p, n).iter().any(|p| p.starts_with("agent-")), "agent not re-created on {n}: {p:?}");
    }
    let m = maintenance_json(&c, "m").await.unwrap();
    let w1 = m["status"]["nodeStatuses"].as_array().unwrap().iter().find(|n| n["nodeRef"]["name"] == "worker-1");
    assert!(w1.unwrap()["drainMessage"].as_str().unwrap().contains("static"), "{:#}", m["status"]);
    let reasons = env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await;
    assert!(reasons.contains("Drained"), "{reasons}");

    set_stage(&c, "m", "Complete").await;
    wait_for("released", WAIT, || async {
        let n = node(&c, "worker-1").await;
        let tainted = n
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .any(|t| t.key.starts_with("nodemaintenance"));
        if !is_cordoned(&n) && !tainted { Ok(()) } else { Err(format!("{:?}", n.spec)) }
    })
    .await;
    // Released: the DaemonSet comes back.
    wait_for("agent back on worker-1", WAIT, || async {
        let p = pods(&c).await;
        if running_on(&p, "worker-1").iter().any(|p| p.starts_with("agent-")) { Ok(()) } else { Err(format!("{p:?}")) }
    })
    .await;
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_with_no_disruptions_allowed_holds_the_drain_and_is_reported() {
    let blocked = r#"---
apiVersion: apps/v1
kind: Deployment
metadata: {name: db, namespace: apps}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      nodeSelector: {pool: general}
      containers: [{name: c, image: postgres}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db, namespace: apps}
spec:
  maxUnavailable: 0
  selector: {matchLabels: {app: db}}
"#;
    let Some((env, c)) = cluster(blocked).await else { return };
    let ctl = start_with(c.clone(), options(false)).await;
    support::envtest::objects::create_maintenance(&c, maintenance("m", "Drain", &["worker-1", "worker-2"], None))
        .await
        .unwrap();
    let cond = wait_for("Drained=False naming the PDB", WAIT, || async {
        let cond = drained_condition(&c, "m").await?;
        let named = cond["message"].as_str().unwrap_or_default().contains("PDB apps/db");
        if named { Ok(cond) } else { Err(format!("{cond} {:?}", pods(&c).await)) }
    })
    .await;
    assert_eq!(cond["status"], "False");
    let reasons = env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await;
    assert!(reasons.contains("EvictionBlocked"), "{reasons}");
    let p = pods(&c).await;
    assert!(p.iter().any(|(n, (_, t))| n.starts_with("db-") && !t), "the db pod is not evicted: {p:?}");
    // SPEC 4.4: the gauges say what holds now, per maintenance.
    let text = ctl.metrics_text();
    assert!(text.contains("node_maintenance_nodes_under_maintenance 2\n"), "{text}");
    let pending = metric_sum(&text, "node_maintenance_pods_pending_eviction", &["maintenance=\"m\""]);
    assert!(pending.is_some_and(|n| n >= 1.0), "the db pod at least: {text}");
    assert!(text.contains("node_maintenance_evictions_total{result=\"blocked_by_pdb\"}"), "{text}");
    // Deleting it releases the nodes (Complete, finalizer) and its series goes.
    support::envtest::objects::delete_maintenance(&c, "m").await;
    wait_for("gone, nodes released, series removed", WAIT, || async {
        let text = ctl.metrics_text();
        let gone = maintenance_json(&c, "m").await.is_none();
        let released = !is_cordoned(&node(&c, "worker-1").await) && !is_cordoned(&node(&c, "worker-2").await);
        let series = text.contains("maintenance=\"m\"");
        let held = text.contains("node_maintenance_nodes_under_maintenance 0\n");
        if gone && released && !series && held { Ok(()) } else { Err(text) }
    })
    .await;
    ctl.stop().await;
}

/// A pod bound to `node` in `default` at `priority_class` (if any); `owner` makes it a
/// DaemonSet's, `mirror` a static pod's mirror; `extra` is merged into its JSON.
fn plain_pod(name: &str, node: &str, priority_class: Option<&str>, owner: Option<&str>, extra: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "i"}]},
    });
    if let Some(class) = priority_class {
        p["spec"]["priorityClassName"] = json!(class);
    }
    if let Some(kind) = owner {
        p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": "ds",
            "uid": "00000000-0000-0000-0000-0000000000d5", "controller": true}]);
    }
    json_patch::merge(&mut p, &extra);
    serde_json::from_value(p).expect("a Pod")
}

/// The plan's order on a real apiserver (moved from the stand-in, issue 24; what each request
/// was is read from the apiserver's audit log): a user entry at 5000 before the defaults, the
/// critical pod after every other Default pod, DaemonSet pods last, static pods never; the
/// node cordoned before the first eviction and every eviction carrying its pod's UID. Then
/// `--skip-daemonset-pods` leaves DaemonSet pods, and a DaemonSet pod tolerating the draining
/// taint is reported instead of evicted (it would come straight back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_evicts_in_plan_order_after_cordon_and_leaves_what_would_come_back() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    for n in ["worker-1", "worker-3", "worker-4"] {
        create_node(&c, n, &[("pool", "general")]).await;
    }
    let classes = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p100}\nvalue: 100\n---\n\
                   apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p5000}\nvalue: 5000\n---\n\
                   apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p6000}\nvalue: 6000\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(classes)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mirror = json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "hash"}}});
    let tolerates = json!({"spec": {"tolerations": [{"operator": "Exists"}]}});
    let pods = [
        plain_pod("high", "worker-1", Some("p6000"), None, json!({})),
        plain_pod("low", "worker-1", Some("p100"), None, json!({})),
        plain_pod("mid", "worker-1", Some("p5000"), None, json!({})),
        plain_pod("critical", "worker-1", Some("system-cluster-critical"), None, json!({})),
        plain_pod("ds", "worker-1", None, Some("DaemonSet"), json!({})),
        plain_pod("mirror", "worker-1", None, None, mirror),
        plain_pod("elsewhere", "worker-3", None, None, json!({})),
        plain_pod("agent", "worker-3", None, Some("DaemonSet"), json!({})),
        plain_pod("csi", "worker-4", None, Some("DaemonSet"), tolerates),
    ];
    create_pods(&c, &pods).await;
    let pod_api = Api::<Pod>::namespaced(c.clone(), "default");
    let uid = |p: Pod| p.metadata.uid.unwrap_or_default();
    let mut uids = BTreeMap::new();
    for p in &pods {
        let name = p.metadata.name.clone().unwrap_or_default();
        uids.insert(name.clone(), uid(pod_api.get(&name).await.expect("pod")));
    }
    support::envtest::objects::pods_running(&c, WAIT).await;

    let ctl = start_with(c.clone(), options(false)).await;
    let user_entry = [DrainPlanEntry::new(PodType::Default, 5000)];
    let plan = serde_json::to_value(default_plan(&user_entry)).expect("plan");
    support::envtest::objects::create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], Some(plan)))
        .await
        .unwrap();
    let drained = wait_for("m drained", WAIT, || async {
        let cond = drained_condition(&c, "m").await?;
        if cond["status"] == "True" { Ok(cond) } else { Err(cond.to_string()) }
    })
    .await;
    assert_eq!(drained["reason"], "Drained", "{drained}");
    let evicted = env.accepted_evictions();
    let order: Vec<&str> = evicted.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(order.len(), 5, "each evictable pod once: {order:?}");
    let pos = |n: &str| order.iter().position(|x| *x == n).unwrap_or_else(|| panic!("{n} not evicted: {order:?}"));
    assert!(pos("low") < pos("high") && pos("mid") < pos("high"), "entry 5000 before 1e9: {order:?}");
    assert!(pos("high") < pos("critical"), "{order:?}");
    assert!(pos("critical") < pos("ds"), "DaemonSet pods after every Default pod: {order:?}");
    for (name, precondition) in &evicted {
        assert_eq!(precondition, &uids[name], "the eviction of {name} carries its UID");
    }
    let live: Vec<String> = pod_api
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .map(|p| p.metadata.name.unwrap_or_default())
        .collect();
    for kept in ["mirror", "elsewhere", "agent", "csi"] {
        assert!(live.contains(&kept.to_owned()), "{kept} kept: {live:?}");
    }
    // Cordoned (by the controller, not the kubelet) before the first eviction.
    let events = env.audit_events();
    let cordon = events.iter().position(|e| {
        e["objectRef"]["resource"] == "nodes"
            && e["objectRef"]["name"] == "worker-1"
            && e["objectRef"]["subresource"].is_null()
            && !e["userAgent"].as_str().unwrap_or_default().starts_with("fake-kubelet")
    });
    let first_eviction = events.iter().position(|e| e["objectRef"]["subresource"] == "eviction");
    assert!(cordon.is_some() && cordon < first_eviction, "a Node write before the first eviction");
    let n = node(&c, "worker-1").await;
    let condition = support::envtest::objects::condition(&n, "Drained");
    assert_eq!(condition, Some(("True".into(), "DrainCompleted".into())), "the Node's condition");
    let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert!(taints.iter().any(|t| t.key == "nodemaintenance.k8s.io/draining" && t.effect == "NoSchedule"));
    let m = maintenance_json(&c, "m").await.expect("m");
    let stages: Vec<&Value> =
        m["status"]["stageStatuses"].as_array().expect("stages").iter().map(|s| &s["name"]).collect();
    assert_eq!(stages, [&json!("Cordon"), &json!("Drain")]);
    assert!(m["status"]["nodeStatuses"][0]["drainMessage"].as_str().unwrap_or_default().contains("static pods"), "{m}");
    ctl.stop().await;

    // --skip-daemonset-pods: worker-3 drains around its DaemonSet pod.
    let ctl = start_with(c.clone(), options(true)).await;
    support::envtest::objects::create_maintenance(&c, maintenance("skip", "Drain", &["worker-3"], None)).await.unwrap();
    wait_for("skip drained", WAIT, || async {
        let cond = drained_condition(&c, "skip").await?;
        if cond["status"] == "True" { Ok(()) } else { Err(cond.to_string()) }
    })
    .await;
    assert!(pod_api.get_opt("agent").await.expect("get").is_some_and(|p| p.metadata.deletion_timestamp.is_none()));
    ctl.stop().await;

    // A DaemonSet pod tolerating the draining taint is reported, not evicted.
    let ctl = start_with(c.clone(), options(false)).await;
    support::envtest::objects::create_maintenance(&c, maintenance("tol", "Drain", &["worker-4"], None)).await.unwrap();
    wait_for("the tolerating pod reported", WAIT, || async {
        let m = maintenance_json(&c, "tol").await.ok_or("gone")?;
        let message = m["status"]["nodeStatuses"][0]["drainMessage"].as_str().unwrap_or_default().to_owned();
        if message.contains("tolerating the draining taint") { Ok(()) } else { Err(message) }
    })
    .await;
    assert!(!env.accepted_evictions().iter().any(|(n, _)| n == "csi"), "a DaemonSet pod that would come back");
    ctl.stop().await;
}

/// FastForwarded Events about `maintenance` so far, repeats of one Event (its `series`)
/// included.
async fn fast_forward_events(c: &kube::Client, maintenance: &str) -> i32 {
    use k8s_openapi::api::events::v1::Event;
    let events = Api::<Event>::all(c.clone()).list(&ListParams::default()).await.expect("events");
    events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FastForwarded"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(maintenance))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum()
}

/// KEP "maintenance-c": a maintenance joining a node an older one drained further is
/// fast-forwarded there. Its Event goes once, when its status first records
/// `fastForwarded` on the node: not again on later decisions, nor after a restart of the
/// controller (the fact is in the API, not in the controller's memory).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_forward_is_announced_once_from_the_status_even_across_a_restart() {
    let Some(env) = Envtest::start(Options { kubelet: true, ..Options::default() }).await else { return };
    let c = env.client();
    for n in ["worker-1", "worker-2"] {
        create_node(&c, n, &[("pool", "general")]).await;
    }
    let held = json!({"metadata": {"labels": {"app": "held"}}});
    create_pods(
        &c,
        &[plain_pod("a", "worker-1", None, None, json!({})), plain_pod("held", "worker-2", None, None, held)],
    )
    .await;
    let pdb = "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: held, namespace: default}\n\
               spec: {minAvailable: 1, selector: {matchLabels: {app: held}}}\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(pdb)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    support::envtest::objects::pods_running(&c, WAIT).await;

    let ctl = start_with(c.clone(), options(false)).await;
    support::envtest::objects::create_maintenance(&c, maintenance("first", "Drain", &["worker-1"], None))
        .await
        .unwrap();
    wait_for("first drained", WAIT, || async {
        let cond = drained_condition(&c, "first").await?;
        if cond["status"] == "True" { Ok(()) } else { Err(cond.to_string()) }
    })
    .await;
    // Its pod on worker-2 holds `second` at the plan's first entry, below worker-1's floor.
    let both = &["worker-1", "worker-2"];
    support::envtest::objects::create_maintenance(&c, maintenance("second", "Drain", both, None)).await.unwrap();
    wait_for("second fast-forwarded on worker-1, and said so", WAIT, || async {
        let m = maintenance_json(&c, "second").await.ok_or("gone")?;
        let entries = m["status"]["nodeStatuses"].as_array().cloned().unwrap_or_default();
        let recorded = entries.iter().any(|e| e["nodeRef"]["name"] == "worker-1" && e["fastForwarded"] == true);
        let events = fast_forward_events(&c, "second").await;
        if recorded && events >= 1 { Ok(()) } else { Err(format!("{events} Events; {}", m["status"])) }
    })
    .await;
    // Decisions go on (the blocked eviction is retried, the drain is busy): no repeat.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(fast_forward_events(&c, "second").await, 1, "once while the controller runs");
    ctl.stop().await;
    let ctl = start_with(c.clone(), options(false)).await;
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(fast_forward_events(&c, "second").await, 1, "a restart repeats none");
    let m = maintenance_json(&c, "second").await.expect("second");
    assert!(
        m["status"]["nodeStatuses"]
            .as_array()
            .expect("entries")
            .iter()
            .all(|e| e["nodeRef"]["name"] != "worker-2" || e.get("fastForwarded").is_none()),
        "only where it was: {m}"
    );
    ctl.stop().await;
}
