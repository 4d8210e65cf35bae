#!/usr/bin/env bash
# Instructions per admission request, counted by valgrind's callgrind: a figure that does not
# move with the machine's load, unlike wrk's throughput on a shared 2-core machine
# (docs/benchmarks.md, "/validate back above ae189c7").
#
#   hack/profile-admission.sh                          # /validate of fixture 01, this build
#   SERVER_BIN=/tmp/old/node-maintenance hack/profile-admission.sh   # another build
#   ENDPOINT=mutate FIXTURE=tests/fixtures/apiserver/01-create-minimal-mutate.json hack/profile-admission.sh
#   REFERENCE_BIN=target/release/examples/kube_floor_server hack/profile-admission.sh  # the floor
#
# Runs `serve --standalone` under callgrind twice: once answering nothing (start-up and
# shutdown alone) and once under wrk (1 thread, 4 keep-alive connections, SECONDS_UNDER_LOAD
# seconds). Prints user-space instructions per request, (loaded - idle) / requests, the
# handler's functions by inclusive instructions per request, and the functions where the
# instructions are spent (exclusive, per request and share of the loaded run). Raw profiles:
# target/profile/<timestamp>/ (open with callgrind_annotate or kcachegrind).
#
# With REFERENCE_BIN, the same for one of the load harness's reference servers
# (examples/kube_floor_server.rs, examples/baseline_server.rs: arguments ADDR CERT KEY) on a
# development certificate made by `node-maintenance certs`.
#
# Environment: SERVER_BIN (default target/release/node-maintenance, built if missing),
# REFERENCE_BIN (unset), ENDPOINT (validate), FIXTURE
# (tests/fixtures/apiserver/01-create-minimal-validate.json), SECONDS_UNDER_LOAD (20), TOP (25
# rows).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SERVER_BIN=${SERVER_BIN:-target/release/node-maintenance}
ENDPOINT=${ENDPOINT:-validate}
FIXTURE=${FIXTURE:-tests/fixtures/apiserver/01-create-minimal-validate.json}
SECONDS_UNDER_LOAD=${SECONDS_UNDER_LOAD:-20}
TOP=${TOP:-25}
REFERENCE_BIN=${REFERENCE_BIN:-}
for tool in valgrind callgrind_annotate wrk; do
    command -v "$tool" >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind wrk >/dev/null; break; }
done
[ -x "$SERVER_BIN" ] || cargo build --release --quiet --bin node-maintenance
OUT=target/profile/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

if [ -n "$REFERENCE_BIN" ]; then
    "$SERVER_BIN" certs --out "$TMP/certs" >/dev/null
    HANDLER='(kube_floor_server|baseline_server)::'
else
    HANDLER='node_maintenance::(server|admission|selector)|tracing_subscriber.*new_span'
fi

# profile NAME SECONDS: callgrind's instruction total for one run of the server.
profile() {
    local name=$1 secs=$2 port
    port=$(free_port)
    if [ -n "$REFERENCE_BIN" ]; then
        valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.cg" "$REFERENCE_BIN" "127.0.0.1:$port" \
            "$TMP/certs/tls.crt" "$TMP/certs/tls.key" >"$OUT/$name.log" 2>"$OUT/$name.vg" &
    else
        RUST_LOG=info valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.cg" "$SERVER_BIN" serve --standalone \
            --nodes-file examples/nodes.yaml --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$(free_port)" \
            --cert-dir "$TMP/certs" >"$OUT/$name.log" 2>"$OUT/$name.vg" &
    fi
    local pid=$!
    for _ in $(seq 600); do
        curl -sf --cacert "$TMP/certs/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    if [ "$secs" -gt 0 ]; then
        WRK_BODY=$FIXTURE wrk -t1 -c4 -d"${secs}s" --timeout 10s -s hack/load/post.lua \
            "https://127.0.0.1:$port/$ENDPOINT?timeout=10s" >"$OUT/$name.wrk"
    fi
    # The webhook shuts down on SIGINT; the reference servers have no handler, and a
    # background job of a script ignores SIGINT, so they get SIGTERM (callgrind still writes).
    kill "-$([ -n "$REFERENCE_BIN" ] && echo TERM || echo INT)" "$pid"
    wait "$pid" || true
    grep -oE 'Collected : [0-9]+' "$OUT/$name.vg" | awk '{print $3}'
}

idle=$(profile idle 0)
loaded=$(profile loaded "$SECONDS_UNDER_LOAD")
requests=$(grep -oE '"requests":[0-9]+' "$OUT/loaded.wrk" | cut -d: -f2)
echo "server: ${REFERENCE_BIN:-$SERVER_BIN}  endpoint: /$ENDPOINT  fixture: $FIXTURE"
echo "requests: $requests  instructions per request: $(( (loaded - idle) / requests ))"
# rows PATTERN: callgrind_annotate's function rows matching PATTERN, per request and as a share
# of the loaded run's instructions.
rows() {
    grep -E "$1" | head -n "$TOP" |
        awk -v n="$requests" -v total="$loaded" '{c = $1; gsub(",", "", c); f = $0; sub(/^[^:]*:/, "", f)
            sub(/ \[[^]]*\]$/, "", f); printf "%10.1fk %6.2f%%  %s\n", c / n / 1000, 100 * c / total, substr(f, 1, 110)}'
}
echo "inclusive instructions per request, the handler's functions:"
callgrind_annotate --inclusive=yes "$OUT/loaded.cg" 2>/dev/null | rows "$HANDLER"
echo "exclusive instructions per request, where they are spent:"
callgrind_annotate "$OUT/loaded.cg" 2>/dev/null | rows '^ *[0-9,]+ \([ 0-9.]+%\) '
echo "raw profiles: $OUT"
