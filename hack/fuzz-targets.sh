#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer on the nightly toolchain; docs/reliability.md,
# "Coverage-guided fuzzing (cargo-fuzz)"): installs cargo-fuzz when missing, builds every
# target of hack/fuzz, and runs each in turn on one job for SECONDS (default 15), starting
# from its committed seeds (hack/fuzz/seeds/<target>). Fails on the first crash, leak or
# timeout; libFuzzer leaves the input in hack/fuzz/artifacts/<target>/ and prints how to
# replay it. What a run adds to the corpus goes to hack/fuzz/corpus/<target>/, which git
# ignores.
#
# Usage: hack/fuzz-targets.sh [SECONDS] [TARGET...]
#   NM_FUZZ_RUNS=N: run each target for N executions instead of SECONDS (the long run).
#   NM_FUZZ_TIMEOUT=S: seconds one input may take before it counts as a hang (default 10).
#     libFuzzer measures wall-clock time: a long run at nice 19 beside other work can be
#     starved past 10 s on one input and report a false timeout; such runs use 120.
# Prints per target: executions, exec/s, libFuzzer's final coverage (cov: edges, ft:
# features) and the corpus size.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs="${1:-15}"
shift || true
export CARGO_TERM_COLOR=never
fuzz_dir=hack/fuzz
# No address sanitizer: the code under test is safe Rust (panics, overflows and runaway
# loops are what can go wrong), and ASan would halve the executions. Debug assertions on:
# an integer overflow is a crash.
build=(--fuzz-dir "$fuzz_dir" --sanitizer none --debug-assertions)

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzzing needs the nightly toolchain (rustup toolchain install nightly)" >&2
  exit 1
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked

started=$(date +%s)
cargo +nightly fuzz build "${build[@]}"
echo "== built in $(( $(date +%s) - started )) s"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir "$fuzz_dir")
fi
if [ -n "${NM_FUZZ_RUNS:-}" ]; then
  bound=(-runs="$NM_FUZZ_RUNS")
else
  bound=(-max_total_time="$secs")
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in "${targets[@]}"; do
  mkdir -p "$fuzz_dir/corpus/$t" "$fuzz_dir/seeds/$t"
  echo "== $t"
  # -timeout: one input taking that long is a hang; -rss_limit_mb: growth past 2 GiB is a leak.
  if ! cargo +nightly fuzz run "${build[@]}" "$t" "$fuzz_dir/corpus/$t" "$fuzz_dir/seeds/$t" -- \
    "${bound[@]}" -timeout="${NM_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    grep -a -A6 -E 'panicked|ERROR: libFuzzer' "$log" | head -n 40 || tail -n 40 "$log"
    grep -a -E '^(Reproduce|Minimize)|cargo fuzz (run|tmin)' "$log" || true
    echo "== $t FAILED (input in $fuzz_dir/artifacts/$t/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
  echo "   $t: $runs executions, $speed exec/s, cov: $cov ft: $ft, corpus $corp"
done
echo "== fuzzing took $(( $(date +%s) - started )) s"
