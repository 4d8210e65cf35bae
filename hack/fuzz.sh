#!/usr/bin/env bash
# The long hardening runs, by hand (CI runs the short ones inside `cargo test`):
#   1. the admission fuzz harness (tests/hardening_fuzz.rs) with CASES cases per property
#      (default 100000, about 4 x 100000 executions; CI runs 300 per property);
#   2. certificate rotation and graceful shutdown under load for SECS seconds (default 60;
#      CI runs 10 and 4).
# Usage: hack/fuzz.sh [CASES] [SECS]. Prints the executions; a failure is shrunk by proptest,
# saved in tests/hardening_fuzz.proptest-regressions and replayed first on the next run.
# Record the numbers in docs/reliability.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cases="${1:-100000}"
secs="${2:-60}"
export CARGO_TERM_COLOR=never

echo "== admission fuzzing: ${cases} cases per property (release build)"
started=$(date +%s)
NM_FUZZ_CASES="$cases" cargo test --release --test hardening_fuzz -- --nocapture --test-threads 2 2>&1 \
  | grep -E 'fuzz [a-z_]+: |test result|panicked|minimal failing' || { echo "fuzzing FAILED"; exit 1; }
echo "   took $(( $(date +%s) - started )) s"

echo "== certificate rotation and graceful shutdown under load: ${secs} s each"
NM_HARDENING_SECS="$secs" cargo test --release --test hardening_server -- --nocapture --test-threads 1 \
  rotation shutdown 2>&1 | grep -E '(rotation|shutdown): |test result|panicked' || { echo "load runs FAILED"; exit 1; }
