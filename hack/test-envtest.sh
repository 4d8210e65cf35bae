#!/usr/bin/env bash
# The real-apiserver test tier alone (tests/envtest_*.rs): etcd + kube-apiserver v1.36.2 (and,
# for the drain and chart tests, kube-controller-manager, kube-scheduler and the fake kubelet)
# on random loopback ports, one control plane per test. Binaries come from $KUBEBUILDER_ASSETS,
# else from ../shared/envtest (unpacked once into target/envtest); etcd from KUBEBUILDER_ASSETS,
# /usr/bin or /usr/local/bin (Debian's etcd-server). hack/setup-test-deps.sh checks them first
# (installing what it may, as for hack/test-all.sh), and the tier is required
# (NM_ENVTEST_REQUIRED=1): a missing asset fails a test instead of skipping it, as in CI.
# Extra arguments go to cargo test.
#
#   hack/test-envtest.sh                     # the whole tier
#   hack/test-envtest.sh -- --nocapture      # with the controller's logs
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NM_SKIP_ENVTEST=0 bash hack/setup-test-deps.sh
export NM_ENVTEST_REQUIRED="${NM_ENVTEST_REQUIRED:-1}"
tests=()
for f in tests/envtest_*.rs; do
  tests+=(--test "$(basename "${f}" .rs)")
done
cargo test "${tests[@]}" "$@"
