use super::*;
use crate::api::default_plan;
use k8s_openapi::api::core::v1::{EmptyDirVolumeSource, PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use std::sync::Arc;

fn pod(ns: &str, name: &str, node: &str, priority: i32, pod_type: PodType, app: &str) -> PreviewPod {
    PreviewPod {
        view: PodView {
            namespace: Arc::from(ns),
            name: Arc::from(name),
            uid: Arc::from(format!("uid-{name}").as_str()),
            node_name: Arc::from(node),
            priority,
            pod_type,
            labels: [("app", app)].into_iter().collect(),
            ..Default::default()
        },
        owner: Owner { kind: "Deployment".into(), name: app.into() },
        comes_back: true,
        empty_dir: vec![],
    }
}

fn budget(ns: &str, app: &str, allowed: i32) -> Budget {
    let sel = LabelSelector { match_labels: Some(BTreeMap::from([("app".into(), app.into())])), ..Default::default() };
    Budget {
        namespace: ns.into(),
        name: app.into(),
        selector: crate::selector::PodSelector::compile(&sel),
        disruptions_allowed: allowed,
    }
}

fn maintenance(name: &str, created: i64, nodes: &[&str]) -> MaintenanceInput {
    MaintenanceInput {
        name: name.into(),
        created,
        drain_plan: default_plan(&[]),
        drain_plan_index: 0,
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        wait_for_completion: None,
    }
}

fn input(pods: Vec<PreviewPod>, budgets: Vec<Budget>) -> PreviewInput {
    PreviewInput { reviewed: maintenance("m", i64::MAX, &["n1"]), pods, budgets, ..Default::default() }
}

#[test]
fn evicts_by_priority_step_and_groups_by_owner() {
    let mut bare = pod("default", "debug", "n1", 0, PodType::Default, "debug");
    bare.owner = Owner { kind: "Pod".into(), name: "debug".into() };
    bare.comes_back = false;
    bare.empty_dir = vec!["scratch".into()];
    let pods = vec![
        pod("apps", "web-1", "n1", 1000, PodType::Default, "web"),
        pod("apps", "web-2", "n1", 1000, PodType::Default, "web"),
        pod("apps", "crit", "n1", 2_000_000_000, PodType::Default, "crit"),
        pod("apps", "elsewhere", "n2", 0, PodType::Default, "web"),
        bare,
    ];
    let p = simulate(&input(pods, vec![]));
    assert!(p.outcome.drained, "{p:?}");
    assert_eq!(p.pods, 4);
    let entries: Vec<(usize, usize)> = p.steps.iter().map(|s| (s.entry, s.evicted)).collect();
    assert_eq!(entries, vec![(1, 3), (2, 1)]);
    assert_eq!(p.steps[0].by_owner.len(), 2);
    assert_eq!(p.steps[0].by_owner[0].owner.kind, "Deployment");
    assert_eq!(p.steps[0].by_owner[0].count, 2);
    assert_eq!(p.steps[0].by_owner[0].priorities, vec![1000]);
    assert_eq!(p.not_coming_back.pods, vec!["default/debug"]);
    assert_eq!(p.empty_dir_lost.pods, vec!["default/debug (scratch)"]);
}

#[test]
fn a_budget_used_up_by_the_drain_waits_but_one_already_at_zero_is_stuck() {
    let pods = vec![
        pod("apps", "web-1", "n1", 0, PodType::Default, "web"),
        pod("apps", "web-2", "n1", 0, PodType::Default, "web"),
        pod("apps", "db-0", "n1", 5000, PodType::Default, "db"),
    ];
    let p = simulate(&input(pods.clone(), vec![budget("apps", "web", 1)]));
    assert!(p.outcome.drained, "{p:?}");
    assert_eq!(p.steps[0].evicted, 3);
    assert_eq!(p.steps[0].pdb_waits[0].pdb, "apps/web");
    assert_eq!(p.steps[0].pdb_waits[0].pods, vec!["apps/web-2"]);

    let p = simulate(&input(pods, vec![budget("apps", "web", 1), budget("apps", "db", 0), budget("other", "db", 0)]));
    assert!(!p.outcome.drained);
    assert_eq!(p.outcome.stuck_at, Some(1));
    assert_eq!(p.outcome.reason.as_deref(), Some("PodDisruptionBudget apps/db allows no eviction"));
    assert_eq!(p.steps.len(), 1);
    assert_eq!(p.steps[0].evicted, 2);
    assert_eq!(p.remaining[0].pods, ["apps/db-0"]);
}

#[test]
fn daemonset_pods_go_after_the_taint_and_static_or_tolerating_pods_are_blockers() {
    let mut tolerant = pod("kube-system", "logs-x", "n1", 0, PodType::DaemonSet, "logs");
    tolerant.view.tolerates_draining_taint = true;
    let pods = vec![
        pod("kube-system", "agent-x", "n1", 0, PodType::DaemonSet, "agent"),
        tolerant,
        pod("kube-system", "etcd-n1", "n1", 2_000_001_000, PodType::Static, "etcd"),
    ];
    let p = simulate(&input(pods, vec![]));
    assert!(p.outcome.drained, "{p:?}");
    let ds = p.steps.iter().find(|s| s.plan_entry.pod_type == PodType::DaemonSet).unwrap();
    assert_eq!(ds.evicted, 1);
    assert_eq!(ds.blocked[0].label, "DaemonSet pods tolerating the draining taint");
    assert_eq!(ds.blocked[0].pods, vec!["kube-system/logs-x"]);
    let st = p.steps.iter().find(|s| s.plan_entry.pod_type == PodType::Static);
    assert!(st.is_none(), "static pods do not keep the drain from completing: {p:?}");
    let remaining: Vec<(&str, usize)> = p.remaining.iter().map(|r| (r.cause.as_str(), r.pods.len())).collect();
    assert_eq!(remaining, [("StaticPod", 1), ("ToleratesDrainingTaint", 1)]);
}

#[test]
fn another_drain_maintenance_holds_this_one_back() {
    let pods = vec![
        pod("apps", "db-0", "n2", 100, PodType::Default, "db"),
        pod("apps", "big", "n1", 1_500_000_000, PodType::Default, "big"),
    ];
    let mut i = input(pods, vec![budget("apps", "db", 0)]);
    i.others = vec![maintenance("a", 1, &["n1", "n2"])];
    let p = simulate(&i);
    assert_eq!(p.planned_with, vec!["a"]);
    assert_eq!(p.held_back_by, vec!["a"]);
    assert!(!p.outcome.drained);
    assert_eq!(p.outcome.stuck_at, Some(2));
    assert_eq!(p.outcome.reason.as_deref(), Some("Waiting for a."));
    assert!(render_text(&p, false).contains("Held back by: a"));
}

fn k8s_pod(name: &str, owner: Option<(&str, &str)>, hash: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("apps".into()),
            labels: hash.map(|h| BTreeMap::from([(POD_TEMPLATE_HASH.to_string(), h.to_string())])),
            owner_references: owner.map(|(kind, name)| {
                vec![OwnerReference {
                    kind: kind.into(),
                    name: name.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            volumes: Some(vec![Volume {
                name: "tmp".into(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
fn replicaset_owners_resolve_to_deployments_by_owner_or_by_hash() {
    let pods = vec![
        k8s_pod("web-5d8f-x", Some(("ReplicaSet", "web-5d8f")), Some("5d8f")),
        k8s_pod("odd-x", Some(("ReplicaSet", "odd")), None),
        k8s_pod("db-0", Some(("StatefulSet", "db")), None),
        k8s_pod("bare", None, None),
    ];
    let (by_hash, how) = preview_pods(&pods, None);
    assert_eq!(how, OwnerResolution::PodTemplateHash);
    let owners: Vec<String> = by_hash.iter().map(|p| owner_label(&p.owner)).collect();
    assert_eq!(owners, ["Deployment/web", "ReplicaSet/odd", "StatefulSet/db", "bare pod bare"]);
    assert_eq!(by_hash.iter().map(|p| p.comes_back).collect::<Vec<_>>(), [true, true, true, false]);
    assert_eq!(by_hash[0].empty_dir, vec!["tmp"]);

    let rs = |name: &str, owner: Option<&str>| ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("apps".into()),
            owner_references: owner.map(|o| {
                vec![OwnerReference {
                    kind: "Deployment".into(),
                    name: o.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let (by_rs, how) = preview_pods(&pods, Some(&[rs("web-5d8f", Some("frontend")), rs("odd", Some("weird"))]));
    assert_eq!(how, OwnerResolution::ReplicaSets);
    let owners: Vec<String> = by_rs.iter().map(|p| owner_label(&p.owner)).collect();
    assert_eq!(owners, ["Deployment/frontend", "Deployment/weird", "StatefulSet/db", "bare pod bare"]);
}

#[test]
fn a_node_budget_takes_turns_and_still_drains_every_node() {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let pods: Vec<PreviewPod> =
        ["n1", "n2", "n3"].iter().map(|n| pod("apps", &format!("web-{n}"), n, 0, PodType::Default, "web")).collect();
    let mut i = input(pods, vec![]);
    i.reviewed.nodes = vec!["n1".into(), "n2".into(), "n3".into()];
    for (budget, at_once, head) in
        [(IntOrString::Int(1), 1, "1 node at a time"), (IntOrString::String("50%".into()), 2, "2 nodes at a time")]
    {
        i.max_unavailable = Some(budget);
        let p = simulate(&i);
        assert!(p.outcome.drained, "{p:?}");
        assert_eq!(p.nodes_at_once, Some(at_once));
        assert_eq!(p.steps.iter().map(|s| s.evicted).sum::<usize>(), 3);
        let text = render_text(&p, false);
        assert!(text.contains(&format!("{head} (spec.maxUnavailable)")), "{text}");
    }
}

#[test]
fn a_single_replica_deployment_is_rolled_instead_of_waiting_under_surge() {
    let raw: Vec<Pod> = ["solo", "recreate"]
        .iter()
        .map(|app| {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("{app}-abc12-x"), "namespace": "apps", "uid": format!("u-{app}"),
                    "labels": {"app": app, "pod-template-hash": "abc12"},
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{app}-abc12"),
                        "uid": "rs", "controller": true}]},
                "spec": {"nodeName": "n1", "containers": []}
            }))
            .unwrap()
        })
        .collect();
    let deployments: Vec<k8s_openapi::api::apps::v1::Deployment> =
        [("solo", "RollingUpdate"), ("recreate", "Recreate")]
            .iter()
            .map(|(name, strategy)| {
                serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": "apps"},
                "spec": {"replicas": 1, "selector": {}, "template": {}, "strategy": {"type": strategy}},
                "status": {"replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}}))
                .unwrap()
            })
            .collect();
    let pdbs: Vec<PodDisruptionBudget> = ["solo", "recreate"]
        .iter()
        .map(|app| {
            serde_json::from_value(serde_json::json!({"metadata": {"name": app, "namespace": "apps"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": app}}},
                "status": {"expectedPods": 1, "desiredHealthy": 1, "currentHealthy": 1, "disruptionsAllowed": 0}}))
            .unwrap()
        })
        .collect();
    let preview = |mode| {
        let (pods, _) = preview_pods(&raw, None);
        let mut input = input(pods, budgets(&pdbs));
        plan_rollouts(&mut input, mode, &raw, &deployments, &pdbs);
        simulate(&input)
    };
    let surge = preview(crate::api::Evacuation::Surge);
    assert_eq!(surge.rolled_instead.len(), 1, "{surge:#?}");
    let rolled = &surge.rolled_instead[0];
    assert_eq!((rolled.name.as_str(), rolled.why.as_str()), ("solo", "its Deployment has one replica"));
    assert_eq!(surge.not_rolled, ["apps/recreate-abc12-x (strategy Recreate)"]);
    assert!(!surge.outcome.drained, "recreate still waits on its budget");
    let text = render_text(&surge, false);
    assert!(
        text.contains("Rolled instead of evicted: Deployment apps/solo (its Deployment has one replica): 1 pod"),
        "{text}"
    );
    let waits: Vec<&str> = surge.steps.iter().flat_map(|s| &s.pdb_waits).map(|w| w.pdb.as_str()).collect();
    assert_eq!(waits, ["apps/recreate"], "solo does not wait on its budget");
    let evict = preview(crate::api::Evacuation::Evict);
    assert!(evict.rolled_instead.is_empty() && evict.not_rolled.is_empty());
    let mut waits: Vec<&str> = evict.steps.iter().flat_map(|s| &s.pdb_waits).map(|w| w.pdb.as_str()).collect();
    waits.sort_unstable();
    assert_eq!(waits, ["apps/recreate", "apps/solo"]);
}

#[test]
fn pods_left_to_finish_are_shown_remaining_and_hold_back_no_other_pod() {
    let mut job = pod("batch", "report-x", "n1", 0, PodType::Default, "report");
    job.view.owned_by_job = true;
    let pods = vec![job, pod("apps", "web-x", "n1", 1000, PodType::Default, "web")];
    let mut i = input(pods, vec![]);
    i.reviewed.wait_for_completion = Some(planner::CompletionWait::default());
    let p = simulate(&i);
    assert_eq!(p.steps.iter().map(|s| s.evicted).sum::<usize>(), 1, "only web-x is evicted: {p:?}");
    assert!(!p.outcome.drained);
    assert_eq!(p.outcome.reason.as_deref(), Some(planner::WAITING_FOR_COMPLETION));
    let remaining: Vec<(&str, &[String])> = p.remaining.iter().map(|r| (r.cause.as_str(), &r.pods[..])).collect();
    assert_eq!(remaining, [("WaitingForCompletion", &["batch/report-x".to_string()][..])]);
    assert!(render_text(&p, false).contains("Remaining: left to finish (spec.waitForCompletion): 1"));
}
