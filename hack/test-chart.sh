#!/usr/bin/env bash
# Chart, image and hack-script tests (tests/chart/): lint the Helm chart strictly, render it
# with default values and with a bring-your-own certificate, and check the manifests
# (labels, webhook rules, Service ports, RBAC equal to `node-maintenance rbac`, CRD), the
# Dockerfile and the hack scripts. No helm binary, cluster or Docker engine is needed:
# rendering goes through the pinned helm-python-sdk from PyPI.
#
#   hack/test-chart.sh                 # extra arguments go to pytest, e.g. -k webhooks
#   SKIP_CARGO_BUILD=1 hack/test-chart.sh   # reuse target/debug/node-maintenance as it is
#
# Idempotent: the virtualenv lives in target/chart-venv and is reinstalled only when
# tests/chart/requirements.txt changes. Exits with pytest's status; its summary line is last.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"
target_dir="${CARGO_TARGET_DIR:-${repo_root}/target}"
venv="${target_dir}/chart-venv"
requirements="${repo_root}/tests/chart/requirements.txt"
stamp="${venv}/.requirements.sha256"
want="$(sha256sum "${requirements}" | cut -d' ' -f1)"

if [[ ! -x "${venv}/bin/python" || ! -f "${stamp}" || "$(cat "${stamp}")" != "${want}" ]]; then
  echo "test-chart: installing pinned test packages into ${venv#"${repo_root}/"}" >&2
  rm -rf "${venv}"
  python3 -m venv "${venv}"
  "${venv}/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "${requirements}"
  echo "${want}" >"${stamp}"
fi

if [[ "${SKIP_CARGO_BUILD:-0}" != "1" ]]; then
  echo "test-chart: cargo build -q (for node-maintenance rbac / crd)" >&2
  cargo build -q --bin node-maintenance
fi

export PATH="${venv}/bin:${PATH}"
export PYTHONDONTWRITEBYTECODE=1
status=0
"${venv}/bin/python" -m pytest "${repo_root}/tests/chart" -q -rs -p no:cacheprovider "$@" || status=$?
exit "${status}"
