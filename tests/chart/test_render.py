"""The rendered manifests (SPEC 3 and 5): labels, workload hardening, Service, TLS."""

from __future__ import annotations

import re

import pytest

from conftest import (
    BYO_CA_BUNDLE,
    BYO_SECRET,
    NAMESPACE,
    RECOMMENDED_LABELS,
    RELEASE,
    VARIANTS,
    container,
    find,
    find_all,
)

NAMESPACED_KINDS = {
    "Deployment",
    "Service",
    "ServiceAccount",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Issuer",
    "Certificate",
    "ServiceMonitor",
    "PrometheusRule",
    "ConfigMap",
}
CLUSTER_KINDS = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def arg_value(args: list[str], flag: str) -> str | None:
    """The value of `--flag=value` or `--flag value` in an args list."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


# ---------------------------------------------------------------- every object


def test_every_object_parses_and_is_a_known_kind(variant):
    name, _, objects = variant
    assert objects, f"{name}: nothing rendered"
    for o in objects:
        assert {"apiVersion", "kind", "metadata"} <= set(o), o.get("__template__")
        assert o["kind"] in NAMESPACED_KINDS | CLUSTER_KINDS, o["kind"]
        assert DNS1123_SUBDOMAIN.match(o["metadata"]["name"]) and len(o["metadata"]["name"]) <= 253


def test_every_object_has_the_recommended_labels(variant):
    name, values, objects = variant
    for o in objects:
        labels = o["metadata"].get("labels") or {}
        missing = [k for k in RECOMMENDED_LABELS if not labels.get(k)]
        assert not missing, f"{name}: {o['kind']}/{o['metadata']['name']} lacks {missing}"
        assert labels["app.kubernetes.io/name"] == "node-maintenance"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/part-of"] == "node-maintenance"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"].startswith("node-maintenance-")
        for k, v in (values.get("commonLabels") or {}).items():
            assert labels.get(k) == v
        for v in labels.values():
            assert isinstance(v, str) and len(v) <= 63


def test_pod_template_has_the_recommended_labels(variant):
    _, _, objects = variant
    labels = find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) for k in RECOMMENDED_LABELS), labels


def test_namespaced_objects_are_in_the_release_namespace(variant):
    _, _, objects = variant
    for o in objects:
        if o["kind"] in NAMESPACED_KINDS:
            assert o["metadata"].get("namespace") == NAMESPACE, f"{o['kind']}/{o['metadata']['name']}"
        else:
            assert "namespace" not in o["metadata"], f"{o['kind']} is cluster-scoped"


def test_no_object_is_rendered_twice(variant):
    _, _, objects = variant
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys))


def test_default_render_has_the_expected_objects(render):
    kinds = sorted(o["kind"] for o in render())
    assert kinds == sorted(
        [
            "Certificate",
            "Certificate",
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "Issuer",
            "Issuer",
            "MutatingWebhookConfiguration",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
            "ValidatingWebhookConfiguration",
        ]
    )


# ---------------------------------------------------------------- Deployment


def test_deployment_is_highly_available(render):
    objects = render()
    dep = find(objects, "Deployment")
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = spec["template"]["spec"]
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    keys = {c["topologyKey"] for c in pod["topologySpreadConstraints"]}
    assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert all(c["labelSelector"]["matchLabels"] == selector for c in pod["topologySpreadConstraints"])
    pdb = find(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert pdb["spec"]["maxUnavailable"] == 1


def test_pod_is_hardened(render):
    objects = render()
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True
    assert psc["runAsUser"] != 0 and psc["runAsGroup"] != 0
    assert psc["seccompProfile"]["type"] == "RuntimeDefault"
    sc = container(objects)["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["runAsNonRoot"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert "add" not in sc["capabilities"]
    assert sc["seccompProfile"]["type"] == "RuntimeDefault"
    assert "privileged" not in sc or sc["privileged"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    res = container(objects)["resources"]
    assert res["requests"]["cpu"] and res["requests"]["memory"]
    assert res["limits"]["memory"]


def test_probes_use_https_on_the_webhook_port(render):
    c = container(render())
    https = next(p for p in c["ports"] if p["name"] == "https")
    assert https["containerPort"] == 8443
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert get["path"] == path
        assert get["scheme"] == "HTTPS"
        assert get["port"] in ("https", 8443)


def test_container_args_follow_the_values(variant):
    name, values, objects = variant
    c = container(objects)
    args = c["args"]
    assert args[0] == "serve"
    assert arg_value(args, "--tls-cert-file") == "/tls/tls.crt"
    assert arg_value(args, "--tls-key-file") == "/tls/tls.key"
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert arg_value(args, "--addr") == f"0.0.0.0:{ports['https']}"
    assert arg_value(args, "--metrics-addr") == f"0.0.0.0:{ports['metrics']}"
    assert ports == {"https": 8443, "metrics": 8080}
    assert arg_value(args, "--lease-namespace") == NAMESPACE
    lease = (values.get("controller") or {}).get("leaseName") or f"{RELEASE}-node-maintenance-controller"
    assert arg_value(args, "--lease-name") == lease
    controller_enabled = (values.get("controller") or {}).get("enabled", True)
    assert ("--controller=false" in args) == (not controller_enabled), name
    for extra in values.get("extraArgs", []):
        assert extra in args
    assert not any("{{" in a for a in args), "an arg was not rendered"
    # The TLS files come from the mounted Secret.
    mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/tls")
    assert mount["readOnly"] is True


def test_log_settings_reach_the_container(render):
    env = {e["name"]: e.get("value") for e in container(render({"logLevel": "debug", "logFormat": "json"}))["env"]}
    assert env["RUST_LOG"] == "debug"
    assert env["NM_LOG_FORMAT"] == "json"


def test_image_defaults_to_the_app_version(chart, render):
    c = container(render())
    assert c["image"] == f"node-maintenance:{chart.metadata['appVersion']}"
    c = container(render({"image": {"repository": "registry.example/nm", "tag": "dev"}}))
    assert c["image"] == "registry.example/nm:dev"


def test_only_the_webhook_port_and_metrics_port_are_exposed(render):
    c = container(render())
    assert sorted(p["name"] for p in c["ports"]) == ["https", "metrics"]
    assert all(p.get("protocol", "TCP") == "TCP" for p in c["ports"])


def test_service_account_is_used_by_the_pods(variant):
    _, _, objects = variant
    sa = find(objects, "ServiceAccount")
    assert find(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == sa["metadata"]["name"]


# ---------------------------------------------------------------- Service


def test_service_target_ports_match_the_container_ports(variant):
    _, _, objects = variant
    svc = find(objects, "Service")
    c = container(objects)
    by_name = {p["name"]: p["containerPort"] for p in c["ports"]}
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    assert ports["https"]["port"] == 443
    assert ports["metrics"]["port"] == by_name["metrics"] == 8080
    for p in svc["spec"]["ports"]:
        target = p["targetPort"]
        assert target in by_name or target in by_name.values(), f"targetPort {target} is no container port"
    assert ports["https"]["targetPort"] in ("https", by_name["https"])
    # The Service selects exactly the Deployment's pods.
    dep = find(objects, "Deployment")
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]


# ---------------------------------------------------------------- TLS


def test_cert_manager_chain_and_ca_injection(render):
    objects = render()
    svc = find(objects, "Service")["metadata"]["name"]
    issuers = {o["metadata"]["name"]: o for o in find_all(objects, "Issuer")}
    certs = {o["metadata"]["name"]: o for o in find_all(objects, "Certificate")}
    selfsigned = [n for n, o in issuers.items() if "selfSigned" in o["spec"]]
    ca_issuers = [n for n, o in issuers.items() if "ca" in o["spec"]]
    assert len(selfsigned) == 1 and len(ca_issuers) == 1
    ca_certs = [o for o in certs.values() if o["spec"].get("isCA")]
    assert len(ca_certs) == 1
    ca_cert = ca_certs[0]
    # self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate
    assert ca_cert["spec"]["issuerRef"]["name"] == selfsigned[0]
    assert issuers[ca_issuers[0]]["spec"]["ca"]["secretName"] == ca_cert["spec"]["secretName"]
    serving = [o for o in certs.values() if not o["spec"].get("isCA")]
    assert len(serving) == 1
    serving = serving[0]
    assert serving["spec"]["issuerRef"]["name"] == ca_issuers[0]
    assert serving["spec"]["issuerRef"].get("kind", "Issuer") == "Issuer"
    assert set(serving["spec"]["dnsNames"]) >= {f"{svc}.{NAMESPACE}.svc", f"{svc}.{NAMESPACE}.svc.cluster.local"}
    assert "server auth" in serving["spec"]["usages"]
    # The pod mounts the serving Secret.
    vols = {v["name"]: v for v in find(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert vols["tls"]["secret"]["secretName"] == serving["spec"]["secretName"]
    # cainjector fills caBundle of both configurations from the serving Certificate.
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        cfg = find(objects, kind)
        ann = cfg["metadata"].get("annotations") or {}
        assert ann.get("cert-manager.io/inject-ca-from") == f"{NAMESPACE}/{serving['metadata']['name']}"
        for wh in cfg["webhooks"]:
            assert "caBundle" not in wh["clientConfig"]


def test_bring_your_own_certificate(render):
    objects = render(VARIANTS["byo-cert"])
    assert not find_all(objects, "Issuer") and not find_all(objects, "Certificate")
    vols = {v["name"]: v for v in find(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert vols["tls"]["secret"]["secretName"] == BYO_SECRET
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        cfg = find(objects, kind)
        assert "cert-manager.io/inject-ca-from" not in (cfg["metadata"].get("annotations") or {})
        for wh in cfg["webhooks"]:
            assert wh["clientConfig"]["caBundle"] == BYO_CA_BUNDLE


def test_fullname_is_short_enough_for_every_derived_name(render):
    long_release = "a-very-long-release-name-that-goes-on-and-on-and-on-forever"
    objects = render({}, name=long_release)
    for o in objects:
        assert len(o["metadata"]["name"]) <= 63, o["metadata"]["name"]
        assert DNS1123_LABEL.match(o["metadata"]["name"].split(".")[0])


# ---------------------------------------------------------------- options


def test_service_monitor_is_off_by_default_and_scrapes_metrics_when_on(render):
    assert not find_all(render(), "ServiceMonitor")
    objects = render(VARIANTS["all-options"])
    sm = find(objects, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prometheus"
    ep = sm["spec"]["endpoints"][0]
    assert ep["port"] == "metrics" and ep["path"] == "/metrics" and ep.get("scheme", "http") == "http"
    svc = find(objects, "Service")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert "metrics" in {p["name"] for p in svc["spec"]["ports"]}


def prometheus_ca_volume(objects: list[dict]) -> dict | None:
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    volumes = [v for v in pod["volumes"] if v["name"] == "prometheus-ca"]
    mounts = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "prometheus-ca"]
    assert len(volumes) == len(mounts) <= 1
    if mounts:
        assert mounts[0]["mountPath"] == "/prometheus-ca" and mounts[0]["readOnly"] is True
    return volumes[0] if volumes else None


def test_no_prometheus_is_read_by_default(render):
    objects = render()
    assert not [a for a in container(objects)["args"] if a.startswith("--prometheus-")]
    assert prometheus_ca_volume(objects) is None


@pytest.mark.parametrize("source", ["secretName", "configMapName"])
def test_prometheus_values_become_the_reader_flags_and_the_ca_is_mounted(render, source):
    url = "https://prometheus.monitoring.svc:9091/prom"
    objects = render({"prometheus": {"url": url, "timeout": "2s", "ca": {source: "prom-ca", "key": "bundle.pem"}}})
    args = container(objects)["args"]
    assert arg_value(args, "--prometheus-url") == url
    assert arg_value(args, "--prometheus-timeout") == "2s"
    assert arg_value(args, "--prometheus-ca-file") == "/prometheus-ca/bundle.pem"
    volume = prometheus_ca_volume(objects)
    if source == "secretName":
        assert volume["secret"] == {"secretName": "prom-ca"}
    else:
        assert volume["configMap"] == {"name": "prom-ca"}
    # Plain http: the URL and the default timeout, no CA.
    args = container(render({"prometheus": {"url": "http://prometheus:9090"}}))["args"]
    assert arg_value(args, "--prometheus-url") == "http://prometheus:9090"
    assert arg_value(args, "--prometheus-timeout") == "5s"
    assert arg_value(args, "--prometheus-ca-file") is None


def test_webhook_only_mode_has_no_lease_rbac(render):
    objects = render(VARIANTS["webhook-only"])
    assert not find_all(objects, "Role") and not find_all(objects, "RoleBinding")
    assert "--controller=false" in container(objects)["args"]


def test_rbac_can_be_left_to_the_user(render):
    objects = render({"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "given"}})
    assert not [o for o in objects if o["kind"] in {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}]
    assert not find_all(objects, "ServiceAccount")
    assert find(objects, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "given"


def test_notes_explain_how_to_create_a_first_maintenance(render_raw):
    notes = next(v for k, v in render_raw().items() if k.endswith("NOTES.txt"))
    assert "kind: NodeMaintenance" in notes
    assert "apiVersion: nodemaintenance.k8s.io/v1alpha1" in notes
    assert "kubectl create" in notes and '"stage":"Drain"' in notes
    assert "rollout status" in notes


@pytest.mark.parametrize("template", ["deployment.yaml", "webhooks.yaml", "rbac.yaml", "service.yaml"])
def test_templates_render_without_leftover_template_syntax(render_raw, template):
    text = next(v for k, v in render_raw().items() if k.endswith("/" + template))
    assert "{{" not in text and "}}" not in text


def test_every_chart_flag_is_accepted_by_serve(render):
    """The args the chart passes exist in `node-maintenance serve --help` (else the pods
    crash-loop on 'unexpected argument'). Uses the binary hack/test-chart.sh builds."""
    import subprocess

    from conftest import binary_path

    binary = binary_path()
    assert binary.is_file(), f"{binary} is missing: run `cargo build` first (hack/test-chart.sh does)"
    help_text = subprocess.run([str(binary), "serve", "--help"], capture_output=True, text=True, timeout=60).stdout
    known = set(re.findall(r"--[a-z0-9][a-z0-9-]*", help_text))
    flags = set()
    for values in VARIANTS.values():
        for a in container(render(values))["args"][1:]:
            if a.startswith("--"):
                flags.add(a.split("=", 1)[0])
    missing = sorted(flags - known)
    assert not missing, f"`node-maintenance serve` does not accept {missing}"
