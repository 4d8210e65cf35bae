//! The maintenance decision without a network.
use super::*;
use crate::api::{GateReason, NodeRef};
use crate::planner::holds::Wait;
use crate::planner::wait::Gates;

fn node(name: &str, phase: NodePhase) -> NodeMaintenanceNodeStatus {
    NodeMaintenanceNodeStatus { node_ref: NodeRef { name: name.into() }, phase: Some(phase), ..Default::default() }
}

#[test]
fn a_drain_waits_for_gates_only_when_every_node_left_does() {
    let window = Wait::Gated(Gates::closed("w", GateReason::OutsideMaintenanceWindow, "Window shut"));
    let waiting = BTreeMap::from([("a".to_owned(), window), ("b".to_owned(), Wait::Turn { held: 1, limit: 1 })]);
    let gated = BTreeMap::from([("c".to_owned(), Gates::default().with_paused("m"))]);
    let done = node("d", NodePhase::Released);
    let statuses = [node("a", NodePhase::Waiting), node("c", NodePhase::Draining), done.clone()];
    assert_eq!(
        gate_waits_of(&statuses, &waiting, &gated).map(|g| g.to_string()).as_deref(),
        Some("Paused (spec.paused of NodeMaintenance m); Window shut.")
    );
    let turn = [node("a", NodePhase::Waiting), node("b", NodePhase::Waiting)];
    assert_eq!(gate_waits_of(&turn, &waiting, &gated), None, "a wait for a place may be a stall");
    let draining = [node("a", NodePhase::Waiting), node("e", NodePhase::Draining)];
    assert_eq!(gate_waits_of(&draining, &waiting, &gated), None, "a draining node may be stalled");
    assert_eq!(gate_waits_of(&[done], &waiting, &gated), None, "nothing waits");
}

mod decisions {
    use super::super::*;
    use crate::api::NodeDisruptionBudget;
    use crate::api::{DrainPlanEntry, MAINTENANCE_STATUS_ANNOTATION, PodType};
    use crate::gates::{AlertsRead, AlertsView};
    use crate::planner::DrainDecision;
    use crate::planner::decide::fixtures::{budget, changed, maintenance_with, node, t, tainted, with_conditions};
    use crate::planner::holds::from_cluster::AllotmentInput;
    use crate::planner::{BlockedCause, BlockedPod, FastForward, FastForwardCause, MaintenancePlan, NodePlan, PodRef};
    use serde_json::json;

    const NOW: &str = "2026-11-26T12:00:00Z";

    /// `nm` with the finalizer, as the cache holds it.
    fn live(nm: NodeMaintenance) -> Arc<NodeMaintenance> {
        let mut nm = nm;
        nm.metadata.finalizers = Some(vec![FINALIZER.into()]);
        Arc::new(nm)
    }

    /// The decision for `nm` over `nodes`, the maintenances `all` (with `nm`) and `budgets`.
    fn decide_for(
        nm: &NodeMaintenance,
        nodes: &[Arc<Node>],
        all: &[Arc<NodeMaintenance>],
        budgets: &[Arc<NodeDisruptionBudget>],
        drain: Option<DrainView>,
    ) -> MaintenanceDecision {
        let now = t(NOW);
        let alerts = AlertsRead::from(AlertsView::Firing(Vec::new()));
        let indexed = Nodes::new(nodes);
        let allotment = AllotmentInput::new(&indexed, all, budgets, &alerts, now.0).allot();
        let o = Observed {
            nodes: &indexed,
            maintenances: all,
            allotment: &allotment,
            busy_requeue: Duration::from_secs(2),
            idle_requeue: Duration::from_secs(300),
            now: &now,
        };
        let scope = scope(nm, &o);
        decide(nm, &o, scope, drain)
    }

    /// The cluster after `d` was written: nodes with its holds, releases and node writes,
    /// and `nm` with its status.
    fn written(
        d: &MaintenanceDecision,
        nodes: &[Arc<Node>],
        nm: &NodeMaintenance,
    ) -> (Vec<Arc<Node>>, NodeMaintenance) {
        let nodes = nodes
            .iter()
            .map(|n| {
                let name = n.name_any();
                let mut n = (**n).clone();
                for r in d.releases.iter().chain(&d.releases_after_status).filter(|r| r.node.name_any() == name) {
                    n = with_conditions(&n, &r.conditions.as_ref().map(|c| c.build(&r.node)).unwrap_or_default());
                    n = changed(&n, &r.change);
                }
                for h in d.holds.iter().filter(|h| h.node.name_any() == name) {
                    n = changed(&n, &h.change);
                }
                for w in d.node_writes.iter().filter(|w| w.node.name_any() == name) {
                    n = with_conditions(&n, &w.conditions.as_ref().map(|c| c.build(&w.node)).unwrap_or_default());
                    if w.taint {
                        n = tainted(&n);
                    }
                    if let Some(p) = &w.published {
                        let value = serde_json::to_string(p).unwrap();
                        n.metadata
                            .annotations
                            .get_or_insert_default()
                            .insert(MAINTENANCE_STATUS_ANNOTATION.into(), value);
                    }
                }
                Arc::new(n)
            })
            .collect();
        let mut nm = nm.clone();
        if d.status.is_some() {
            nm.status.clone_from(&d.status);
        }
        (nodes, nm)
    }

    /// Nothing to write: what a steady state decides.
    fn quiet(d: &MaintenanceDecision, nm: &NodeMaintenance) -> bool {
        d.finalizer.is_none()
            && d.releases.is_empty()
            && d.holds.is_empty()
            && d.node_writes.is_empty()
            && d.status.as_ref() == nm.status.as_ref()
            && d.releases_after_status.is_empty()
            && d.events.is_empty()
            && d.evictions.iter().next().is_none()
    }

    #[test]
    fn the_finalizer_goes_on_alone_first() {
        let nm = maintenance_with("m", "Cordon", &["a"], json!({}));
        let nodes = [node("a", None, vec![])];
        let d = decide_for(&nm, &nodes, &[Arc::new(nm.clone())], &[], None);
        assert_eq!(d.finalizer, Some(true));
        assert!(d.holds.is_empty() && d.status.is_none(), "the next writes wait for the copy with the finalizer");
        let idle = maintenance_with("i", "Idle", &["a"], json!({}));
        let d = decide_for(&idle, &nodes, &[Arc::new(idle.clone())], &[], None);
        assert_eq!(d.finalizer, None, "an Idle maintenance holds nothing and stays deletable");
    }

    #[test]
    fn cordon_holds_then_marks_held_then_decides_nothing() {
        let nm = live(maintenance_with("m", "Cordon", &["a", "b"], json!({})));
        let all = [nm.clone()];
        let nodes = vec![node("a", None, vec![]), node("b", None, vec![]), node("c", None, vec![])];
        let d = decide_for(&nm, &nodes, &all, &[], None);
        let held: Vec<String> = d.holds.iter().map(|h| h.node.name_any()).collect();
        assert_eq!(held, ["a", "b"]);
        assert!(d.holds.iter().all(|h| h.event.as_ref().is_some_and(|e| e.clone().into_event().reason == "Cordoned")));
        let st = d.status.as_ref().unwrap();
        assert_eq!(st.stage_statuses.iter().map(|s| s.name).collect::<Vec<_>>(), [Stage::Cordon]);
        assert_eq!(st.selected_nodes, Some(2));

        let (nodes, nm1) = written(&d, &nodes, &nm);
        let d = decide_for(&nm1, &nodes, &all, &[], None);
        assert!(d.holds.is_empty());
        let marked: Vec<String> = d.node_writes.iter().map(|w| w.node.name_any()).collect();
        assert_eq!(marked, ["a", "b"], "MaintenanceInProgress once the cache shows the hold");

        let (nodes, nm2) = written(&d, &nodes, &nm1);
        let d = decide_for(&nm2, &nodes, &all, &[], None);
        assert!(quiet(&d, &nm2), "a cluster that shows the decision decides nothing");
        assert_eq!(d.again, Some(Duration::from_secs(300)), "a settled Cordon looks again only as a safety net");
    }

    #[test]
    fn a_budget_of_one_holds_one_node_and_the_other_waits_saying_why() {
        let nm = live(maintenance_with("m", "Cordon", &["a", "b"], json!({})));
        let nodes = [node("a", None, vec![]), node("b", None, vec![])];
        let d = decide_for(&nm, &nodes, std::slice::from_ref(&nm), &[budget("general")], None);
        assert_eq!(d.holds.len(), 1);
        let st = d.status.unwrap();
        let waiting: Vec<_> = st.node_statuses.iter().filter(|s| s.phase == Some(NodePhase::Waiting)).collect();
        assert_eq!(waiting.len(), 1);
        assert!(waiting[0].drain_message.as_deref().unwrap_or_default().contains("general"), "{waiting:?}");
        assert_eq!(d.again, Some(Duration::from_secs(2)), "a node waits: look again soon");
    }

    #[test]
    fn deletion_releases_every_held_node_records_complete_then_drops_the_finalizer() {
        let mut nm = (*live(maintenance_with("m", "Drain", &["a"], json!({})))).clone();
        nm.metadata.deletion_timestamp = Some(t(NOW));
        let held = conditions::conditions(&Node::default(), ConditionPhase::Draining, "m", &t(NOW));
        let nodes = [tainted(&node("a", Some(&["m"]), held)).into(), node("b", Some(&["other"]), vec![])];
        let all = [Arc::new(nm.clone()), live(maintenance_with("other", "Cordon", &["b"], json!({})))];
        let d = decide_for(&nm, &nodes, &all, &[], None);
        assert_eq!(d.finalizer, Some(false));
        assert_eq!(d.releases.len(), 1, "only the nodes it holds");
        let r = &d.releases[0];
        assert!(r.undrain && r.change.holders.is_none() && !r.change.unschedulable);
        let released = r.conditions.as_ref().unwrap().build(&r.node);
        assert!(released.iter().all(|c| c.status == "False" && c.reason.as_deref() == Some("MaintenanceComplete")));
        assert!(r.event.is_some(), "Uncordoned");
        let st = d.status.unwrap();
        assert_eq!(st.stage_statuses.last().map(|s| s.name), Some(Stage::Complete));
        assert_eq!(d.again, None);
    }

    #[test]
    fn a_released_rolling_node_is_given_back_after_the_status_says_so() {
        let nm = live(maintenance_with("m", "Cordon", &["a", "b"], json!({"maxUnavailable": 1})));
        let held = conditions::conditions(&Node::default(), ConditionPhase::Held, "m", &t(NOW));
        let mut a = (*node("a", Some(&["m"]), held)).clone();
        a.metadata.annotations.get_or_insert_default().insert(DONE_ANNOTATION.into(), "m".into());
        let nodes = [Arc::new(a), node("b", None, vec![])];
        let d = decide_for(&nm, &nodes, std::slice::from_ref(&nm), &[], None);
        assert!(d.releases.is_empty(), "not before the status records it");
        let after: Vec<String> = d.releases_after_status.iter().map(|r| r.node.name_any()).collect();
        assert_eq!(after, ["a"]);
        assert!(d.releases_after_status[0].change.clear_done, "the done annotation goes with the hold");
        let st = d.status.unwrap();
        let a = st.node_statuses.iter().find(|s| s.node_ref.name == "a").unwrap();
        assert_eq!(a.phase, Some(NodePhase::Released));
    }

    /// A pass over node `a` of maintenance `m`: one pod to evict, one opted out, and `m`
    /// fast-forwarded on `a`; evictions on `a` refused by a budget.
    fn drain_view() -> DrainView {
        let pod = |name: &str| PodRef { namespace: "apps".into(), name: name.into(), uid: format!("u-{name}").into() };
        let plan = NodePlan {
            name: "a".into(),
            maintenances: vec!["m".into()],
            drain_targets: vec![DrainPlanEntry { pod_priority: 0, pod_type: PodType::Default, pod_selector: None }],
            drain_message: "Evicting 1 pod.".into(),
            evict: vec![pod("web")],
            blocked: vec![BlockedPod { pod: pod("kept"), cause: BlockedCause::OptedOut }],
            ..Default::default()
        };
        let decision = DrainDecision {
            nodes: vec![plan],
            maintenances: vec![MaintenancePlan { name: "m".into(), ..Default::default() }],
            fast_forwards: vec![FastForward {
                maintenance: "m".into(),
                node: "a".into(),
                cause: FastForwardCause::NodeAlreadyReached,
            }],
            ..Default::default()
        };
        DrainView {
            decision: Arc::new(decision),
            gated: Arc::default(),
            evacuation: EvacuationPlan::default(),
            refused: BTreeMap::from([("a".to_owned(), "1 eviction blocked by a PodDisruptionBudget".to_owned())]),
        }
    }

    #[test]
    fn a_drain_publishes_targets_and_conditions_before_its_evictions_and_reports_once_per_key() {
        let mut nm = (*live(maintenance_with("m", "Drain", &["a"], json!({})))).clone();
        nm.status = Some(NodeMaintenanceStatus {
            stage_statuses: vec![
                crate::api::StageStatus { name: Stage::Cordon, start_timestamp: Some(t(NOW)) },
                crate::api::StageStatus { name: Stage::Drain, start_timestamp: Some(t(NOW)) },
            ],
            ..Default::default()
        });
        let nm = Arc::new(nm);
        let nodes = [node("a", Some(&["m"]), vec![])];
        let d = decide_for(&nm, &nodes, std::slice::from_ref(&nm), &[], Some(drain_view()));
        assert!(d.retry_eviction_requests);
        assert_eq!(d.node_writes.len(), 1);
        let w = &d.node_writes[0];
        let published = w.published.as_ref().expect("the targets before the evictions they allow");
        assert_eq!(published.drain_start_time, Some(t(NOW)), "the drain starts where it may first evict");
        assert!(published.drain_message.as_deref().unwrap_or_default().contains("blocked by a PodDisruptionBudget"));
        assert!(
            w.conditions
                .as_ref()
                .unwrap()
                .build(&w.node)
                .iter()
                .any(|c| c.type_ == "DrainInProgress" && c.status == "True")
        );
        let evicted: Vec<&str> = d.evictions.iter().map(|e| &*e.pod.name).collect();
        assert_eq!(evicted, ["web"]);
        let held_back: Vec<&str> = d.not_evicted.iter().map(|p| &*p.uid).collect();
        assert_eq!(held_back, ["u-kept"]);
        let reasons =
            |d: &MaintenanceDecision| d.events.iter().map(|e| e.clone().into_event().reason).collect::<Vec<_>>();
        assert_eq!(reasons(&d), ["FastForwarded"], "the transition to fast-forwarded");
        let entry = &d.status.as_ref().unwrap().node_statuses[0];
        assert!(entry.fast_forwarded, "the stored fact the next decision compares with");
        assert!(!published.fast_forwarded, "not on the node: it is this maintenance's");

        let (nodes, nm) = written(&d, &nodes, &nm);
        let again = decide_for(&nm, &nodes, &[Arc::new(nm.clone())], &[], Some(drain_view()));
        assert!(reasons(&again).is_empty(), "once: the stored status says so");
        assert_eq!(d.again, Some(Duration::from_secs(2)));
    }

    #[test]
    fn maintenances_sharing_a_node_publish_its_status_once_not_in_turn() {
        let drained = |name: &str| {
            let mut nm = (*live(maintenance_with(name, "Drain", &["a"], json!({})))).clone();
            nm.status = Some(NodeMaintenanceStatus {
                stage_statuses: vec![
                    crate::api::StageStatus { name: Stage::Cordon, start_timestamp: Some(t(NOW)) },
                    crate::api::StageStatus { name: Stage::Drain, start_timestamp: Some(t(NOW)) },
                ],
                ..Default::default()
            });
            Arc::new(nm)
        };
        let (m, n) = (drained("m"), drained("n"));
        let both = [m.clone(), n.clone()];
        let view = |note: Option<&str>| {
            let mut v = drain_view();
            let mut decision = (*v.decision).clone();
            decision.maintenances.push(MaintenancePlan { name: "n".into(), ..Default::default() });
            decision.nodes[0].maintenances.push("n".into());
            v.decision = Arc::new(decision);
            if let Some(note) = note {
                v.evacuation.say("a", note.to_owned());
            }
            v
        };
        let nodes = [node("a", Some(&["m", "n"]), vec![])];
        let alone = decide_for(&n, &nodes, &both, &[], Some(view(Some("a note of n's"))));
        assert!(
            alone.node_writes[0].published.is_some(),
            "with no targets on the node, n publishes them before its evictions, first holder or not"
        );
        let first = decide_for(&m, &nodes, &both, &[], Some(view(None)));
        assert!(first.node_writes[0].published.is_some(), "m, the first holder, publishes");
        let (nodes, _) = written(&first, &nodes, &m);
        let other = decide_for(&n, &nodes, &both, &[], Some(view(Some("starting a rollout of Deployment apps/solo"))));
        assert!(
            other.node_writes.iter().all(|w| w.published.is_none()),
            "n sees the node differently (its own note) and leaves the published status alone"
        );
        let entry = &other.status.as_ref().unwrap().node_statuses[0];
        assert!(
            entry.drain_message.as_deref().unwrap_or_default().contains("starting a rollout"),
            "its own status says it"
        );
        let again = decide_for(&m, &nodes, &both, &[], Some(view(None)));
        assert!(again.node_writes.iter().all(|w| w.published.is_none()), "nothing to rewrite");
    }
}
