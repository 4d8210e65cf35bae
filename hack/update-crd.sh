#!/usr/bin/env bash
# Regenerate the chart's CRD from the Rust types (SPEC 2): the file is committed, and a
# test fails when it drifts from `node-maintenance crd`.
#
#   hack/update-crd.sh          # rewrite charts/node-maintenance/crds/nodemaintenances.yaml
#   hack/update-crd.sh --check  # exit 1 (and show the diff) if the committed file is stale
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
crd="${repo_root}/charts/node-maintenance/crds/nodemaintenances.yaml"
cd "${repo_root}"

tmp="$(mktemp)"
trap 'rm -f "${tmp}"' EXIT
cargo run -q -- crd >"${tmp}"

if [[ "${1:-}" == "--check" ]]; then
  if ! diff -u "${crd}" "${tmp}"; then
    echo "error: ${crd#"${repo_root}/"} is stale: run hack/update-crd.sh" >&2
    exit 1
  fi
  echo "CRD up to date"
  exit 0
fi

mkdir -p "$(dirname "${crd}")"
cp "${tmp}" "${crd}"
echo "wrote ${crd#"${repo_root}/"}"
