"""`helm lint --strict` and values.schema.json (SPEC 5: the chart is installable as is)."""

from __future__ import annotations

import json

import pytest
import yaml

import helm_python as helm

from conftest import CHART, KUBE_VERSION, NAMESPACE, VARIANTS

SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_lint_strict_has_no_warning_or_error(name):
    report = helm.lint(str(CHART), VARIANTS[name], strict=True, namespace=NAMESPACE, kube_version=KUBE_VERSION)
    problems = [
        f"{SEVERITY.get(m['severity'], m['severity'])} {m['path']}: {m['error']}"
        for m in report["messages"]
        if m["severity"] >= 2
    ]
    assert report["total_charts_linted"] == 1
    assert not report["errors"], report["errors"]
    assert not problems, "\n".join(problems)


def test_chart_metadata(chart):
    meta = chart.metadata
    assert meta["apiVersion"] == "v2"
    assert meta["name"] == "node-maintenance"
    assert meta["type"] == "application"
    assert meta["appVersion"]
    # matchConditions (node webhook) are GA since 1.30.
    assert meta["kubeVersion"].startswith(">=1.30")


def test_values_yaml_passes_its_own_schema(chart):
    assert chart.schema is not None, "values.schema.json is missing"
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart.validate_schema(values)
    for overrides in VARIANTS.values():
        chart.validate_schema(chart.merge_values(overrides))


def test_schema_is_valid_json_and_strict_at_the_top():
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    # Every top-level key of values.yaml is described.
    assert set(values) <= set(schema["properties"]), set(values) - set(schema["properties"])


@pytest.mark.parametrize(
    "bad",
    [
        {"webhook": {"timeoutSeconds": 31}},
        {"webhook": {"timeoutSeconds": 0}},
        {"webhook": {"failurePolicy": "Sometimes"}},
        {"webhook": {"node": {"failurePolicy": "Maybe"}}},
        {"replicaCount": 0},
        {"replicaCount": "two"},
        {"metrics": {"port": 70000}},
        {"controller": {"leaseName": "Not_A_DNS_Name"}},
        {"unknownKey": True},
        {"logFormat": "xml"},
        {"image": {"repository": ""}},
        {"tls": {"certManager": {"enabled": False}}},
        {"tls": {"certManager": {"enabled": False}, "existingSecret": "x"}},
        {"livenessProbe": {"httpGet": {"path": "/healthz", "port": "https", "scheme": "FTP"}}},
        {"prometheus": {"url": "prometheus:9090"}},
        {"prometheus": {"url": "ftp://prometheus"}},
        {"prometheus": {"timeout": "5"}},
        {"prometheus": {"ca": {"secretName": "a", "configMapName": "b"}}},
        {"prometheus": {"ca": {"key": ""}}},
        {"prometheus": {"bearerToken": "x"}},
    ],
    ids=lambda v: json.dumps(v, sort_keys=True),
)
def test_schema_rejects_bad_values(chart, bad):
    chart.validate_schema(chart.merge_values({}))  # the defaults pass; the override breaks it
    with pytest.raises(helm.HelmError):
        chart.validate_schema(chart.merge_values(bad))


def test_byo_without_secret_fails_to_render_with_an_actionable_message(chart):
    # The schema and the template both refuse it; the message names the values to set.
    with pytest.raises(helm.HelmError) as err:
        chart.render({"tls": {"certManager": {"enabled": False}}}, name="nm", namespace=NAMESPACE)
    assert "existingSecret" in str(err.value) or "caBundle" in str(err.value)
