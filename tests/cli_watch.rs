//! `watch` and `status` through the real binary against the apiserver stand-in, while the
//! real controller drains: plain lines when stdout is not a terminal, bars under a
//! pseudo-terminal (`script`), and `--until` exit codes.

mod support;

use std::process::Stdio;
use std::time::Duration;
use support::apiserver::ApiServer;
use support::controller::{maintenance, options, pod, start};
use tokio::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_node-maintenance")
}

async fn cluster() -> (ApiServer, tempfile::TempDir, String) {
    let api = ApiServer::start().await;
    api.load_nodes_yaml(support::apiserver::objects::fixture_nodes_path());
    for (name, prio) in [("batch", 10), ("web", 1000), ("db", 2_000_000_000)] {
        api.put_pod(pod("default", name, "worker-1", prio, None));
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, support::cluster::kubeconfig(&api.url())).unwrap();
    let kubeconfig = kubeconfig.display().to_string();
    (api, dir, kubeconfig)
}

#[tokio::test]
async fn watch_prints_changed_lines_until_drained_and_status_prints_once() {
    let (api, _dir, kubeconfig) = cluster().await;
    api.put_maintenance(maintenance("m", "Idle", &["worker-1"], None));
    let watch = Command::new(bin())
        .args(["watch", "m", "--until", "drained", "--kubeconfig", &kubeconfig])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ctl = start(&api, options(false)).await;
    support::controller::set_stage(&api, "m", "Drain");
    let out =
        tokio::time::timeout(Duration::from_secs(30), watch.wait_with_output()).await.expect("watch ends").unwrap();
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
    let (api, _dir, kubeconfig) = cluster().await;
    let status = Command::new(bin()).args(["status", "nope", "--kubeconfig", &kubeconfig]).output().await.unwrap();
    assert_eq!(status.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&status.stderr).contains("reading NodeMaintenance \"nope\""));
    api.put_maintenance(maintenance("gone", "Idle", &["worker-2"], None));
    let watch = Command::new(bin())
        .args(["watch", "gone", "--until", "deleted", "--kubeconfig", &kubeconfig])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    api.delete_maintenance("gone");
    let out =
        tokio::time::timeout(Duration::from_secs(20), watch.wait_with_output()).await.expect("watch ends").unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8(out.stdout).unwrap().ends_with("gone: deleted\n"));
}

#[tokio::test]
async fn watch_draws_progress_bars_on_a_terminal() {
    let (api, _dir, kubeconfig) = cluster().await;
    api.put_maintenance(maintenance("m", "Drain", &["worker-1"], None));
    let ctl = start(&api, options(false)).await;
    // `script` gives the command a pseudo-terminal, as an operator's shell would.
    let cmd = format!("{} watch m --until drained --kubeconfig {kubeconfig}", bin());
    let out = tokio::time::timeout(
        Duration::from_secs(30),
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
