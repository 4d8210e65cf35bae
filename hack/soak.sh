#!/usr/bin/env bash
# The soak (issue 25; docs/reliability.md "Soak"; the bench's doc comment in benches/soak.rs
# describes the set-up and every figure): maintenances created, drained, completed and
# deleted in a loop on a real kube-apiserver with workloads coming back, serve's RSS, open
# fds, tokio tasks and controller memories recorded every minute. A bench, not a test.
#
#   SOAK_MINUTES=60 hack/soak.sh        default 40 minutes (a verdict needs more than the
#                                       20-minute warm-up: benches/soak.rs WARM_UP_MINUTES)
#
# Environment (optional): SOAK_MINUTES, SOAK_RUST_LOG (serve's log filter, default warn),
# SOAK_DEBUG=1 (the debug build of `cargo test`, no release build: flatness does not need
# an optimised binary, and a busy machine spares the compile), KUBEBUILDER_ASSETS (envtest
# binaries; default ../shared/envtest, unpacked).
# Needs etcd (Debian etcd-server) and the envtest bundle.
# Output: the table and the verdict, also saved under target/soak/; on failure, serve's log,
# the control plane's logs and the cluster's objects in target/soak/<run>-failed/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export SOAK_MINUTES=${SOAK_MINUTES:-40}
export NM_ENVTEST_REQUIRED=${NM_ENVTEST_REQUIRED:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

if [ "${SOAK_DEBUG:-0}" = 1 ]; then
    BUILD=(cargo test --quiet --bench soak)
    RUN=(cargo test --quiet --bench soak -- --bench)
else
    BUILD=(cargo bench --quiet --bench soak)
    RUN=(cargo bench --quiet --bench soak)
fi
echo "== ${BUILD[*]} --no-run (serve is this build's binary)"
"${BUILD[@]}" --no-run

OUT=$(realpath -m "$TARGET_DIR/soak")
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)-${SOAK_MINUTES}min
LOG=$OUT/$STAMP.txt
# On failure the bench copies serve's and the control plane's logs and the cluster's state here.
export SOAK_KEEP_DIR=${SOAK_KEEP_DIR:-$OUT/$STAMP-failed}
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (+ uncommitted changes in src)')"
    echo "command: SOAK_MINUTES=$SOAK_MINUTES SOAK_DEBUG=${SOAK_DEBUG:-0} hack/soak.sh"
    echo "nproc: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$LOG"
"${RUN[@]}" 2>&1 | tee -a "$LOG"
echo "log: $LOG"
