"""The CRD the chart installs (SPEC 2): generated from the Rust types into crds/."""

from __future__ import annotations

import subprocess

import yaml

from conftest import CHART, binary_path

CRD_FILE = CHART / "crds" / "nodemaintenances.yaml"
BUDGET_CRD_FILE = CHART / "crds" / "nodedisruptionbudgets.yaml"


def load_crd(path=CRD_FILE):
    assert path.is_file(), f"{path} is missing: run hack/update-crd.sh"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert len(docs) == 1
    return docs[0]


def test_crd_is_the_cluster_scoped_nodemaintenance_api():
    crd = load_crd()
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == "nodemaintenances.nodemaintenance.k8s.io"
    assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"] == "unapproved, experimental-only"
    spec = crd["spec"]
    assert spec["group"] == "nodemaintenance.k8s.io"
    assert spec["scope"] == "Cluster"
    assert spec["names"]["plural"] == "nodemaintenances"
    assert spec["names"]["kind"] == "NodeMaintenance"
    assert "nm" in spec["names"].get("shortNames", [])
    served = {v["name"]: v for v in spec["versions"] if v["served"]}
    # The webhook rules name v1alpha1: it must be served, with the status subresource.
    assert "v1alpha1" in served
    assert "status" in served["v1alpha1"].get("subresources", {})


def test_budget_crd_is_the_cluster_scoped_nodedisruptionbudget_api():
    crd = load_crd(BUDGET_CRD_FILE)
    assert crd["metadata"]["name"] == "nodedisruptionbudgets.nodemaintenance.k8s.io"
    spec = crd["spec"]
    assert spec["scope"] == "Cluster"
    assert spec["names"]["kind"] == "NodeDisruptionBudget"
    served = {v["name"]: v for v in spec["versions"] if v["served"]}
    assert "status" in served["v1alpha1"].get("subresources", {})


def test_crds_directory_holds_only_the_generated_crds():
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == ["nodedisruptionbudgets.yaml", "nodemaintenances.yaml"]


def test_crd_matches_what_the_program_generates():
    binary = binary_path()
    assert binary.is_file(), f"{binary} is missing: run `cargo build` first (hack/test-chart.sh does)"
    for kind, path in [("NodeMaintenance", CRD_FILE), ("NodeDisruptionBudget", BUDGET_CRD_FILE)]:
        proc = subprocess.run([str(binary), "crd", "--kind", kind], capture_output=True, text=True, timeout=60, check=True)
        generated = [d for d in yaml.safe_load_all(proc.stdout) if d]
        assert generated == [load_crd(path)], f"{path.name} is stale: run hack/update-crd.sh"
