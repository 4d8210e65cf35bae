#!/usr/bin/env bash
# The real-apiserver test tier alone (tests/envtest_*.rs): etcd + kube-apiserver v1.36.2 (and,
# for the drain and chart tests, kube-controller-manager, kube-scheduler and the fake kubelet)
# on random loopback ports, one control plane per test. Binaries come from $KUBEBUILDER_ASSETS,
# else from ../shared/envtest (unpacked once into target/envtest); etcd from PATH
# (apt-get install etcd-server). Without them each test prints SKIPPED; set
# NM_ENVTEST_REQUIRED=1 to make that a failure (CI does). Extra arguments go to cargo test.
#
#   hack/test-envtest.sh                     # the whole tier
#   hack/test-envtest.sh -- --nocapture      # with the controller's logs
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tests=()
for f in tests/envtest_*.rs; do
  tests+=(--test "$(basename "${f}" .rs)")
done
cargo test "${tests[@]}" "$@"
