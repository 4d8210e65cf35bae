#!/usr/bin/env bash
# Supply-chain checks with cargo-deny and deny.toml: licenses, banned crates (no OpenSSL or
# native-tls), sources (crates.io only). CI runs it as is.
#   hack/deny.sh              licenses, bans, sources (no network needed)
#   hack/deny.sh advisories   also the RustSec advisories (fetches the advisory database:
#                             run it where the network allows)
# DENY_LOG=warn also shows the warnings (duplicate crate versions). cargo-deny is installed once with `cargo install --locked` into $CARGO_DENY_ROOT
# (default ~/.cargo) and reused while its version matches DENY_VERSION.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="${DENY_VERSION:-0.20.2}"
root="${CARGO_DENY_ROOT:-${CARGO_HOME:-$HOME/.cargo}}"
bin="$root/bin/cargo-deny"
if ! [ -x "$bin" ] || ! "$bin" --version | grep -qF " $version"; then
  echo "== installing cargo-deny $version into $root (once)"
  cargo install cargo-deny --locked --version "$version" --root "$root"
fi
checks=(licenses bans sources)
if [ "${1:-}" = "advisories" ]; then
  checks=(advisories "${checks[@]}")
fi
echo "== cargo deny check ${checks[*]}"
"$bin" deny --log-level "${DENY_LOG:-error}" check "${checks[@]}"
