#!/usr/bin/env bash
# Load test of the admission webhook, side by side with a bare axum + tokio-rustls server that
# answers a fixed AdmissionReview (examples/baseline_server.rs) and with the "kube-rs floor"
# on the same transport, which decodes each review with kube-core's typed
# AdmissionReview<DynamicObject> and answers allowed: true (examples/kube_floor_server.rs):
# docs/benchmarks.md.
#
#   hack/load.sh                      # about 3 minutes once the release build is cached
#   DURATION=20 ROUNDS=2 hack/load.sh # longer runs; the median round is reported
#
# Builds release, starts `node-maintenance serve --standalone` (nodes from examples/nodes.yaml,
# development certificates in a temporary directory), the baseline and the floor on the same
# certificate, then drives each with wrk (HTTPS, keep-alive, 2 threads; 1 thread at 1
# connection, which wrk requires) at 1, 16 and 64 connections, interleaved so that each
# webhook figure has a baseline and a floor figure measured seconds apart. Prints throughput,
# p50, p99 and p99.9 latency, server CPU per request, the ratio to the baseline and, per round,
# the ratio to the floor of the same round; reports the webhook's RSS under load from /proc.
# Raw results: target/load/<timestamp>/.
#
# Environment:
#   DURATION     seconds per measured run (default 10)
#   WARMUP       seconds of unmeasured load before each run (default 2)
#   CONCURRENCY  connection counts (default "1 16 64")
#   THREADS      wrk threads (default 2)
#   ROUNDS       repetitions of the whole matrix; the median is reported (default 1)
#   SCENARIOS    subset of: baseline floor validate mutate denied (default all)
#   RUST_LOG     the webhook's log filter (default info, as deployed)
#   NO_BUILD=1   use the binaries already built
#   SERVER_BIN, BASELINE_BIN, FLOOR_BIN  binaries to run (default: target/release/...), e.g.
#                to compare two builds of the webhook
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONCURRENCY=${CONCURRENCY:-"1 16 64"}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-1}
SCENARIOS=${SCENARIOS:-"baseline floor validate mutate denied"}
export RUST_LOG=${RUST_LOG:-info}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
FIXTURES=tests/fixtures/apiserver

if ! command -v wrk >/dev/null; then
    echo "== installing wrk (Debian package)"
    if [ "$(id -u)" -eq 0 ]; then
        apt-get update -qq && apt-get install -y -qq wrk >/dev/null
    else
        sudo apt-get update -qq && sudo apt-get install -y -qq wrk >/dev/null
    fi
fi
for tool in curl python3; do
    command -v "$tool" >/dev/null || { echo "hack/load.sh needs $tool" >&2; exit 2; }
done

if [ "${NO_BUILD:-0}" != "1" ]; then
    echo "== cargo build --release (node-maintenance, examples/baseline_server, examples/kube_floor_server)"
    cargo build --release --quiet --bin node-maintenance --example baseline_server --example kube_floor_server
fi
SERVER_BIN=${SERVER_BIN:-$TARGET_DIR/release/node-maintenance}
BASELINE_BIN=${BASELINE_BIN:-$TARGET_DIR/release/examples/baseline_server}
FLOOR_BIN=${FLOOR_BIN:-$TARGET_DIR/release/examples/kube_floor_server}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=${OUT_DIR:-target/load/$STAMP}
mkdir -p "$OUT"
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
METRICS_PORT=$(free_port)
BASELINE_PORT=$(free_port)
FLOOR_PORT=$(free_port)

echo "== starting the webhook (standalone, RUST_LOG=$RUST_LOG) on 127.0.0.1:$PORT"
"$SERVER_BIN" serve --standalone --nodes-file examples/nodes.yaml --addr "127.0.0.1:$PORT" \
    --metrics-addr "127.0.0.1:$METRICS_PORT" --cert-dir "$TMP/certs" >"$OUT/server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
CA=$TMP/certs/ca.crt
for _ in $(seq 100); do
    curl -sf --cacert "$CA" "https://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/server.log"; exit 1; }
    sleep 0.1
done
curl -sf --cacert "$CA" "https://127.0.0.1:$PORT/readyz" >/dev/null

# start_reference NAME BIN PORT: starts a reference server on the webhook's certificate and
# waits for its /healthz; prints its pid.
start_reference() {
    "$2" "127.0.0.1:$3" "$TMP/certs/tls.crt" "$TMP/certs/tls.key" >"$OUT/$1.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do
        curl -sf --cacert "$CA" "https://127.0.0.1:$3/healthz" >/dev/null 2>&1 && break
        kill -0 "$pid" 2>/dev/null || { cat "$OUT/$1.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "$pid"
}
echo "== starting the baseline on 127.0.0.1:$BASELINE_PORT and the floor on 127.0.0.1:$FLOOR_PORT"
BASELINE_PID=$(start_reference baseline "$BASELINE_BIN" "$BASELINE_PORT")
PIDS+=("$BASELINE_PID")
FLOOR_PID=$(start_reference floor "$FLOOR_BIN" "$FLOOR_PORT")
PIDS+=("$FLOOR_PID")

# name | url | body | pid | expected "allowed"
scenario() {
    case $1 in
    baseline) echo "https://127.0.0.1:$BASELINE_PORT/validate|$FIXTURES/01-create-minimal-validate.json|$BASELINE_PID|true" ;;
    floor) echo "https://127.0.0.1:$FLOOR_PORT/validate?timeout=10s|$FIXTURES/01-create-minimal-validate.json|$FLOOR_PID|true" ;;
    validate) echo "https://127.0.0.1:$PORT/validate?timeout=10s|$FIXTURES/01-create-minimal-validate.json|$SERVER_PID|true" ;;
    mutate) echo "https://127.0.0.1:$PORT/mutate?timeout=10s|$FIXTURES/01-create-minimal-mutate.json|$SERVER_PID|true" ;;
    denied) echo "https://127.0.0.1:$PORT/validate?timeout=10s|$FIXTURES/13-create-by-bob-denied-validate.json|$SERVER_PID|false" ;;
    *) echo "unknown scenario $1" >&2; exit 2 ;;
    esac
}

echo "== checking each answer once"
for s in $SCENARIOS; do
    IFS='|' read -r url body _ allowed < <(scenario "$s")
    answer=$(curl -sf --cacert "$CA" -H 'Content-Type: application/json' --data-binary "@$body" "$url")
    got=$(printf '%s' "$answer" | python3 -c 'import json,sys; print(str(json.load(sys.stdin)["response"]["allowed"]).lower())')
    [ "$got" = "$allowed" ] || { echo "$s: expected allowed=$allowed, got: $answer" >&2; exit 1; }
    echo "   $s: allowed=$got"
done

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$1/status"; }
RSS_IDLE=$(rss_kib "$SERVER_PID")
BASELINE_RSS_IDLE=$(rss_kib "$BASELINE_PID")

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (+ uncommitted changes in src)')"
    echo "webhook binary: $SERVER_BIN"
    echo "floor binary: $FLOOR_BIN"
    echo "nproc: $(nproc)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "wrk: $(wrk -v 2>&1 | head -1)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "settings: DURATION=${DURATION}s WARMUP=${WARMUP}s CONCURRENCY='$CONCURRENCY' THREADS=$THREADS ROUNDS=$ROUNDS RUST_LOG=$RUST_LOG"
} | tee "$OUT/machine.txt"

RESULTS=$OUT/results.jsonl
: >"$RESULTS"
echo "== load: ${DURATION}s per run after ${WARMUP}s warm-up"
for round in $(seq "$ROUNDS"); do
    for c in $CONCURRENCY; do
        t=$THREADS
        [ "$c" -lt "$t" ] && t=$c
        for s in $SCENARIOS; do
            IFS='|' read -r url body pid _ < <(scenario "$s")
            if [ "$WARMUP" -gt 0 ]; then
                WRK_BODY=$body wrk -t"$t" -c"$c" -d"${WARMUP}s" -s hack/load/post.lua "$url" >/dev/null
            fi
            cpu0=$(cpu_ticks "$pid")
            WRK_BODY=$body wrk -t"$t" -c"$c" -d"${DURATION}s" -s hack/load/post.lua "$url" >"$TMP/wrk.out" &
            wrk_pid=$!
            rss_max=0
            while kill -0 "$wrk_pid" 2>/dev/null; do
                r=$(rss_kib "$pid")
                [ "$r" -gt "$rss_max" ] && rss_max=$r
                sleep 0.25
            done
            wait "$wrk_pid"
            cpu1=$(cpu_ticks "$pid")
            line=$(grep '^{' "$TMP/wrk.out" | tail -1)
            echo "{\"round\":$round,\"scenario\":\"$s\",\"connections\":$c,\"threads\":$t,\"cpu_ticks\":$((cpu1 - cpu0)),\"clk_tck\":$(getconf CLK_TCK),\"rss_max_kib\":$rss_max,\"wrk\":$line}" >>"$RESULTS"
            printf '   round %s c=%-3s %-9s %s\n' "$round" "$c" "$s" \
                "$(python3 hack/load/report.py --line "$line")"
        done
    done
done

RSS_HWM=$(awk '/^VmHWM/{print $2}' "/proc/$SERVER_PID/status")
BASELINE_RSS_HWM=$(awk '/^VmHWM/{print $2}' "/proc/$BASELINE_PID/status")
echo "{\"rss_idle_kib\":$RSS_IDLE,\"rss_hwm_kib\":$RSS_HWM,\"baseline_rss_idle_kib\":$BASELINE_RSS_IDLE,\"baseline_rss_hwm_kib\":$BASELINE_RSS_HWM}" >"$OUT/rss.json"
python3 hack/load/report.py "$OUT" | tee "$OUT/report.txt"
echo "raw results: $OUT"
