#!/usr/bin/env bash
# Generate development TLS material for `node-maintenance serve --standalone` and local tests.
#
#   hack/gen-dev-certs.sh            # -> certs/ (git-ignored, see certs/README.md)
#   hack/gen-dev-certs.sh OUT_DIR    # somewhere else
#   USE_OPENSSL=1 hack/gen-dev-certs.sh
#
# By default the program itself makes them (`node-maintenance certs --out DIR`, rcgen).
# With USE_OPENSSL=1, or when the binary has no `certs` subcommand, openssl makes the same
# set: ca.crt (a development CA), tls.crt and tls.key (a serving certificate signed by it for
# localhost, 127.0.0.1 and ::1). Never use these outside a development machine.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${repo_root}/certs}"
mkdir -p "${out}"
cd "${repo_root}"

if [[ "${USE_OPENSSL:-0}" != "1" ]] && cargo run -q -- certs --help >/dev/null 2>&1; then
  cargo run -q -- certs --out "${out}"
  echo "development certificates written to ${out} (node-maintenance certs)"
  exit 0
fi

command -v openssl >/dev/null || { echo "error: openssl not found (and no 'node-maintenance certs')" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 -days 365 \
  -subj "/CN=node-maintenance development CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout "${work}/ca.key" -out "${work}/ca.crt" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
  -subj "/CN=localhost" -keyout "${work}/tls.key" -out "${work}/tls.csr" 2>/dev/null
cat >"${work}/ext.cnf" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
EXT
openssl x509 -req -in "${work}/tls.csr" -CA "${work}/ca.crt" -CAkey "${work}/ca.key" -CAcreateserial \
  -days 365 -sha256 -extfile "${work}/ext.cnf" -out "${work}/tls.crt" 2>/dev/null
# rustls reads PKCS#8 keys in any version.
openssl pkcs8 -topk8 -nocrypt -in "${work}/tls.key" -out "${work}/tls.pk8"

install -m 0644 "${work}/ca.crt" "${out}/ca.crt"
install -m 0644 "${work}/tls.crt" "${out}/tls.crt"
install -m 0600 "${work}/tls.pk8" "${out}/tls.key"
echo "development certificates written to ${out} (openssl): ca.crt tls.crt tls.key"
