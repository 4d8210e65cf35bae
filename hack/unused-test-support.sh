#!/usr/bin/env bash
# Lists the helpers of tests/support that no test or bench uses. Every test binary compiles
# tests/support and uses a part of it, so tests/support allows dead code; this script checks
# (no codegen, no link: a few hundred MB instead of a second set of test binaries)
# every target without that allow (cfg nm_unused_support, in its own target directory) and
# prints the items that EVERY target including them reports unused. Exit 1 when it finds any.
# Usage: hack/unused-test-support.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/unused-support"
# cargo's progress goes to a file, shown (without the Compiling lines) only when the build
# fails: a failed build reports no warnings, so "0 unused" alone would hide it.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
RUSTFLAGS="--cfg nm_unused_support" cargo check --all-targets --message-format=json 2>"$log" | python3 hack/unused_test_support.py
status=("${PIPESTATUS[@]}")
set -e
if [ "${status[0]}" != 0 ]; then
  echo "hack/unused-test-support.sh: the build failed (cargo exit ${status[0]}):" >&2
  grep -vE '^ +(Compiling|Checking|Fresh|Downloaded|Downloading) ' "$log" | tail -60 >&2
  exit "${status[0]}"
fi
exit "${status[1]}"
