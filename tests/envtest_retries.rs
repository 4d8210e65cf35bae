//! A write refused once is retried by the controller itself, on a real kube-apiserver: a
//! ValidatingAdmissionPolicy refuses a node's cordon, a maintenance status, a
//! NodeDisruptionBudget status and a `MaintenancePlanned` condition; then the policy is
//! removed and nothing else changes in the cluster (no kubelet heartbeats, no edits). Each
//! write gets through within 30 s, from the error policy's backoff alone.

mod support;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use node_maintenance::api::NodeDisruptionBudget;
use node_maintenance::controller::context::ControllerOptions;
use serde_json::json;
use std::time::Duration;
use support::controller::{maintenance, start_with};
use support::envtest::objects::{
    condition, create_maintenance, create_node, is_cordoned, maintenance_json, node, wait_for,
};
use support::envtest::requests::metric_sum;
use support::envtest::{Envtest, Options};

/// Refuses every update of Nodes and of the statuses of our two kinds.
const REFUSE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: refuse-controller-writes}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["UPDATE"]
        resources: ["nodes", "nodes/status"]
      - apiGroups: ["nodemaintenance.k8s.io"]
        apiVersions: ["*"]
        operations: ["UPDATE"]
        resources: ["nodemaintenances/status", "nodedisruptionbudgets/status"]
  validations:
    - expression: "false"
      message: "refused by the test's policy"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: refuse-controller-writes}
spec:
  policyName: refuse-controller-writes
  validationActions: [Deny]
"#;

const RETRY_WITHIN: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_refused_by_a_policy_go_through_by_themselves_once_it_is_removed() {
    let Some(env) = Envtest::start(Options::default()).await else { return };
    let c = env.client();
    create_node(&c, "worker-1", &[("pool", "general")]).await;
    create_node(&c, "worker-2", &[("pool", "general")]).await;
    let out = env.kubectl(&["apply", "-f", "-"], Some(REFUSE)).await;
    assert!(out.status.success(), "policy: {}", String::from_utf8_lossy(&out.stderr));
    // The policy is in force once a Node update is refused.
    let nodes: Api<Node> = Api::all(c.clone());
    wait_for("the policy refuses Node updates", RETRY_WITHIN, || async {
        let mut n = nodes.get("worker-2").await.map_err(|e| e.to_string())?;
        n.metadata.labels.get_or_insert_default().insert("probe".into(), "1".into());
        match nodes.replace("worker-2", &PostParams::default(), &n).await {
            Err(kube::Error::Api(e)) if e.message.contains("refused by the test's policy") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let budget: NodeDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeDisruptionBudget",
        "metadata": {"name": "general"},
        "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["general"]}]}]},
                 "maxUnavailable": 1},
    }))
    .expect("a budget");
    Api::<NodeDisruptionBudget>::all(c.clone()).create(&PostParams::default(), &budget).await.expect("budget created");
    create_maintenance(&c, maintenance("cordon", "Cordon", &["worker-1"], None)).await.expect("created");
    create_maintenance(&c, maintenance("planned", "Idle", &["worker-2"], None)).await.expect("created");

    // Defaults: a maintenance in Cordon is looked at again after 5 minutes only, and the
    // cluster-wide statuses never but on a change or a retry.
    let running = start_with(c.clone(), ControllerOptions::default()).await;
    let errors = || metric_sum(&running.metrics_text(), "node_maintenance_reconcile_errors_total", &[]).unwrap_or(0.0);
    wait_for("refused writes counted", RETRY_WITHIN, || async {
        let n = errors();
        if n >= 4.0 { Ok(()) } else { Err(format!("{n} errors")) }
    })
    .await;
    assert!(!is_cordoned(&node(&c, "worker-1").await), "the cordon was refused");
    assert!(condition(&node(&c, "worker-2").await, "MaintenancePlanned").is_none(), "the condition was refused");
    let m = maintenance_json(&c, "cordon").await.expect("exists");
    assert!(m["status"].is_null(), "the maintenance status was refused: {}", m["status"]);

    env.kubectl_ok(&["delete", "validatingadmissionpolicybinding", "refuse-controller-writes"]).await;
    env.kubectl_ok(&["delete", "validatingadmissionpolicy", "refuse-controller-writes"]).await;
    wait_for("worker-1 cordoned", RETRY_WITHIN, || async {
        if is_cordoned(&node(&c, "worker-1").await) { Ok(()) } else { Err("not yet".into()) }
    })
    .await;
    wait_for("the maintenance status records Cordon", RETRY_WITHIN, || async {
        let m = maintenance_json(&c, "cordon").await.ok_or("gone")?;
        let stages = &m["status"]["stageStatuses"];
        if stages[0]["name"] == "Cordon" { Ok(()) } else { Err(format!("{stages}")) }
    })
    .await;
    wait_for("worker-2 MaintenancePlanned", RETRY_WITHIN, || async {
        condition(&node(&c, "worker-2").await, "MaintenancePlanned").filter(|(s, _)| s == "True").ok_or("none".into())
    })
    .await;
    wait_for("the budget's status", RETRY_WITHIN, || async {
        let b = Api::<NodeDisruptionBudget>::all(c.clone()).get("general").await.map_err(|e| e.to_string())?;
        let s = b.status.ok_or("no status")?;
        if s.expected_nodes == 2 { Ok(()) } else { Err(format!("{s:?}")) }
    })
    .await;
    running.stop().await;
}
