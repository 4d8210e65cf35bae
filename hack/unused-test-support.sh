#!/usr/bin/env bash
# Lists the helpers of tests/support that no test or bench uses. Every test binary compiles
# tests/support and uses a part of it, so tests/support allows dead code; this script builds
# every target without that allow (cfg nm_unused_support, in its own target directory) and
# prints the items that EVERY target including them reports unused. Exit 1 when it finds any.
# Usage: hack/unused-test-support.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/unused-support"
RUSTFLAGS="--cfg nm_unused_support" cargo test --all-targets --no-run --message-format=json 2>/dev/null | python3 hack/unused_test_support.py
