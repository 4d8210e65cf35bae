"""Least-privilege RBAC (SPEC 5): the chart grants exactly what src/cluster/rbac.rs lists.

`node-maintenance rbac` prints {"clusterRole": [PolicyRule...], "leaseRole": [...]} from
`cluster::rbac::API_CALLS`; hack/test-chart.sh builds target/debug/node-maintenance first.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import NAMESPACE, binary_path, find, find_all


def triples(rules):
    """Expand PolicyRules to a set of (apiGroup, resource, verb)."""
    out = set()
    for r in rules:
        assert "resourceNames" not in r and "nonResourceURLs" not in r, r
        for g in r.get("apiGroups", []):
            for res in r.get("resources", []):
                for v in r["verbs"]:
                    out.add((g, res, v))
    return out


@pytest.fixture(scope="module")
def program_rules():
    binary = binary_path()
    assert binary.is_file(), f"{binary} is missing: run `cargo build` first (hack/test-chart.sh does)"
    proc = subprocess.run([str(binary), "rbac"], capture_output=True, text=True, timeout=60)
    try:
        printed = json.loads(proc.stdout) if proc.returncode == 0 else None
    except json.JSONDecodeError:
        printed = None
    if printed is None:
        help_text = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=60)
        no_subcommand = "unrecognized subcommand" in proc.stderr or "rbac" not in (help_text.stdout + help_text.stderr)
        if no_subcommand:
            pytest.skip(
                "`node-maintenance rbac` does not exist yet (the binary has no `rbac` subcommand): "
                "the ClusterRole/Role cannot be compared with src/cluster/rbac.rs"
            )
        pytest.fail(f"`node-maintenance rbac` failed (exit {proc.returncode}): {proc.stderr or proc.stdout[:500]}")
    assert set(printed) >= {"clusterRole", "leaseRole"}, printed.keys()
    return printed


def test_cluster_role_equals_the_api_calls_of_the_program(render, program_rules):
    chart_rules = find(render(), "ClusterRole")["rules"]
    assert triples(chart_rules) == triples(program_rules["clusterRole"])


def test_lease_role_equals_the_api_calls_of_the_program(render, program_rules):
    role = find(render(), "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert triples(role["rules"]) == triples(program_rules["leaseRole"])


def test_cluster_role_is_least_privilege(render):
    rules = triples(find(render(), "ClusterRole")["rules"])
    assert not [t for t in rules if "*" in t], "no wildcards"
    # The controller never deletes nodes (SPEC 3.4) nor reads Secrets (TLS is a mounted file).
    # Its one delete: a pod whose eviction a PodDisruptionBudget already accepted (issue 25).
    dangerous = ("delete", "deletecollection", "escalate", "bind", "impersonate")
    assert [t for t in rules if t[2] in dangerous] == [("", "pods", "delete")]
    assert not [t for t in rules if t[1] in ("secrets", "configmaps", "nodes/proxy")]
    assert ("", "nodes", "update") not in rules
    assert not [t for t in rules if t[0] == "coordination.k8s.io"], "leases belong in the namespaced Role"


def test_cluster_role_grants_the_calls_the_issue_lists(render):
    rules = triples(find(render(), "ClusterRole")["rules"])
    nm = "nodemaintenance.k8s.io"
    expected = {
        ("", "nodes", v) for v in ("list", "watch", "patch")
    } | {
        ("", "nodes/status", "patch"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        # Finishing an eviction the apiserver accepted and did not carry out (issue 25).
        ("", "pods", "get"),
        ("", "pods", "delete"),
        ("", "pods/eviction", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    } | {
        ("lifecycle.k8s.io", "evictionrequests", v) for v in ("list", "watch", "patch")
    } | {
        ("lifecycle.k8s.io", "evictions", v) for v in ("list", "watch")
    } | {
        (nm, "nodemaintenances", v) for v in ("list", "watch", "patch")
    } | {
        (nm, "nodemaintenances/status", "patch"),
        # NodeDisruptionBudgets (issue 20): the watch cache and their status.
        (nm, "nodedisruptionbudgets", "list"),
        (nm, "nodedisruptionbudgets", "watch"),
        (nm, "nodedisruptionbudgets/status", "patch"),
    } | {
        ("events.k8s.io", "events", v) for v in ("create", "patch")
    } | {
        # Evacuation by rollout (issue 21).
        ("apps", "deployments", v) for v in ("list", "watch", "patch")
    } | {
        ("apps", "replicasets", "get"),
        ("policy", "poddisruptionbudgets", "list"),
        ("policy", "poddisruptionbudgets", "watch"),
    }
    assert rules == expected


def test_bindings_point_at_the_roles_and_the_service_account(render):
    objects = render()
    sa = find(objects, "ServiceAccount")["metadata"]
    for binding_kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(objects, binding_kind)
        role = find(objects, role_kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    assert len(find_all(objects, "Role")) == 1
