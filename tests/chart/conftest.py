"""Shared fixtures of the chart tests: the chart rendered offline through the Helm SDK.

Run through hack/test-chart.sh, which installs the pinned packages (requirements.txt).
Rendering uses helm-python-sdk (Helm v4's Go SDK behind a C ABI): no helm binary, no
cluster. Every render is done once per session and cached.
"""

from __future__ import annotations

import base64
import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import helm_python as helm

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "node-maintenance"
RELEASE = "nm"
NAMESPACE = "ops-system"
KUBE_VERSION = "v1.36.0"

# A syntactically valid PEM bundle, base64-encoded, for bring-your-own certificate tests.
BYO_CA_PEM = "-----BEGIN CERTIFICATE-----\nTUlJQnZ6Q0NBV1dnQXdJQkFnSVVCWUJ5ZXhhbXBsZQ==\n-----END CERTIFICATE-----\n"
BYO_CA_BUNDLE = base64.b64encode(BYO_CA_PEM.encode()).decode()
BYO_SECRET = "my-webhook-tls"

# Value sets the tests render. "default" is what `helm install` without values gives.
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "byo-cert": {
        "tls": {"certManager": {"enabled": False}, "existingSecret": BYO_SECRET, "caBundle": BYO_CA_BUNDLE}
    },
    "webhook-only": {"controller": {"enabled": False}},
    "all-options": {
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
        "controller": {"leaseName": "custom-lease"},
        "webhook": {"timeoutSeconds": 7, "node": {"timeoutSeconds": 3}},
        "commonLabels": {"team": "platform"},
        "extraArgs": ["--skip-daemonset-pods"],
        "replicaCount": 3,
        "prometheus": {
            "url": "https://prometheus.monitoring.svc:9091/prom",
            "timeout": "3s",
            "ca": {"configMapName": "prometheus-ca", "key": "ca.pem"},
        },
    },
}

RECOMMENDED_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)


@pytest.fixture(scope="session")
def chart():
    with helm.Chart.load(str(CHART)) as c:
        yield c


@functools.lru_cache(maxsize=None)
def _render(chart_obj, values_json: str, name: str, namespace: str) -> tuple[dict[str, str], tuple[dict, ...]]:
    manifests = chart_obj.render(json.loads(values_json), name=name, namespace=namespace, is_install=True)
    objects: list[dict] = []
    for path, text in sorted(manifests.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.safe_load_all(text):
            if doc is None:
                continue
            assert isinstance(doc, dict), f"{path}: a document is not a mapping"
            doc.setdefault("__template__", path)
            objects.append(doc)
    return manifests, tuple(objects)


@pytest.fixture(scope="session")
def render(chart):
    """render(values) -> list of rendered objects (each with a '__template__' key)."""

    def do(values: dict[str, Any] | None = None, name: str = RELEASE, namespace: str = NAMESPACE) -> list[dict]:
        return list(_render(chart, json.dumps(values or {}, sort_keys=True), name, namespace)[1])

    return do


@pytest.fixture(scope="session")
def render_raw(chart):
    """render_raw(values) -> {template path: rendered text} (includes NOTES.txt)."""

    def do(values: dict[str, Any] | None = None, name: str = RELEASE, namespace: str = NAMESPACE) -> dict[str, str]:
        return dict(_render(chart, json.dumps(values or {}, sort_keys=True), name, namespace)[0])

    return do


@pytest.fixture(params=sorted(VARIANTS))
def variant(request, render):
    """(variant name, values, rendered objects) for every entry of VARIANTS."""
    values = VARIANTS[request.param]
    return request.param, values, render(values)


def find(objects: list[dict], kind: str, name: str | None = None) -> dict:
    matches = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(matches) == 1, f"expected one {kind} {name or ''}, found {len(matches)}"
    return matches[0]


def find_all(objects: list[dict], kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def container(objects: list[dict]) -> dict:
    pods = find(objects, "Deployment")["spec"]["template"]["spec"]
    assert len(pods["containers"]) == 1
    return pods["containers"][0]


def binary_path() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    if not target.is_absolute():
        target = REPO / target
    return target / "debug" / "node-maintenance"


def shared_fixtures() -> Path:
    """The recorded AdmissionReviews, copied unchanged into tests/fixtures."""
    return REPO / "tests" / "fixtures"
