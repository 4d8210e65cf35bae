//! Issue 21 on a real kube-apiserver with kube-controller-manager (Deployments, ReplicaSets,
//! StatefulSets, PodDisruptionBudget status), kube-scheduler and the fake kubelet:
//! evacuation by rollout. A single-replica Deployment guarded by a PodDisruptionBudget leaves
//! a maintained node through its own rollout with never less than one available replica;
//! what cannot surge is reported and not rolled; a rollout that cannot schedule fails after
//! its deadline and is not started again; a restarted controller follows the rollout it
//! started instead of starting another.

mod support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{create_maintenance, create_node, maintenance_json, wait_for};
use support::envtest::requests::metric_sum;
use support::envtest::{Envtest, Options};

const WAIT: Duration = Duration::from_secs(120);
const FOR: &str = "nodemaintenance.k8s.io/evacuated-for";
const AT: &str = "nodemaintenance.k8s.io/evacuated-at";

/// A Deployment `name` in `apps` with `replicas` pods labelled `app: <name>`, pinned to
/// `pool: general`; `spec` is merged into its spec (strategy, progressDeadlineSeconds, ...).
fn deployment(name: &str, replicas: i32, spec: Value) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "apps"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {"pool": "general"}, "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "nginx"}]}
            }
        }
    });
    json_patch::merge(&mut d["spec"], &spec);
    d
}

/// A PodDisruptionBudget `name` over `app: <name>` with `rule` (`{"minAvailable": 1}` ...).
fn pdb(name: &str, rule: Value) -> Value {
    let mut p = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "apps"}, "spec": {"selector": {"matchLabels": {"app": name}}}});
    json_patch::merge(&mut p["spec"], &rule);
    p
}

/// Pods in `apps`: name → (node, terminating).
async fn pods(c: &kube::Client) -> BTreeMap<String, (String, bool)> {
    let list = Api::<Pod>::namespaced(c.clone(), "apps").list(&ListParams::default()).await.expect("pods");
    list.items
        .into_iter()
        .map(|p| {
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            (p.metadata.name.clone().unwrap_or_default(), (node, p.metadata.deletion_timestamp.is_some()))
        })
        .collect()
}

/// Pods of `app` that are Ready and not terminating.
async fn ready(c: &kube::Client, app: &str) -> usize {
    let lp = ListParams::default().labels(&format!("app={app}"));
    let list = Api::<Pod>::namespaced(c.clone(), "apps").list(&lp).await.expect("pods");
    list.items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.into_iter().flatten().any(|c| c.type_ == "Ready" && c.status == "True")
        })
        .count()
}

async fn get_deployment(c: &kube::Client, name: &str) -> Deployment {
    Api::<Deployment>::namespaced(c.clone(), "apps").get(name).await.expect("deployment")
}

/// The pod-template annotation `key` of Deployment `name`.
async fn template_annotation(c: &kube::Client, name: &str, key: &str) -> Option<String> {
    let d = get_deployment(c, name).await;
    d.spec.template.metadata.and_then(|m| m.annotations).and_then(|a| a.get(key).cloned())
}

/// A cluster whose node w1 (pool general) runs `objects` (every pod Running there, `pods` of
/// them), then `others` more nodes of the pool, cordoned when `cordoned`.
async fn cluster(
    objects: &[Value],
    pods_on_w1: usize,
    others: &[&str],
    cordoned: bool,
) -> Option<(Envtest, kube::Client)> {
    let env = Envtest::start(Options { workloads: true, ..Options::default() }).await?;
    let c = env.client();
    create_node(&c, "w1", &[("pool", "general")]).await;
    env.kubectl_ok(&["create", "namespace", "apps"]).await;
    let yaml: Vec<String> = objects.iter().map(|o| serde_json::to_string(o).expect("json")).collect();
    let out = env.kubectl(&["apply", "-f", "-"], Some(&yaml.join("\n---\n"))).await;
    assert!(out.status.success(), "workloads: {}", String::from_utf8_lossy(&out.stderr));
    wait_for("every pod Running on w1", WAIT, || async {
        let list = Api::<Pod>::namespaced(c.clone(), "apps").list(&ListParams::default()).await.expect("pods").items;
        let running = list.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        if running.count() == pods_on_w1 { Ok(()) } else { Err(format!("{:?}", pods(&c).await)) }
    })
    .await;
    // PodDisruptionBudget status is what the Eviction API (and evacuation) read.
    wait_for("budgets observed", WAIT, || async {
        let out = env.kubectl_ok(&["get", "pdb", "-n", "apps", "-o", "jsonpath={.items[*].status.expectedPods}"]).await;
        let n = objects.iter().filter(|o| o["kind"] == "PodDisruptionBudget").count();
        if out.split_whitespace().filter(|v| *v != "0").count() == n { Ok(()) } else { Err(out) }
    })
    .await;
    for n in others {
        create_node(&c, n, &[("pool", "general")]).await;
        if cordoned {
            cordon(&c, n, true).await;
        }
    }
    Some((env, c))
}

async fn cordon(c: &kube::Client, node: &str, on: bool) {
    Api::<Node>::all(c.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": on}})))
        .await
        .expect("cordon");
}

/// A Drain maintenance of w1 with `spec.evacuation: Surge`.
fn surge_maintenance() -> Value {
    let mut m = maintenance("m", "Drain", &["w1"], None);
    m["spec"]["evacuation"] = json!("Surge");
    m
}

async fn status(c: &kube::Client) -> Value {
    maintenance_json(c, "m").await.map(|m| m["status"].clone()).unwrap_or_default()
}

/// `<name>/<uid>` of maintenance `m`.
async fn key(c: &kube::Client) -> String {
    let m = maintenance_json(c, "m").await.expect("m");
    format!("m/{}", m["metadata"]["uid"].as_str().expect("uid"))
}

async fn event_reasons(env: &Envtest) -> String {
    env.kubectl_ok(&["get", "events", "-A", "-o", "jsonpath={.items[*].reason}"]).await
}

fn counter(text: &str, name: &str) -> f64 {
    metric_sum(text, name, &[]).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_replica_deployment_leaves_by_rollout_without_downtime() {
    let objects = [
        deployment("solo", 1, json!({})),
        pdb("solo", json!({"minAvailable": 1})),
        // Three replicas whose budget allows an eviction at a time: evicted as before.
        deployment("trio", 3, json!({})),
        pdb("trio", json!({"maxUnavailable": 1})),
    ];
    let Some((env, c)) = cluster(&objects, 4, &["w2"], false).await else { return };
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, surge_maintenance()).await.expect("maintenance");
    // Sample solo every 300 ms until the drain is done: never fewer than one available.
    let started = Instant::now();
    let mut samples = 0;
    loop {
        let (pods_ready, d) = (ready(&c, "solo").await, get_deployment(&c, "solo").await);
        let available = d.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
        assert!(pods_ready >= 1 && available >= 1, "solo went down after {samples} samples: {:?}", pods(&c).await);
        samples += 1;
        if status(&c).await["conditions"][0]["status"] == "True" {
            break;
        }
        assert!(started.elapsed() < WAIT, "not drained: {:#} {:?}", status(&c).await, pods(&c).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    eprintln!("drained in {:?}, {samples} samples of solo, none below 1 available", started.elapsed());
    let p = pods(&c).await;
    let on_w1: Vec<_> = p.iter().filter(|(_, (n, t))| n == "w1" && !t).collect();
    assert!(on_w1.is_empty(), "w1 is empty: {p:?}");
    assert_eq!(p.iter().filter(|(n, (node, _))| n.starts_with("solo-") && node == "w2").count(), 1, "{p:?}");
    // One rollout, of solo, named after the maintenance; trio was evicted, not rolled.
    assert_eq!(template_annotation(&c, "solo", FOR).await, Some(key(&c).await));
    assert!(template_annotation(&c, "solo", AT).await.is_some());
    assert_eq!(get_deployment(&c, "solo").await.metadata.generation, Some(2), "exactly one rollout");
    assert_eq!(template_annotation(&c, "trio", FOR).await, None, "a budget that allows evictions: no rollout");
    assert_eq!(get_deployment(&c, "trio").await.metadata.generation, Some(1));
    let st = wait_for("status names solo EvacuatedByRollout", WAIT, || async {
        let st = status(&c).await;
        let e = &st["evacuations"];
        if e.as_array().map(Vec::len) == Some(1) && e[0]["name"] == "solo" && e[0]["reason"] == "EvacuatedByRollout" {
            Ok(st)
        } else {
            Err(format!("{st:#}"))
        }
    })
    .await;
    assert_eq!(st["evacuations"][0]["namespace"], "apps");
    assert!(st["evacuations"][0]["startTime"].is_string(), "{st:#}");
    let reasons = wait_for("EvacuatedByRollout Event", WAIT, || async {
        let r = event_reasons(&env).await;
        if r.contains("EvacuatedByRollout") { Ok(r) } else { Err(r) }
    })
    .await;
    assert!(reasons.contains("EvacuatingByRollout"), "{reasons}");
    let text = ctl.metrics_text();
    assert_eq!(counter(&text, "node_maintenance_rollouts_started_total"), 1.0, "{text}");
    assert_eq!(counter(&text, "node_maintenance_rollouts_finished_total"), 1.0, "{text}");
    assert_eq!(counter(&text, "node_maintenance_rollouts_failed_total"), 0.0, "{text}");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_surge_is_reported_and_not_rolled() {
    let opted_out = json!({"template": {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}});
    let statefulset = json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "apps"},
        "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"nodeSelector": {"pool": "general"}, "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "c", "image": "postgres"}]}}}
    });
    let objects = [
        deployment("nosurge", 1, json!({"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}})),
        pdb("nosurge", json!({"minAvailable": 1})),
        deployment("recreate", 1, json!({"strategy": {"type": "Recreate"}})),
        pdb("recreate", json!({"minAvailable": 1})),
        deployment("keep", 1, opted_out),
        statefulset,
        pdb("db", json!({"minAvailable": 1})),
    ];
    let Some((env, c)) = cluster(&objects, 4, &["w2"], false).await else { return };
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, surge_maintenance()).await.expect("maintenance");
    let message = wait_for("every one reported", WAIT, || async {
        let st = status(&c).await;
        let m = st["conditions"][0]["message"].as_str().unwrap_or_default().to_owned();
        let node = st["nodeStatuses"][0]["drainMessage"].as_str().unwrap_or_default().to_owned();
        let all =
            ["(maxSurge is 0)", "(strategy Recreate)", "db-0 (owned by StatefulSet db, not a Deployment)", "opted out"]
                .iter()
                .all(|w| node.contains(w));
        if all && m.contains("not evacuated by rollout") { Ok(node) } else { Err(format!("{st:#}")) }
    })
    .await;
    eprintln!("w1: {message}");
    // Nothing forced: give the controller time to do something wrong.
    tokio::time::sleep(Duration::from_secs(5)).await;
    for name in ["nosurge", "recreate", "keep"] {
        assert_eq!(template_annotation(&c, name, FOR).await, None, "{name} not rolled");
        assert_eq!(get_deployment(&c, name).await.metadata.generation, Some(1), "{name} unchanged");
    }
    let p = pods(&c).await;
    let running: Vec<&str> = p.iter().filter(|(_, (n, t))| n == "w1" && !t).map(|(p, _)| p.as_str()).collect();
    assert_eq!(running.len(), 4, "every pod still on w1: {p:?}");
    let st = status(&c).await;
    assert_eq!(st["conditions"][0]["status"], "False");
    assert!(st.get("evacuations").is_none(), "{st:#}");
    let reasons = event_reasons(&env).await;
    assert!(reasons.contains("NotEvacuated"), "{reasons}");
    assert!(!reasons.contains("EvacuatingByRollout"), "{reasons}");
    assert_eq!(counter(&ctl.metrics_text(), "node_maintenance_rollouts_started_total"), 0.0);
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_cannot_schedule_fails_after_its_deadline_and_is_not_repeated() {
    let objects =
        [deployment("stuck", 1, json!({"progressDeadlineSeconds": 5})), pdb("stuck", json!({"minAvailable": 1}))];
    // The only other node is cordoned: the surge pod has nowhere to go.
    let Some((env, c)) = cluster(&objects, 1, &["w2"], true).await else { return };
    let ctl = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, surge_maintenance()).await.expect("maintenance");
    let started = Instant::now();
    let st = wait_for("RolloutFailed in status", WAIT, || async {
        let st = status(&c).await;
        if st["evacuations"][0]["reason"] == "RolloutFailed" { Ok(st) } else { Err(format!("{st:#}")) }
    })
    .await;
    eprintln!("rollout reported failed after {:?}", started.elapsed());
    assert!(
        st["evacuations"][0]["message"].as_str().unwrap_or_default().contains("ProgressDeadlineExceeded"),
        "{st:#}"
    );
    let blocker = st["conditions"][0]["message"].as_str().unwrap_or_default();
    assert!(blocker.contains("rollout of Deployment apps/stuck failed"), "a blocker with its cause: {st:#}");
    assert!(event_reasons(&env).await.contains("RolloutFailed"));
    let generation = get_deployment(&c, "stuck").await.metadata.generation;
    assert_eq!(generation, Some(2), "one rollout");
    let at = template_annotation(&c, "stuck", AT).await;
    // Long past the deadline again: no second rollout, nothing forced.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(get_deployment(&c, "stuck").await.metadata.generation, generation, "no second rollout");
    assert_eq!(template_annotation(&c, "stuck", AT).await, at);
    let p = pods(&c).await;
    assert!(p.iter().any(|(n, (node, t))| n.starts_with("stuck-") && node == "w1" && !t), "old pod kept: {p:?}");
    assert_eq!(status(&c).await["conditions"][0]["status"], "False");
    let text = ctl.metrics_text();
    assert_eq!(counter(&text, "node_maintenance_rollouts_started_total"), 1.0, "{text}");
    assert_eq!(counter(&text, "node_maintenance_rollouts_failed_total"), 1.0, "{text}");
    ctl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_controller_follows_its_rollout_and_starts_no_other() {
    // A rollout that failed is the case where only the record on the Deployment keeps a new
    // controller from starting another (one in progress is waited for anyway).
    let objects =
        [deployment("solo", 1, json!({"progressDeadlineSeconds": 5})), pdb("solo", json!({"minAvailable": 1}))];
    // w2 cordoned: the rollout cannot finish before the restart.
    let Some((_env, c)) = cluster(&objects, 1, &["w2"], true).await else { return };
    let first = start_with(c.clone(), options(false)).await;
    create_maintenance(&c, surge_maintenance()).await.expect("maintenance");
    let at = wait_for("rollout started", WAIT, || async {
        template_annotation(&c, "solo", AT).await.ok_or_else(|| "no rollout yet".to_owned())
    })
    .await;
    assert_eq!(counter(&first.metrics_text(), "node_maintenance_rollouts_started_total"), 1.0);
    wait_for("the rollout failed", WAIT, || async {
        let st = status(&c).await;
        if st["evacuations"][0]["reason"] == "RolloutFailed" { Ok(()) } else { Err(format!("{st:#}")) }
    })
    .await;
    first.kill();
    let second = start_with(c.clone(), options(false)).await;
    wait_for("the new controller reports the failed rollout", WAIT, || async {
        let st = status(&c).await;
        let node = st["nodeStatuses"][0]["drainMessage"].as_str().unwrap_or_default().to_owned();
        if node.contains("rollout of Deployment apps/solo failed") { Ok(()) } else { Err(format!("{st:#}")) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(template_annotation(&c, "solo", AT).await, Some(at.clone()), "no second rollout");
    assert_eq!(get_deployment(&c, "solo").await.metadata.generation, Some(2));
    // Room appears: the rollout the first controller started finishes; the drain completes.
    cordon(&c, "w2", false).await;
    wait_for("drained", WAIT, || async {
        let st = status(&c).await;
        if st["conditions"][0]["status"] == "True" { Ok(()) } else { Err(format!("{st:#} {:?}", pods(&c).await)) }
    })
    .await;
    assert_eq!(template_annotation(&c, "solo", AT).await, Some(at), "still the one rollout");
    assert_eq!(get_deployment(&c, "solo").await.metadata.generation, Some(2));
    let text = second.metrics_text();
    assert_eq!(counter(&text, "node_maintenance_rollouts_started_total"), 0.0, "{text}");
    assert_eq!(counter(&text, "node_maintenance_rollouts_failed_total"), 0.0, "not counted twice: {text}");
    wait_for("finished counted", WAIT, || async {
        let text = second.metrics_text();
        if counter(&text, "node_maintenance_rollouts_finished_total") == 1.0 { Ok(()) } else { Err(text) }
    })
    .await;
    second.stop().await;
}
