//! Crash safety (SPEC 4.2): the controller killed at random points of a drain and of the
//! way out, many times, always converges to the same end state: no node left cordoned by a
//! finished maintenance, no node uncordoned that someone else cordoned, every evictable pod
//! gone, static pods kept, no taint or annotation left behind.

mod support;

use serde_json::Value;
use std::time::Duration;
use support::apiserver::ApiServer;
use support::controller::{Rng, holders, maintenance, options, pod, set_stage, start, status_at, unschedulable};

/// Runs the controller in bursts of random length, killing it in between, until `done`
/// holds; then once more uninterrupted to prove it stays so.
async fn run_with_kills(api: &ApiServer, rng: &mut Rng, what: &str, done: impl Fn(&ApiServer) -> bool) {
    for _ in 0..300 {
        if done(api) {
            return;
        }
        let ctl = start(api, options(false)).await;
        tokio::time::sleep(Duration::from_millis(20 + rng.below(200))).await;
        ctl.kill();
    }
    let ctl = start(api, options(false)).await;
    api.wait_for(what, Duration::from_secs(20), |a| done(a).then_some(())).await;
    ctl.stop().await;
}

fn condition_true(api: &ApiServer, name: &str, type_: &str) -> bool {
    status_at(api, name, "/conditions")
        .and_then(|c| c.as_array().cloned())
        .is_some_and(|c| c.iter().any(|c| c["type"] == type_ && c["status"] == "True"))
}

fn has_our_traces(api: &ApiServer, node: &str) -> bool {
    let n = api.node(node).unwrap();
    n.metadata.annotations.unwrap_or_default().keys().any(|k| k.starts_with("nodemaintenance.k8s.io/"))
        || n.spec
            .unwrap_or_default()
            .taints
            .unwrap_or_default()
            .iter()
            .any(|t| t.key.starts_with("nodemaintenance.k8s.io/"))
}

#[tokio::test]
async fn a_controller_killed_at_random_points_converges_to_the_same_end_state() {
    for seed in [0x9E37_79B9_7F4A_7C15u64, 7, 1234, 0xDEAD_BEEF, 42] {
        let api = ApiServer::start().await;
        api.load_nodes_yaml(support::apiserver::objects::fixture_nodes_path());
        let mut w3 = api.node("worker-3").unwrap();
        w3.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
        api.put_node(w3);
        for (name, node, prio, kind) in [
            ("batch", "worker-1", 10, None),
            ("web", "worker-1", 1000, None),
            ("db", "worker-1", 1_000_000_000, None),
            ("agent", "worker-1", 2_000_001_000, Some("DaemonSet")),
            ("etcd-mirror", "worker-1", 2_000_001_000, Some("Static")),
            ("cache", "worker-2", 500, None),
            ("queue", "worker-3", 0, None),
        ] {
            api.put_pod(pod("default", name, node, prio, kind));
        }
        api.put_maintenance(maintenance("a", "Drain", &["worker-1", "worker-2", "worker-3"], None));
        api.put_maintenance(maintenance("b", "Cordon", &["worker-2", "worker-4"], None));
        let mut rng = Rng(seed);

        run_with_kills(&api, &mut rng, "a drained, b cordoned", |a| {
            condition_true(a, "a", "Drained") && unschedulable(a, "worker-4")
        })
        .await;
        let left: Vec<String> = api.pods().into_iter().filter_map(|p| p.metadata.name).collect();
        assert_eq!(left, ["etcd-mirror"], "seed {seed:#x}: only the static pod stays");

        set_stage(&api, "a", "Complete");
        api.delete_maintenance("b");
        run_with_kills(&api, &mut rng, "everything released", |a| {
            a.maintenance("b").is_none()
                && status_at(a, "a", "/stageStatuses")
                    .is_some_and(|s| s.as_array().is_some_and(|s| s.iter().any(|x| x["name"] == "Complete")))
                && ["worker-1", "worker-2", "worker-3", "worker-4"].iter().all(|n| holders(a, n).is_none())
        })
        .await;
        for n in ["worker-1", "worker-2", "worker-4"] {
            assert!(!unschedulable(&api, n), "seed {seed:#x}: {n} left cordoned after its maintenances ended");
        }
        assert!(
            unschedulable(&api, "worker-3"),
            "seed {seed:#x}: worker-3 was cordoned by someone else and must stay so"
        );
        for n in ["worker-1", "worker-2", "worker-3", "worker-4"] {
            assert!(!has_our_traces(&api, n), "seed {seed:#x}: {n} keeps a taint or annotation");
        }
        let stages: Vec<Value> = status_at(&api, "a", "/stageStatuses")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].clone())
            .collect();
        assert_eq!(stages, ["Cordon", "Drain", "Complete"], "seed {seed:#x}");
    }
}
