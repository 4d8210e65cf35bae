#!/usr/bin/env bash
# Renders the Helm chart offline to one multi-document YAML file (CRDs first, like
# `helm template --include-crds`), through the pinned helm-python-sdk: no helm binary, no
# cluster. Release `nm`, namespace `node-maintenance` unless told otherwise.
#
#   hack/render-chart.sh OUTFILE [--namespace NS] [--release NAME] [--skip-crds]
#                        [-f values.yaml] [--set k.k=v]... [--set-string k.k=v]...
#   hack/render-chart.sh /tmp/nm.yaml --set tls.certManager.enabled=false \
#     --set tls.existingSecret=nm-tls --set tls.caBundle="$(base64 -w0 < ca.crt)"
#
# The virtualenv is hack/chart-venv.sh's (shared with hack/test-chart.sh). OUTFILE `-` is
# stdout. Used by tests/envtest_chart.rs.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 OUTFILE [--namespace NS] [--set k=v ...]" >&2
  exit 2
fi
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$("${repo_root}/hack/chart-venv.sh")"
PYTHONDONTWRITEBYTECODE=1 exec "${venv}/bin/python" "${repo_root}/hack/render_chart.py" "$@"
