"""Webhook configurations (SPEC 3, 3.6 and 5): exactly the operations the server handles."""

from __future__ import annotations

import json

import celpy
from celpy import json_to_cel

from conftest import NAMESPACE, VARIANTS, find, shared_fixtures

NM = ("nodemaintenance.k8s.io", "v1alpha1")

# SPEC 3: endpoint -> the (group, version, resource, operation) tuples it receives.
EXPECTED_RULES = {
    "/mutate": {(*NM, "nodemaintenances", op) for op in ("CREATE", "UPDATE")},
    "/validate": {(*NM, "nodemaintenances", op) for op in ("CREATE", "UPDATE", "DELETE")}
    | {(*NM, "nodemaintenances/status", "UPDATE")},
    "/validate-node": {("", "v1", "nodes", "UPDATE")},
    "/validate-budget": {(*NM, "nodedisruptionbudgets", op) for op in ("CREATE", "UPDATE")},
}
EXPECTED_FAILURE_POLICY = {"/mutate": "Fail", "/validate": "Fail", "/validate-node": "Ignore", "/validate-budget": "Fail"}
EXPECTED_KIND = {
    "/mutate": "MutatingWebhookConfiguration",
    "/validate": "ValidatingWebhookConfiguration",
    "/validate-node": "ValidatingWebhookConfiguration",
    "/validate-budget": "ValidatingWebhookConfiguration",
}


def webhooks(objects):
    """endpoint path -> (configuration kind, webhook)."""
    out = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for wh in find(objects, kind)["webhooks"]:
            path = wh["clientConfig"]["service"]["path"]
            assert path not in out, f"{path} registered twice"
            out[path] = (kind, wh)
    return out


def expand(rules):
    out = set()
    for r in rules:
        assert "*" not in json.dumps(r), f"wildcard in rule {r}"
        assert r["scope"] == "Cluster"
        for g in r["apiGroups"]:
            for v in r["apiVersions"]:
                for res in r["resources"]:
                    for op in r["operations"]:
                        out.add((g, v, res, op))
    return out


def test_rules_cover_exactly_the_spec_operations(variant):
    _, _, objects = variant
    got = webhooks(objects)
    assert set(got) == set(EXPECTED_RULES)
    for path, (kind, wh) in got.items():
        assert kind == EXPECTED_KIND[path], path
        assert expand(wh["rules"]) == EXPECTED_RULES[path], path
        assert wh["failurePolicy"] == EXPECTED_FAILURE_POLICY[path], path


def test_every_webhook_is_side_effect_free_and_speaks_v1(variant):
    _, values, objects = variant
    timeout = (values.get("webhook") or {}).get("timeoutSeconds", 10)
    node_timeout = ((values.get("webhook") or {}).get("node") or {}).get("timeoutSeconds") or timeout
    svc = find(objects, "Service")
    https_port = next(p["port"] for p in svc["spec"]["ports"] if p["name"] == "https")
    names = set()
    for path, (_, wh) in webhooks(objects).items():
        assert wh["sideEffects"] == "None"
        assert wh["admissionReviewVersions"] == ["v1"]
        assert wh["timeoutSeconds"] == (node_timeout if path == "/validate-node" else timeout)
        assert 1 <= wh["timeoutSeconds"] <= 30
        ref = wh["clientConfig"]["service"]
        assert ref["name"] == svc["metadata"]["name"]
        assert ref["namespace"] == NAMESPACE
        assert ref["port"] == https_port
        assert "url" not in wh["clientConfig"]
        assert wh["name"].count(".") >= 2, "webhook names are fully qualified"
        names.add(wh["name"])
    assert len(names) == 4


def test_default_timeout_is_ten_seconds(render):
    for _, (_, wh) in webhooks(render()).items():
        assert wh["timeoutSeconds"] == 10


def test_mutating_webhook_may_be_reinvoked(render):
    _, wh = webhooks(render())["/mutate"]
    assert wh.get("reinvocationPolicy", "Never") in ("Never", "IfNeeded")


def test_node_webhook_can_be_turned_off(render):
    got = webhooks(render({"webhook": {"node": {"enabled": False}}}))
    assert set(got) == {"/mutate", "/validate", "/validate-budget"}


# ------------------------------------------------------ node matchConditions (CEL)


def node_condition(objects):
    _, wh = webhooks(objects)["/validate-node"]
    conds = wh["matchConditions"]
    assert len(conds) == 1
    env = celpy.Environment()
    program = env.program(env.compile(conds[0]["expression"]))

    def matches(old: dict, new: dict) -> bool:
        return bool(program.evaluate({"object": json_to_cel(new), "oldObject": json_to_cel(old)}))

    return matches


def node(unschedulable=None, **extra) -> dict:
    spec = {} if unschedulable is None else {"unschedulable": unschedulable}
    spec.update(extra)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": spec}


def test_node_webhook_only_receives_unschedulable_changes(render):
    matches = node_condition(render())
    # cordon / uncordon, with the field present or absent (absent means schedulable)
    assert matches(node(), node(True))
    assert matches(node(False), node(True))
    assert matches(node(True), node(False))
    assert matches(node(True), node())
    # anything else is not sent
    assert not matches(node(), node())
    assert not matches(node(True), node(True))
    assert not matches(node(False), node())
    assert not matches(node(), node(podCIDR="10.0.0.0/24"))
    no_spec = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    assert not matches(no_spec, no_spec)
    assert matches(no_spec, node(True))


def test_recorded_requests_are_routed_like_the_recording(render):
    """Every AdmissionReview the recording apiserver sent (tests/fixtures/apiserver) is
    matched by the chart's rules of the endpoint that received it, and node updates pass
    the matchConditions."""
    fixtures = shared_fixtures()
    objects = render()
    hooks = webhooks(objects)
    matches_node = node_condition(objects)
    files = sorted((fixtures / "apiserver").glob("*.json"))
    assert files
    for f in files:
        endpoint = next("/" + e for e in ("validate-node", "validate", "mutate") if f.stem.endswith("-" + e))
        req = json.loads(f.read_text())["request"]
        res = req["resource"]
        resource = res["resource"] + (f"/{req['subResource']}" if req.get("subResource") else "")
        key = (res["group"], res["version"], resource, req["operation"])
        assert key in EXPECTED_RULES[endpoint], f"{f.name}: {key} would not reach {endpoint}"
        _, wh = hooks[endpoint]
        assert key in expand(wh["rules"]), f.name
        if endpoint == "/validate-node":
            assert matches_node(req["oldObject"], req["object"]), f"{f.name}: matchConditions would drop it"


def test_byo_values_still_register_every_endpoint(render):
    assert set(webhooks(render(VARIANTS["byo-cert"]))) == set(EXPECTED_RULES)
