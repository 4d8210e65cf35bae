#!/usr/bin/env bash
# The whole test suite: every Rust test (unit, integration over real HTTPS, the real-apiserver
# tier, doc tests), then the chart, image and hack-script tests. Usage: hack/test-all.sh
#
# First hack/setup-test-deps.sh checks (and as root installs) what the suite needs, and stops
# before any build when something cannot be had. The real-apiserver tier (tests/envtest_*.rs)
# and the Prometheus tests are required (NM_ENVTEST_REQUIRED=1): a missing asset fails them
# instead of skipping them. NM_SKIP_ENVTEST=1 is the one way to leave that tier out (it is
# then neither built nor run, and etcd and Prometheus are not needed): the fast tiers alone.
#
# The last line counts the real-apiserver and Prometheus tests that passed, read from the
# output of the run (cargo test's `test ... ok` lines per tests/envtest_*.rs binary and of
# tests/prometheus_alerts.rs, not counting the unit tests of tests/support/ that each binary
# also runs; pytest's JUnit XML for tests/chart/test_monitoring.py). Logs: target/test-all/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo_root="$(pwd)"
target_dir="${CARGO_TARGET_DIR:-${repo_root}/target}"
case "${target_dir}" in
  /*) ;;
  *) target_dir="${repo_root}/${target_dir}" ;;
esac

bash hack/setup-test-deps.sh

if [[ "${NM_SKIP_ENVTEST:-0}" == "1" ]]; then
  skip=1
  unset NM_ENVTEST_REQUIRED
  # Every target but the ones that start a control plane: tests/envtest_*.rs and the
  # benches whose smoke run does (scale, soak).
  targets=(--lib --bins --examples)
  for f in tests/*.rs; do
    name="$(basename "${f}" .rs)"
    [[ "${name}" == envtest_* ]] || targets+=(--test "${name}")
  done
  for f in benches/*.rs; do
    grep -q 'Envtest::start' "${f}" || targets+=(--bench "$(basename "${f}" .rs)")
  done
  echo "test-all: NM_SKIP_ENVTEST=1: the real-apiserver tier (tests/envtest_*.rs, benches scale and soak) is left out" >&2
else
  skip=0
  export NM_ENVTEST_REQUIRED=1
  targets=(--all-targets)
fi

logs="${target_dir}/test-all"
mkdir -p "${logs}"
cargo_log="${logs}/cargo-test.log"
junit="${logs}/chart-junit.xml"
: >"${cargo_log}"
rm -f "${junit}"

# cargo's stderr ("Running tests/x.rs") and the tests' stdout in one stream, in order, shown
# and kept for the count.
logged() {
  "$@" 2>&1 | tee -a "${cargo_log}"
  return "${PIPESTATUS[0]}"
}

status=0
failed=""
logged cargo test "${targets[@]}" || { status=$?; failed="cargo test ${targets[*]}"; }
if [[ "${status}" == 0 ]]; then
  logged cargo test --doc || { status=$?; failed="cargo test --doc"; }
fi
if [[ "${status}" == 0 ]]; then
  SKIP_CARGO_BUILD=1 bash hack/test-chart.sh --junitxml="${junit}" || { status=$?; failed="hack/test-chart.sh"; }
fi

# Tests that passed: per cargo test binary, its `test NAME ... ok` lines, but for the unit
# tests of tests/support/ (`test support::...`), which every binary that uses it runs again.
read -r real rust_prometheus < <(awk '
  /^ +Running / { section = $2 }
  /^ +Doc-tests / { section = "" }
  {
    line = $0
    while (match(line, /test [^ ]+ \.\.\. ok/)) {
      name = substr(line, RSTART + 5, RLENGTH - 5)
      if (name !~ /^support::/) {
        if (section ~ /^tests\/envtest_.*\.rs$/) real++
        if (section == "tests/envtest_monitoring.rs" || section == "tests/prometheus_alerts.rs") prom++
      }
      line = substr(line, RSTART + RLENGTH)
    }
  }
  END { print real + 0, prom + 0 }
' "${cargo_log}")
# ... and the pytest tests of tests/chart/test_monitoring.py with no failure, error or skip.
chart_prometheus="$(python3 - "${junit}" <<'EOF'
import sys
import xml.etree.ElementTree as ET
try:
    cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
except (OSError, ET.ParseError):
    cases = []
print(sum(1 for c in cases
          if "test_monitoring" in c.get("classname", "").split(".")
          and not any(child.tag in ("failure", "error", "skipped") for child in c)))
EOF
)"
prometheus=$((rust_prometheus + chart_prometheus))

if [[ "${status}" == 0 && "${skip}" == 0 && ("${real}" == 0 || "${rust_prometheus}" == 0) ]]; then
  echo "test-all: the real-apiserver tier was required but ${real} of its tests and ${rust_prometheus} of tests/envtest_monitoring.rs and tests/prometheus_alerts.rs passed" >&2
  status=1
  failed="the real-apiserver tier"
fi

if [[ "${status}" == 0 ]]; then
  outcome="all passed"
else
  outcome="FAILED in ${failed} (exit ${status}); so far"
fi
if [[ "${skip}" == 1 ]]; then
  tier="real-apiserver tier left out (NM_SKIP_ENVTEST=1): 0 real-apiserver tests"
else
  tier="${real} real-apiserver tests (tests/envtest_*.rs)"
fi
echo "test-all: ${outcome}; ${tier} and ${prometheus} Prometheus tests (${rust_prometheus} in tests/envtest_monitoring.rs and tests/prometheus_alerts.rs, ${chart_prometheus} in tests/chart/test_monitoring.py) ran and passed"
exit "${status}"
