#!/usr/bin/env bash
# The controller at cluster scale on a real kube-apiserver (docs/benchmarks.md, "Controller
# at scale on a real apiserver (hack/scale.sh)"; the bench's doc comment in benches/scale.rs
# describes the set-up and every figure).
#
#   hack/scale.sh [NODES] [PODS_PER_NODE]      default 500 nodes x 20 pods per node
#
# Environment (all optional):
#   NM_SCALE_POOL             nodes per drained pool (default NODES/5); the controller drains
#                             pool=drain, kubectl drain the identical pool=kubectl, and the
#                             harness alone evicts the identical pool=bare (the apiserver's rate)
#   NM_SCALE_ROLL             nodes of the rolled pool (default 100; 0 = no roll phase)
#   NM_SCALE_ROLL_MAX_UNAVAILABLE  its spec.maxUnavailable (default 10%)
#   NM_SCALE_REPLICAS         pods per ReplicaSet/StatefulSet (default 10)
#   NM_SCALE_PACED           nodes of each PDB-paced pool (default 4; 0 = no paced phase): our drain
#                             of pool=paced and kubectl drain of pool=pacedkubectl, behind PDBs
#                             maxUnavailable 1 (benches/scale/paced.rs)
#   NM_SCALE_PACED_WORKLOADS  paced ReplicaSets per pool (default 8)
#   NM_SCALE_PACED_REPLICAS   pods of each (default 12)
#   NM_SCALE_PACED_START_MS   a replacement's time from creation to Ready (default 1000)
#   NM_SCALE_CONCURRENCY      harness requests in flight (default 64)
#   NM_SCALE_STEADY           seconds of each steady-state window (default 30)
#   NM_SCALE_HEARTBEAT_SECS   node status heartbeat period per node (default 300, 0 = none)
#   NM_SCALE_EVICT_DAEMONSETS 1 = serve without --skip-daemonset-pods
#   NM_SCALE_KUBECTL          0 = skip the kubectl drain reference
#   NM_SCALE_BARE             0 = skip the bare eviction reference (no pool=bare then)
#   NM_SCALE_TIMEOUT          seconds allowed for each wait (default 1800)
#   NM_SCALE_RUST_LOG         serve's log filter (default info)
#   KUBEBUILDER_ASSETS        envtest binaries (default: ../shared/envtest, unpacked)
# Needs etcd (Debian etcd-server) and the envtest bundle; ~3 GiB of /dev/shm at 2,000 nodes.
# Output: the run's log and a markdown table, also saved under target/scale/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export NM_SCALE_NODES=${1:-${NM_SCALE_NODES:-500}}
export NM_SCALE_PODS_PER_NODE=${2:-${NM_SCALE_PODS_PER_NODE:-20}}
export NM_ENVTEST_REQUIRED=${NM_ENVTEST_REQUIRED:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

echo "== cargo bench --bench scale --no-run (serve is the optimised binary of this build)"
cargo bench --quiet --bench scale --no-run

OUT=$TARGET_DIR/scale
mkdir -p "$OUT"
LOG=$OUT/$(date -u +%Y%m%dT%H%M%SZ)-${NM_SCALE_NODES}x${NM_SCALE_PODS_PER_NODE}.txt
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (+ uncommitted changes in src)')"
    echo "nproc: $(nproc); memory: $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$LOG"
cargo bench --quiet --bench scale 2>&1 | tee -a "$LOG"
echo "log: $LOG"
