//! `watch` and `status` through the real binary against a real kube-apiserver (its watch
//! semantics: bookmarks, resourceVersions, deletion), while the real controller drains and
//! the fake kubelet finishes evicted pods: plain lines when stdout is not a terminal, bars
//! under a pseudo-terminal (`script`), and `--until` exit codes.

mod support;

use std::process::Stdio;
use std::time::Duration;
use support::controller::{maintenance, options, start_with};
use support::envtest::objects::{create_fixture_nodes, create_maintenance, delete_maintenance, set_stage};
use support::envtest::{Envtest, Options};
use tokio::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_node-maintenance")
}

/// The fixture nodes and three pods of different priorities on worker-1.
async fn cluster() -> Option<(Envtest, kube::Client, String)> {
    let env = Envtest::start(Options { kubelet: true, ..Options::default() }).await?;
    let c = env.client();
    create_fixture_nodes(&c).await;
    env.kubectl_ok(&["create", "serviceaccount", "default"]).await;
    let pods: Vec<serde_json::Value> = [("batch", "p10"), ("web", "p1000"), ("db", "system-cluster-critical")]
        .into_iter()
        .map(|(name, class)| {
            serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": "worker-1", "priorityClassName": class, "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "c", "image": "busybox"}]}})
        })
        .collect();
    let classes = [("p10", 10), ("p1000", 1000)].map(|(n, v)| {
        serde_json::json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v})
    });
    let items: Vec<serde_json::Value> = classes.into_iter().chain(pods).collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string();
    let out = env.kubectl(&["create", "-f", "-"], Some(&list)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kubeconfig = env.admin_kubeconfig.display().to_string();
    Some((env, c, kubeconfig))
}

macro_rules! cluster_or_skip {
    () => {
        match cluster().await {
            Some(parts) => parts,
            None => return,
        }
    };
}

#[tokio::test]
async fn watch_prints_changed_lines_until_drained_and_status_prints_once() {
    let (_env, c, kubeconfig) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Idle", &["worker-1"], None)).await.unwrap();
    let watch = Command::new(bin())
        .args(["watch", "m", "--until", "drained", "--kubeconfig", &kubeconfig])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ctl = start_with(c.clone(), options(false)).await;
    set_stage(&c, "m", "Drain").await;
    let out =
        tokio::time::timeout(Duration::from_secs(60), watch.wait_with_output()).await.expect("watch ends").unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.first().is_some_and(|l| l.starts_with("m: stage Idle")), "{text}");
    assert!(lines.iter().any(|l| l.starts_with("m: stage Drain (Drain started ")), "{text}");
    assert!(
        lines.last().is_some_and(|l| l.contains("Drained=True")) || lines.iter().any(|l| l.contains("Drained=True")),
        "{text}"
    );
    assert!(lines.iter().any(|l| l.starts_with("  worker-1: pending ")), "{text}");
    // Only changes are printed: no line repeats its predecessor.
    assert!(lines.windows(2).all(|w| w[0] != w[1]), "{text}");

    let status = Command::new(bin()).args(["status", "m", "--kubeconfig", &kubeconfig]).output().await.unwrap();
    let text = String::from_utf8(status.stdout).unwrap();
    assert!(text.starts_with("m: stage Drain (Drain started ") && text.contains("Drained=True"), "{text}");
    assert!(text.contains("  worker-1: pending 0; evicting 0; targets "), "{text}");
    ctl.stop().await;
}

#[tokio::test]
async fn watch_until_deleted_and_missing_objects() {
    let (_env, c, kubeconfig) = cluster_or_skip!();
    let status = Command::new(bin()).args(["status", "nope", "--kubeconfig", &kubeconfig]).output().await.unwrap();
    assert_eq!(status.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&status.stderr).contains("reading NodeMaintenance \"nope\""));
    create_maintenance(&c, maintenance("gone", "Idle", &["worker-2"], None)).await.unwrap();
    let watch = Command::new(bin())
        .args(["watch", "gone", "--until", "deleted", "--kubeconfig", &kubeconfig])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    delete_maintenance(&c, "gone").await;
    let out =
        tokio::time::timeout(Duration::from_secs(20), watch.wait_with_output()).await.expect("watch ends").unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().ends_with("gone: deleted\n"));
}

#[tokio::test]
async fn watch_draws_progress_bars_on_a_terminal() {
    let (_env, c, kubeconfig) = cluster_or_skip!();
    create_maintenance(&c, maintenance("m", "Drain", &["worker-1"], None)).await.unwrap();
    let ctl = start_with(c.clone(), options(false)).await;
    // `script` gives the command a pseudo-terminal, as an operator's shell would.
    let cmd = format!("{} watch m --until drained --kubeconfig {kubeconfig}", bin());
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        Command::new("script").args(["-qefc", &cmd, "/dev/null"]).env("TERM", "xterm").output(),
    )
    .await
    .expect("watch ends")
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("pods gone"), "a progress bar per node: {text}");
    assert!(text.contains("worker-1"), "{text}");
    ctl.stop().await;
}

/// A node that waits for a budget's gate shows why, and a paused maintenance says so: what
/// the controller writes in `status.nodeStatuses[].drainMessage` and the `Paused` condition.
#[tokio::test]
async fn status_shows_why_a_node_waits_and_that_a_maintenance_is_paused() {
    let (env, c, kubeconfig) = cluster_or_skip!();
    let budget = "apiVersion: nodemaintenance.k8s.io/v1alpha1\nkind: NodeDisruptionBudget\nmetadata: {name: frozen}\n\
                  spec:\n  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [worker-2]}]}]}\n\
                  \x20 pauseRequests: [{name: ops, reason: change freeze}]\n";
    let out = env.kubectl(&["apply", "-f", "-"], Some(budget)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    create_maintenance(&c, maintenance("m", "Cordon", &["worker-2"], None)).await.unwrap();
    let ctl = start_with(c.clone(), options(false)).await;
    let status_until = |want: &'static str| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            loop {
                let out =
                    Command::new(bin()).args(["status", "m", "--kubeconfig", &kubeconfig]).output().await.unwrap();
                let text = String::from_utf8(out.stdout).unwrap();
                if text.contains(want) {
                    return text;
                }
                assert!(tokio::time::Instant::now() < deadline, "no {want:?} in {text}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
    };
    // The budget's pause: the node line is the reason alone, no drain counts.
    let text =
        status_until("\n  worker-2: NodeDisruptionBudget frozen is paused by ops (change freeze). [Waiting]\n").await;
    assert!(text.contains("; 1 waiting, 0 held, 0 released"), "{text}");
    // The maintenance's own pause comes first, then the budget's (every pause is named), and
    // the summary says it is paused.
    let out = env.kubectl(&["patch", "nm", "m", "--type=merge", "-p", r#"{"spec":{"paused":true}}"#], None).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = status_until(
        "\n  worker-2: Paused (spec.paused of NodeMaintenance m); NodeDisruptionBudget frozen is paused by ops \
         (change freeze). [Waiting]\n",
    )
    .await;
    assert!(
        text.starts_with("m: stage Cordon (Cordon started ") && text.contains("), paused (spec.paused); "),
        "{text}"
    );
    ctl.stop().await;
}
