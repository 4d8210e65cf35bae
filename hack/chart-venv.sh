#!/usr/bin/env bash
# The chart tooling's Python virtualenv (helm-python-sdk, pytest, ...), shared by
# hack/test-chart.sh and hack/render-chart.sh: creates it, or reuses it as it is, and prints
# its path on stdout.
#
#   venv="$(hack/chart-venv.sh)"    # then "${venv}/bin/python"
#
# Idempotent: the virtualenv lives in ${CARGO_TARGET_DIR:-target}/chart-venv and is
# reinstalled only when tests/chart/requirements.txt changes (its sha256 is stamped inside).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-${repo_root}/target}"
case "${target_dir}" in
  /*) ;;
  *) target_dir="${repo_root}/${target_dir}" ;;
esac
venv="${target_dir}/chart-venv"
requirements="${repo_root}/tests/chart/requirements.txt"
stamp="${venv}/.requirements.sha256"
want="$(sha256sum "${requirements}" | cut -d' ' -f1)"

# Tests render the chart concurrently: one installer at a time, the others wait and reuse.
mkdir -p "${target_dir}"
exec 9>"${target_dir}/chart-venv.lock"
flock 9

if [[ ! -x "${venv}/bin/python" || ! -f "${stamp}" || "$(cat "${stamp}")" != "${want}" ]]; then
  echo "chart-venv: installing pinned chart packages into ${venv#"${repo_root}/"}" >&2
  rm -rf "${venv}"
  python3 -m venv "${venv}"
  "${venv}/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "${requirements}" >&2
  echo "${want}" >"${stamp}"
fi

echo "${venv}"
