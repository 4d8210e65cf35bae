#!/usr/bin/env bash
# The whole test suite: every Rust test (unit, integration over real HTTPS, doc tests), then
# the chart, image and hack-script tests. Usage: hack/test-all.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo test --all-targets
cargo test --doc
SKIP_CARGO_BUILD=1 bash hack/test-chart.sh
