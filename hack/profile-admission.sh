#!/usr/bin/env bash
# Instructions per admission request, counted by valgrind's callgrind: a figure that does not
# move with the machine's load, unlike wrk's throughput on a shared 2-core machine
# (docs/benchmarks.md, "/validate back above ae189c7").
#
#   hack/profile-admission.sh                          # /validate of fixture 01, this build
#   SERVER_BIN=/tmp/old/node-maintenance hack/profile-admission.sh   # another build
#   ENDPOINT=mutate FIXTURE=tests/fixtures/apiserver/01-create-minimal-mutate.json hack/profile-admission.sh
#
# Runs `serve --standalone` under callgrind twice: once answering nothing (start-up and
# shutdown alone) and once under wrk (1 thread, 4 keep-alive connections, SECONDS_UNDER_LOAD
# seconds). Prints user-space instructions per request, (loaded - idle) / requests, and the
# handler's functions by inclusive instructions per request. Raw profiles:
# target/profile/<timestamp>/ (open with callgrind_annotate or kcachegrind).
#
# Environment: SERVER_BIN (default target/release/node-maintenance, built if missing),
# ENDPOINT (validate), FIXTURE (tests/fixtures/apiserver/01-create-minimal-validate.json),
# SECONDS_UNDER_LOAD (20), TOP (25 rows).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SERVER_BIN=${SERVER_BIN:-target/release/node-maintenance}
ENDPOINT=${ENDPOINT:-validate}
FIXTURE=${FIXTURE:-tests/fixtures/apiserver/01-create-minimal-validate.json}
SECONDS_UNDER_LOAD=${SECONDS_UNDER_LOAD:-20}
TOP=${TOP:-25}
for tool in valgrind callgrind_annotate wrk; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind wrk >/dev/null; break; }
done
[ -x "$SERVER_BIN" ] || cargo build --release --quiet --bin node-maintenance
OUT=target/profile/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# profile NAME SECONDS: callgrind's instruction total for one run of the server.
profile() {
    local name=$1 secs=$2 port
    port=$(free_port)
    RUST_LOG=info valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.cg" "$SERVER_BIN" serve --standalone \
        --nodes-file examples/nodes.yaml --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$(free_port)" \
        --cert-dir "$TMP/certs" >"$OUT/$name.log" 2>"$OUT/$name.vg" &
    local pid=$!
    for _ in $(seq 600); do
        curl -sf --cacert "$TMP/certs/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    if [ "$secs" -gt 0 ]; then
        WRK_BODY=$FIXTURE wrk -t1 -c4 -d"${secs}s" --timeout 10s -s hack/load/post.lua \
            "https://127.0.0.1:$port/$ENDPOINT?timeout=10s" >"$OUT/$name.wrk"
    fi
    kill -INT "$pid"
    wait "$pid" || true
    grep -oE 'Collected : [0-9]+' "$OUT/$name.vg" | awk '{print $3}'
}

idle=$(profile idle 0)
loaded=$(profile loaded "$SECONDS_UNDER_LOAD")
requests=$(grep -oE '"requests":[0-9]+' "$OUT/loaded.wrk" | cut -d: -f2)
echo "server: $SERVER_BIN  endpoint: /$ENDPOINT  fixture: $FIXTURE"
echo "requests: $requests  instructions per request: $(( (loaded - idle) / requests ))"
echo "inclusive instructions per request, the handler's functions:"
callgrind_annotate --inclusive=yes "$OUT/loaded.cg" 2>/dev/null |
    grep -E 'node_maintenance::(server|admission|selector)|tracing_subscriber.*new_span' | head -n "$TOP" |
    awk -v n="$requests" '{c = $1; gsub(",", "", c); f = $0; sub(/^[^:]*:/, "", f); sub(/ \[[^]]*\]$/, "", f)
        printf "%10.1fk  %s\n", c / n / 1000, substr(f, 1, 110)}'
echo "raw profiles: $OUT"
