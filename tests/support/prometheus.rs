//! A real Prometheus on loopback (Debian's `prometheus`, installed by
//! hack/setup-test-deps.sh) for the alert tests (tests/envtest_monitoring.rs,
//! tests/prometheus_alerts.rs). Without the binary the tests skip on a workstation and fail in
//! CI (`CI=true` or `NM_ENVTEST_REQUIRED=1`, as hack/test-all.sh sets), like the
//! real-apiserver tier.

use super::envtest::objects::wait_for;
use super::envtest::process::{Proc, free_port};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Prometheus' scrape and rule-evaluation interval here, in seconds.
pub const INTERVAL_SECONDS: u64 = 1;

/// `name` on `$PATH`; `None` (test skipped) on a workstation without it, a panic in CI.
pub fn required_binary(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    let required = std::env::var("CI").as_deref() == Ok("true") || std::env::var_os("NM_ENVTEST_REQUIRED").is_some();
    match found {
        Some(p) => Some(p),
        None if required => panic!("{name} not found (Debian package prometheus; hack/setup-test-deps.sh installs it)"),
        None => {
            eprintln!("SKIPPED: {name} not found (Debian package prometheus)");
            None
        }
    }
}

/// A Prometheus on loopback evaluating the rule `groups` every [`INTERVAL_SECONDS`] and
/// scraping `targets` (host:port, none for rules alone) as job `nm` as often; its files and
/// data live in `dir`. Returns it and its base URL once ready (within `wait`).
pub async fn start(binary: &Path, dir: &Path, targets: &[&str], groups: &Value, wait: Duration) -> (Proc, String) {
    let rules = dir.join("rules.json");
    std::fs::write(&rules, json!({"groups": groups}).to_string()).expect("rules written");
    let interval = format!("{INTERVAL_SECONDS}s");
    let config = json!({
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [rules],
        "scrape_configs": [{"job_name": "nm", "static_configs": [{"targets": targets}]}],
    });
    let config_file = dir.join("prometheus.json");
    std::fs::write(&config_file, config.to_string()).expect("config written");
    let port = free_port();
    let mut cmd = Command::new(binary);
    cmd.arg(format!("--config.file={}", config_file.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    let proc = Proc::spawn("prometheus", cmd, dir);
    let url = format!("http://127.0.0.1:{port}");
    let ready = format!("{url}/-/ready");
    wait_for("Prometheus ready", wait, || async {
        match reqwest::get(&ready).await {
            Ok(r) if r.status() == 200 => Ok(()),
            Ok(r) => Err(r.status().to_string()),
            Err(e) => Err(format!("{e}; log: {}", proc.tail(5))),
        }
    })
    .await;
    (proc, url)
}
