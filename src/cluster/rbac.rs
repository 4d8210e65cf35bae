//! The Kubernetes API calls this program makes, in one place (SPEC 5: least-privilege RBAC).
//!
//! [`API_CALLS`] is the list a reviewer reads to know what the program may do to a
//! cluster. The Helm chart's `ClusterRole` and leader-election `Role` are checked against
//! it: `node-maintenance rbac` prints [`cluster_role_rules`] and [`lease_role_rules`] as
//! JSON and the chart tests (`tests/chart/`) compare the rendered rules with that output,
//! so adding an API call here without updating the chart (or the other way round) fails
//! a test.
//!
//! What is deliberately absent: `delete` on nodes (the controller never needs it; only
//! the *requesting user* is checked for it, through a SubjectAccessReview, SPEC 3.4),
//! `create`/`delete` on NodeMaintenances (people create them; the controller only
//! reconciles), and any access to Secrets (the serving certificate is a mounted file).

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::api::GROUP as NM_GROUP;

/// One kind of API request the program makes: `verbs` on `resource` in API `group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiCall {
    /// API group; `""` is the core group.
    pub group: &'static str,
    /// Plural resource name, with a subresource written `resource/subresource`
    /// (`nodes/status`, `pods/eviction`), as RBAC rules spell it.
    pub resource: &'static str,
    /// RBAC verbs (`get`, `list`, `watch`, `create`, `update`, `patch`, ...).
    pub verbs: &'static [&'static str],
    /// `true` when the call is made only in the program's own namespace (the
    /// leader-election Lease), so it is granted by a namespaced `Role` there;
    /// `false` when it is granted cluster-wide by the `ClusterRole` (cluster-scoped
    /// resources, and Events, which the recorder writes to the `default` namespace for
    /// cluster-scoped objects such as Nodes and NodeMaintenances).
    pub namespaced: bool,
    /// Why the program makes this call (for people reading the list).
    pub why: &'static str,
}

/// Every API call the program makes, with exactly the verbs it uses.
pub const API_CALLS: &[ApiCall] = &[
    ApiCall {
        group: "",
        resource: "nodes",
        verbs: &["list", "watch", "patch"],
        namespaced: false,
        why: "node watch cache (admission warnings, selection); cordon, uncordon, taint and annotations",
    },
    ApiCall {
        group: "",
        resource: "nodes/status",
        verbs: &["patch"],
        namespaced: false,
        why: "MaintenancePlanned, MaintenanceInProgress, DrainInProgress and Drained node conditions (SPEC 4.3, 4.5)",
    },
    ApiCall {
        group: "",
        resource: "pods",
        verbs: &["list", "watch", "get", "delete"],
        namespaced: false,
        why: "pod watch cache: which pods a drain plan targets; get and delete only to finish an eviction a \
              PodDisruptionBudget records as accepted and that was not carried out",
    },
    ApiCall {
        group: "",
        resource: "pods/eviction",
        verbs: &["create"],
        namespaced: false,
        why: "evictions through the Eviction API, so PodDisruptionBudgets are honoured",
    },
    ApiCall {
        group: "lifecycle.k8s.io",
        resource: "evictionrequests",
        verbs: &["list", "watch", "patch"],
        namespaced: false,
        why: "evictions through EvictionRequests where the cluster serves them: created, re-asked and \
              withdrawn by server-side apply",
    },
    ApiCall {
        group: "apps",
        resource: "deployments",
        verbs: &["list", "watch", "patch"],
        namespaced: false,
        why: "evacuation by rollout: Deployment cache; a rollout started by a pod-template annotation \
              (merge patch conditional on the resourceVersion)",
    },
    ApiCall {
        group: "apps",
        resource: "replicasets",
        verbs: &["get"],
        namespaced: false,
        why: "evacuation by rollout: the pod's ReplicaSet is the Deployment's before its rollout starts",
    },
    ApiCall {
        group: "policy",
        resource: "poddisruptionbudgets",
        verbs: &["list", "watch"],
        namespaced: false,
        why: "evacuation by rollout: does the budget that refused an eviction ever allow a disruption",
    },
    ApiCall {
        group: "lifecycle.k8s.io",
        resource: "evictions",
        verbs: &["list", "watch"],
        namespaced: false,
        why: "the progress of those EvictionRequests, which the cluster's responders report on Evictions",
    },
    ApiCall {
        group: "authorization.k8s.io",
        resource: "subjectaccessreviews",
        verbs: &["create"],
        namespaced: false,
        why: "may the requesting user delete the selected nodes (SPEC 3.4)",
    },
    ApiCall {
        group: NM_GROUP,
        resource: "nodemaintenances",
        verbs: &["list", "watch", "patch"],
        namespaced: false,
        why: "reconcile loop and admission cache; adding and removing the finalizer (merge patch)",
    },
    ApiCall {
        group: NM_GROUP,
        resource: "nodemaintenances/status",
        verbs: &["patch"],
        namespaced: false,
        why: "status: stageStatuses, drainStatus, nodeStatuses, conditions",
    },
    ApiCall {
        group: NM_GROUP,
        resource: "nodedisruptionbudgets",
        verbs: &["list", "watch"],
        namespaced: false,
        why: "budget watch cache: no maintenance cordons a node its budgets have no room for",
    },
    ApiCall {
        group: NM_GROUP,
        resource: "nodedisruptionbudgets/status",
        verbs: &["patch"],
        namespaced: false,
        why: "budget status: expectedNodes, currentAvailable, disruptionsAllowed (server-side apply)",
    },
    ApiCall {
        group: "events.k8s.io",
        resource: "events",
        verbs: &["create", "patch"],
        namespaced: false,
        why: "Events (events.k8s.io/v1) for cordon, uncordon, blocked evictions, drained",
    },
    ApiCall {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["get", "list", "watch", "create", "patch"],
        namespaced: true,
        why: "leader election (kube-lease-manager: get, create, server-side apply and strategic patches; a standby watches the Lease to take it over as soon as the leader releases it)",
    },
];

fn rule(call: &ApiCall) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![call.group.to_owned()]),
        resources: Some(vec![call.resource.to_owned()]),
        verbs: call.verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

/// The rules of the chart's `ClusterRole`: one [`PolicyRule`] per cluster-wide entry of
/// [`API_CALLS`] (those with `namespaced: false`), in that order, each with one API group,
/// one resource and exactly the verbs listed (SPEC 5, least privilege).
#[must_use]
pub fn cluster_role_rules() -> Vec<PolicyRule> {
    API_CALLS.iter().filter(|c| !c.namespaced).map(rule).collect()
}

/// The rules of the chart's namespaced `Role` in the release namespace: one
/// [`PolicyRule`] per entry of [`API_CALLS`] with `namespaced: true` (the leader-election
/// Lease, SPEC 1 and 5), in that order.
#[must_use]
pub fn lease_role_rules() -> Vec<PolicyRule> {
    API_CALLS.iter().filter(|c| c.namespaced).map(rule).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const KNOWN_VERBS: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

    fn triples(rules: &[PolicyRule]) -> BTreeSet<(String, String, String)> {
        let mut out = BTreeSet::new();
        for r in rules {
            for g in r.api_groups.as_deref().unwrap_or_default() {
                for res in r.resources.as_deref().unwrap_or_default() {
                    for v in &r.verbs {
                        out.insert((g.clone(), res.clone(), v.clone()));
                    }
                }
            }
        }
        out
    }

    fn has(rules: &[PolicyRule], group: &str, resource: &str, verb: &str) -> bool {
        triples(rules).contains(&(group.to_owned(), resource.to_owned(), verb.to_owned()))
    }

    #[test]
    fn every_call_is_granted_exactly_once_by_one_of_the_two_roles() {
        let cluster = triples(&cluster_role_rules());
        let lease = triples(&lease_role_rules());
        assert!(cluster.is_disjoint(&lease));
        let expected: usize = API_CALLS.iter().map(|c| c.verbs.len()).sum();
        assert_eq!(cluster.len() + lease.len(), expected, "a verb is listed twice");
        assert_eq!(cluster_role_rules().len() + lease_role_rules().len(), API_CALLS.len());
    }

    #[test]
    fn no_wildcards_unknown_verbs_or_duplicate_resources() {
        let mut seen = BTreeSet::new();
        for c in API_CALLS {
            assert!(seen.insert((c.group, c.resource)), "{}/{} listed twice", c.group, c.resource);
            assert!(!c.group.contains('*') && !c.resource.contains('*'));
            assert!(!c.verbs.is_empty());
            for v in c.verbs {
                assert!(KNOWN_VERBS.contains(v), "unknown verb {v} on {}", c.resource);
            }
            assert!(!c.why.is_empty());
        }
    }

    #[test]
    fn controller_never_needs_to_delete_nodes_or_read_secrets() {
        // SPEC 3.4: only the requesting user is checked for `delete nodes`.
        let rules = cluster_role_rules();
        assert!(!has(&rules, "", "nodes", "delete"));
        assert!(!has(&rules, "", "nodes", "update"));
        assert!(triples(&rules).iter().all(|(_, r, _)| r != "secrets"));
        // The one delete: a pod whose eviction a PodDisruptionBudget already accepted.
        let deletes: Vec<_> =
            triples(&rules).into_iter().filter(|(_, _, v)| *v == "delete" || *v == "deletecollection").collect();
        assert_eq!(deletes.len(), 1, "{deletes:?}");
        assert!(has(&rules, "", "pods", "delete"));
        // People create NodeMaintenances; the controller never does.
        assert!(!has(&rules, NM_GROUP, "nodemaintenances", "create"));
    }

    #[test]
    fn cluster_role_grants_what_the_issue_lists() {
        let rules = cluster_role_rules();
        for (g, r, verbs) in [
            ("", "nodes", &["list", "watch", "patch"][..]),
            ("", "nodes/status", &["patch"][..]),
            ("", "pods", &["list", "watch"][..]),
            ("", "pods/eviction", &["create"][..]),
            ("authorization.k8s.io", "subjectaccessreviews", &["create"][..]),
            (NM_GROUP, "nodemaintenances", &["list", "watch", "patch"][..]),
            (NM_GROUP, "nodemaintenances/status", &["patch"][..]),
            ("events.k8s.io", "events", &["create", "patch"][..]),
            ("apps", "deployments", &["list", "watch", "patch"][..]),
            ("apps", "replicasets", &["get"][..]),
            ("policy", "poddisruptionbudgets", &["list", "watch"][..]),
        ] {
            for v in verbs {
                assert!(has(&rules, g, r, v), "missing {v} on {g}/{r}");
            }
        }
        assert!(!triples(&rules).iter().any(|(g, _, _)| g == "coordination.k8s.io"));
    }

    #[test]
    fn leases_only_in_the_namespaced_role() {
        let rules = lease_role_rules();
        assert_eq!(rules.len(), 1);
        for v in ["get", "list", "watch", "create", "patch"] {
            assert!(has(&rules, "coordination.k8s.io", "leases", v));
        }
        assert_eq!(triples(&rules).len(), 5);
    }

    #[test]
    fn rules_serialize_as_rbac_json() {
        let json = serde_json::to_value(cluster_role_rules()).unwrap();
        assert_eq!(json[0]["apiGroups"], serde_json::json!([""]));
        assert_eq!(json[0]["resources"], serde_json::json!(["nodes"]));
        assert_eq!(json[0]["verbs"], serde_json::json!(["list", "watch", "patch"]));
        assert!(json[0].get("resourceNames").is_none());
    }
}
