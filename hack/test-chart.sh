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
# Idempotent: the virtualenv lives in target/chart-venv (hack/chart-venv.sh) and is
# reinstalled only when tests/chart/requirements.txt changes. Exits with pytest's status;
# its summary line is last.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"
venv="$("${repo_root}/hack/chart-venv.sh")"

if [[ "${SKIP_CARGO_BUILD:-0}" != "1" ]]; then
  echo "test-chart: cargo build -q (for node-maintenance rbac / crd)" >&2
  cargo build -q --bin node-maintenance
fi

export PATH="${venv}/bin:${PATH}"
export PYTHONDONTWRITEBYTECODE=1
status=0
"${venv}/bin/python" -m pytest "${repo_root}/tests/chart" -q -rs -p no:cacheprovider "$@" || status=$?
exit "${status}"
