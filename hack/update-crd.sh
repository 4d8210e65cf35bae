#!/usr/bin/env bash
# Regenerate the chart's CRD from the Rust types (SPEC 2): the file is committed, and a
# test fails when it drifts from `node-maintenance crd`.
#
#   hack/update-crd.sh          # rewrite charts/node-maintenance/crds/*.yaml
#   hack/update-crd.sh --check  # exit 1 (and show the diff) if a committed file is stale
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"
tmp="$(mktemp)"
trap 'rm -f "${tmp}"' EXIT
stale=0
for pair in NodeMaintenance:nodemaintenances NodeDisruptionBudget:nodedisruptionbudgets; do
  kind="${pair%%:*}"
  crd="${repo_root}/charts/node-maintenance/crds/${pair##*:}.yaml"
  cargo run -q -- crd --kind "${kind}" >"${tmp}"
  if [[ "${1:-}" == "--check" ]]; then
    if ! diff -u "${crd}" "${tmp}"; then
      echo "error: ${crd#"${repo_root}/"} is stale: run hack/update-crd.sh" >&2
      stale=1
    fi
    continue
  fi
  mkdir -p "$(dirname "${crd}")"
  cp "${tmp}" "${crd}"
  echo "wrote ${crd#"${repo_root}/"}"
done
if [[ "${1:-}" == "--check" ]]; then
  [[ "${stale}" == 0 ]] || exit 1
  echo "CRDs up to date"
fi
