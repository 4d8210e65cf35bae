//! The simulation: planning pass after planning pass of the controller's planner, with
//! evictions applied as the Eviction API would (the module doc of `drain_preview`).

use super::*;

fn pod_key(p: &PodView) -> (String, String) {
    (p.namespace.to_string(), p.name.to_string())
}

fn full_name(p: &PodView) -> String {
    format!("{}/{}", p.namespace, p.name)
}

/// What a step accumulates over its passes.
#[derive(Default)]
struct StepAcc {
    evicted: Vec<usize>,
    waits: BTreeMap<usize, BTreeSet<String>>,
    blocked: BTreeMap<BlockedCause, BTreeSet<String>>,
    message: String,
}

/// Simulates the reviewed maintenance's drain (see the module documentation) and reports it
/// step by step. Never panics on input; bounded (a pass that changes nothing stops it).
pub fn simulate(input: &PreviewInput) -> DrainPreview {
    let me = input.reviewed.name.clone();
    let mut maints: Vec<MaintenanceInput> = input.others.iter().filter(|m| m.name != me).cloned().collect();
    maints.push(MaintenanceInput { drain_plan_index: 0, ..input.reviewed.clone() });
    let mine: BTreeSet<&str> = input.reviewed.nodes.iter().map(String::as_str).collect();
    let mut floors: BTreeMap<String, NodeInput> = input.nodes.iter().map(|n| (n.name.clone(), n.clone())).collect();
    let pods: Vec<&PreviewPod> = input.pods.iter().filter(|p| !p.view.eviction_in_progress).collect();
    let index: HashMap<(String, String), usize> = pods.iter().enumerate().map(|(i, p)| (pod_key(&p.view), i)).collect();
    let covers: Vec<Vec<usize>> = pods
        .iter()
        .map(|p| {
            input
                .budgets
                .iter()
                .enumerate()
                .filter(|(_, b)| {
                    *b.namespace == *p.view.namespace
                        && b.selector.as_ref().is_some_and(|s| s.matches(|k| p.view.labels.get(k)))
                })
                .map(|(i, _)| i)
                .collect()
        })
        .collect();
    let mut alive = vec![true; pods.len()];
    let mut allowed: Vec<i32> = input.budgets.iter().map(|b| b.disruptions_allowed).collect();
    let mut steps: BTreeMap<usize, StepAcc> = BTreeMap::new();
    let mut held_back_by = BTreeSet::new();
    // Pods of the selected nodes the planner left to finish (SPEC 4.6), `namespace/name`.
    let mut left_to_finish = BTreeSet::new();
    let mut warnings = BTreeSet::new();
    let mut outcome = Outcome { drained: false, stuck_at: None, reason: Some("no pass ran".into()) };
    // Each productive pass evicts a pod, taints a node, raises a floor, moves a cursor or
    // restores budgets after an eviction; this bound is never reached in practice.
    let plan_len: usize = maints.iter().map(|m| m.drain_plan.len()).sum();
    let max_passes = 4 * (pods.len() + plan_len * (floors.len() + mine.len() + 1)) + 16;
    for _ in 0..max_passes {
        let planner_input = PlannerInput {
            maintenances: maints.clone(),
            pods: pods.iter().zip(&alive).filter(|(_, a)| **a).map(|(p, _)| p.view.clone()).collect(),
            nodes: floors.values().cloned().collect(),
            options: input.options,
            // The drain as from its start: waits for completion have not timed out.
            now: jiff::Timestamp::UNIX_EPOCH,
        };
        let decision = planner::plan(&planner_input);
        warnings.extend(decision.warnings.iter().cloned());
        let Some(mp) = decision.maintenance(&me) else { break };
        let cursor = usize::try_from(mp.drain_plan_index).unwrap_or(0);
        if mp.drained {
            outcome = Outcome { drained: true, stuck_at: None, reason: None };
            break;
        }
        let step =
            steps.entry(cursor).or_insert_with(|| StepAcc { message: mp.drain_message.clone(), ..Default::default() });
        held_back_by.extend(mp.reason.held_back_by().iter().filter(|n| **n != me).cloned());
        let mut progress = false;
        let (mut refused_all, mut refused_by) = (BTreeSet::new(), BTreeSet::new());
        for np in &decision.nodes {
            let on_mine = mine.contains(np.name.as_str());
            if on_mine {
                left_to_finish.extend(np.waiting_for_completion.iter().map(|p| format!("{}/{}", p.namespace, p.name)));
                for b in &np.blocked {
                    step.blocked.entry(b.cause).or_default().insert(format!("{}/{}", b.pod.namespace, b.pod.name));
                }
            }
            for r in &np.evict {
                let Some(&i) = index.get(&(r.namespace.to_string(), r.name.to_string())) else { continue };
                // A pod its Deployment's rollout moves does not ask its budgets.
                let rolled = input.rolled.contains(&full_name(&pods[i].view));
                if let Some(&b) = covers[i].iter().find(|&&b| allowed[b] <= 0 && !rolled) {
                    refused_all.insert(b);
                    if on_mine {
                        refused_by.insert(b);
                        step.waits.entry(b).or_default().insert(full_name(&pods[i].view));
                    }
                    continue;
                }
                for &b in covers[i].iter().filter(|_| !rolled) {
                    allowed[b] -= 1;
                }
                alive[i] = false;
                progress = true;
                if on_mine {
                    step.evicted.push(i);
                }
            }
            let floor = floors
                .entry(np.name.clone())
                .or_insert_with(|| NodeInput { name: np.name.clone(), ..Default::default() });
            if np.needs_daemonset_taint && !floor.draining_taint {
                floor.draining_taint = true;
                progress = true;
            }
            if floor.reached != np.drain_targets {
                floor.reached = np.drain_targets.clone();
                progress = true;
            }
        }
        for (m, plan) in maints.iter_mut().zip(&decision.maintenances) {
            if m.drain_plan_index != plan.drain_plan_index {
                m.drain_plan_index = plan.drain_plan_index;
                progress = true;
            }
        }
        if progress {
            continue;
        }
        // Budgets this drain used up and that now refuse: the replacements came up elsewhere.
        let used: Vec<usize> =
            refused_all.into_iter().filter(|&b| allowed[b] < input.budgets[b].disruptions_allowed).collect();
        if !used.is_empty() {
            for b in used {
                allowed[b] = input.budgets[b].disruptions_allowed;
            }
            continue;
        }
        let reason = if refused_by.is_empty() {
            mp.drain_message.clone()
        } else {
            let names: Vec<String> = refused_by
                .iter()
                .map(|&b| format!("{}/{}", input.budgets[b].namespace, input.budgets[b].name))
                .collect();
            format!("PodDisruptionBudget {} allows no eviction", names.join(", "))
        };
        outcome = Outcome { drained: false, stuck_at: Some(cursor + 1), reason: Some(reason) };
        break;
    }
    let plan = &input.reviewed.drain_plan;
    let mut not_coming_back = PodList::default();
    let mut empty_dir_lost = PodList::default();
    let steps: Vec<Step> = steps
        .into_iter()
        .filter_map(|(cursor, acc)| {
            let mut groups: BTreeMap<(String, Owner), (BTreeSet<i32>, Vec<String>)> = BTreeMap::new();
            for &i in &acc.evicted {
                let p = pods[i];
                let g = groups.entry((p.view.namespace.to_string(), p.owner.clone())).or_default();
                g.0.insert(p.view.priority);
                g.1.push(p.view.name.to_string());
                if !p.comes_back {
                    not_coming_back.pods.push(full_name(&p.view));
                }
                if !p.empty_dir.is_empty() {
                    empty_dir_lost.pods.push(format!("{} ({})", full_name(&p.view), p.empty_dir.join(", ")));
                }
            }
            let by_owner = groups
                .into_iter()
                .map(|((namespace, owner), (prios, mut pods))| {
                    pods.sort();
                    OwnerGroup { namespace, owner, count: pods.len(), priorities: prios.into_iter().collect(), pods }
                })
                .collect();
            let pdb_waits = acc
                .waits
                .into_iter()
                .map(|(b, pods)| BudgetWait {
                    pdb: format!("{}/{}", input.budgets[b].namespace, input.budgets[b].name),
                    disruptions_allowed: input.budgets[b].disruptions_allowed,
                    pods: pods.into_iter().collect(),
                })
                .collect();
            let blocked = acc
                .blocked
                .into_iter()
                .map(|(cause, pods)| BlockedGroup {
                    cause: format!("{cause:?}"),
                    label: cause.label().to_owned(),
                    pods: pods.into_iter().collect(),
                })
                .collect();
            Some(Step {
                entry: cursor + 1,
                plan_entry: plan.get(cursor)?.clone(),
                evicted: acc.evicted.len(),
                by_owner,
                pdb_waits,
                blocked,
                message: acc.message,
            })
        })
        .collect();
    not_coming_back.pods.sort();
    not_coming_back.count = not_coming_back.pods.len();
    empty_dir_lost.pods.sort();
    empty_dir_lost.count = empty_dir_lost.pods.len();
    let mut remaining: BTreeMap<(u8, String, String), BTreeSet<String>> = BTreeMap::new();
    for (p, _) in pods.iter().zip(&alive).filter(|(p, a)| **a && !p.view.terminal && mine.contains(&*p.view.node_name))
    {
        let name = full_name(&p.view);
        let (rank, cause, label) = match (p.view.pod_type, p.view.tolerates_draining_taint) {
            (PodType::Static, _) => (0, "StaticPod", BlockedCause::StaticPod.label()),
            _ if left_to_finish.contains(&name) => {
                (1, "WaitingForCompletion", "left to finish (spec.waitForCompletion)")
            }
            (PodType::DaemonSet, _) if input.options.skip_daemonset_pods => {
                (2, "SkippedDaemonSet", "DaemonSet pods (--skip-daemonset-pods)")
            }
            _ if p.view.opted_out => (1, "OptedOut", BlockedCause::OptedOut.label()),
            (PodType::DaemonSet, true) => (1, "ToleratesDrainingTaint", BlockedCause::ToleratesDrainingTaint.label()),
            _ => (3, "NotEvicted", "not evicted (the drain stops first)"),
        };
        remaining.entry((rank, cause.into(), label.into())).or_default().insert(name);
    }
    let remaining = remaining
        .into_iter()
        .map(|((_, cause, label), pods)| BlockedGroup { cause, label, pods: pods.into_iter().collect() })
        .collect();
    let nodes: Vec<String> = mine.iter().map(|n| n.to_string()).collect();
    DrainPreview {
        pods: pods.iter().filter(|p| mine.contains(&*p.view.node_name) && !p.view.terminal).count(),
        nodes,
        owner_resolution: input.owner_resolution,
        nodes_at_once: input
            .max_unavailable
            .as_ref()
            .and_then(|v| crate::api::scaled_count(v, input.reviewed.nodes.len()).ok()),
        planned_with: maints.iter().filter(|m| m.name != me).map(|m| m.name.clone()).collect(),
        steps,
        outcome,
        held_back_by: held_back_by.into_iter().collect(),
        remaining,
        not_coming_back,
        empty_dir_lost,
        warnings: warnings.into_iter().collect(),
        rolled_instead: input.rolled_instead.clone(),
        not_rolled: input.not_rolled.clone(),
    }
}
