#!/usr/bin/env bash
# What the whole test suite needs, checked the way the tests look for it, and installed where
# this script may. Run by hack/test-all.sh (the README's test command) and by .ci/run, before
# anything is built.
#
#   hack/setup-test-deps.sh                      # check, install what is missing (root + apt)
#   NM_SKIP_ENVTEST=1 hack/setup-test-deps.sh    # only what the fast tiers need
#
# The real-apiserver tier (tests/envtest_*.rs, tests/support/envtest/assets.rs):
#   - etcd: $KUBEBUILDER_ASSETS/etcd, else /usr/bin/etcd or /usr/local/bin/etcd (Debian's
#     etcd-server), not merely on PATH;
#   - kube-apiserver & co: $KUBEBUILDER_ASSETS, else ../shared/envtest/kubernetes-*.tar.xz
#     (with SHA256SUMS) unpacked with tar and xz (Debian's xz-utils) into target/envtest;
#   - ../shared/tools/fake_kubelet.py and ../shared/cert-manager/crds.
# The alert tests (tests/envtest_monitoring.rs, tests/prometheus_alerts.rs,
# tests/chart/test_monitoring.py): prometheus and promtool on PATH (Debian's prometheus).
# The chart tests (hack/chart-venv.sh):
# `python3 -m venv` (Debian's python3-venv) and pip reaching the package index for
# tests/chart/requirements.txt; the virtualenv is made here, before the build.
#
# As root with apt-get, missing packages are installed (one line each, after one
# `apt-get update`) and the system etcd and Prometheus services they may start are stopped
# (the tests run their own on random ports). Otherwise (not root, no apt-get, ../shared
# missing) it exits 1, having installed nothing, with one message naming everything missing and
# the command or path that provides it. It never uses sudo.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="$(cd "${repo_root}/.." && pwd)/shared"
version="v1.36.2"
bundle="${shared}/envtest/kubernetes-${version}-linux-amd64.tar.xz"
unpacked="${repo_root}/target/envtest/${version}/bin"
target_dir="${CARGO_TARGET_DIR:-${repo_root}/target}"
case "${target_dir}" in
  /*) ;;
  *) target_dir="${repo_root}/${target_dir}" ;;
esac
envtest=1
[[ "${NM_SKIP_ENVTEST:-0}" == "1" ]] && envtest=0

say() { echo "setup-test-deps: $*" >&2; }

# Missing things apt-get can install: package name -> why it is needed.
declare -A packages=()
# Missing things no package provides: one line each, with the path.
files=()

first_file() {
  local p
  for p in "$@"; do
    if [[ -f "${p}" ]]; then
      echo "${p}"
      return 0
    fi
  done
  return 1
}

# etcd where tests/support/envtest/assets.rs looks for it.
etcd_path() {
  local dirs=()
  if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
    dirs+=("${KUBEBUILDER_ASSETS}/etcd")
  else
    dirs+=("${unpacked}/etcd")
  fi
  first_file "${dirs[@]}" /usr/bin/etcd /usr/local/bin/etcd
}

venv_ready() {
  local venv="${target_dir}/chart-venv" requirements="${repo_root}/tests/chart/requirements.txt"
  [[ -x "${venv}/bin/python" && -f "${venv}/.requirements.sha256" ]] \
    && [[ "$(cat "${venv}/.requirements.sha256")" == "$(sha256sum "${requirements}" | cut -d' ' -f1)" ]]
}

# `python3 -m venv` with pip (Debian's python3 makes a virtualenv only with python3-venv).
venv_works() {
  local tmp ok=0
  command -v python3 >/dev/null 2>&1 || return 1
  tmp="$(mktemp -d)"
  python3 -m venv "${tmp}/venv" >/dev/null 2>&1 || ok=1
  rm -rf "${tmp}"
  return "${ok}"
}

check() {
  packages=()
  files=()
  if [[ "${envtest}" == 1 ]]; then
    etcd_path >/dev/null \
      || packages[etcd-server]="etcd: not in ${KUBEBUILDER_ASSETS:-target/envtest/${version}/bin}, /usr/bin or /usr/local/bin"
    if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
      local b
      for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
        [[ -f "${KUBEBUILDER_ASSETS}/${b}" ]] || files+=("${KUBEBUILDER_ASSETS}/${b} (KUBEBUILDER_ASSETS)")
      done
    elif [[ ! -f "${unpacked}/kube-apiserver" ]]; then
      [[ -f "${bundle}" ]] || files+=("${bundle}")
      [[ -f "${shared}/envtest/SHA256SUMS" ]] || files+=("${shared}/envtest/SHA256SUMS")
      command -v xz >/dev/null 2>&1 || packages[xz-utils]="xz: not on PATH (tar -xJ of the envtest bundle)"
    fi
    [[ -f "${shared}/tools/fake_kubelet.py" ]] || files+=("${shared}/tools/fake_kubelet.py")
    [[ -d "${shared}/cert-manager/crds" ]] || files+=("${shared}/cert-manager/crds/")
    local tool
    for tool in prometheus promtool; do
      command -v "${tool}" >/dev/null 2>&1 || packages[prometheus]="prometheus, promtool: not on PATH"
    done
  fi
  if ! venv_ready && ! venv_works; then
    packages[python3-venv]="python3 -m venv fails (the chart tests' virtualenv)"
  fi
}

check

if [[ ${#packages[@]} -gt 0 ]]; then
  why_not=""
  if [[ "$(id -u)" != 0 ]]; then
    why_not="not root"
  elif ! command -v apt-get >/dev/null 2>&1; then
    why_not="no apt-get on PATH"
  elif [[ ${#files[@]} -gt 0 ]]; then
    # The run would stop on them anyway: change nothing on the machine before that.
    why_not="files are missing as well"
  fi
  if [[ -z "${why_not}" ]]; then
    export DEBIAN_FRONTEND=noninteractive
    log="$(mktemp)"
    trap 'rm -f "${log}"' EXIT
    say "apt-get update"
    if ! apt-get update -qq >"${log}" 2>&1; then
      cat "${log}" >&2
      say "apt-get update failed"
      exit 1
    fi
    for p in $(printf '%s\n' "${!packages[@]}" | sort); do
      say "installing ${p} (${packages[${p}]})"
      if ! apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=300 "${p}" >"${log}" 2>&1; then
        cat "${log}" >&2
        say "apt-get install ${p} failed"
        exit 1
      fi
    done
    # The packages may start a system etcd on 2379 and a Prometheus on 9090; the tests run
    # their own on random ports.
    for service in etcd prometheus; do
      if [[ -d /run/systemd/system ]]; then
        systemctl stop "${service}" >/dev/null 2>&1 || true
      elif [[ -x "/etc/init.d/${service}" ]]; then
        service "${service}" stop >/dev/null 2>&1 || true
      fi
    done
    check
  fi
fi

if [[ ${#packages[@]} -gt 0 || ${#files[@]} -gt 0 ]]; then
  {
    echo "setup-test-deps: the test suite cannot run; missing:"
    for p in $(printf '%s\n' "${!packages[@]}" | sort); do
      echo "  - ${packages[${p}]} (Debian package ${p})"
    done
    for f in "${files[@]}"; do
      echo "  - ${f}"
    done
    if [[ ${#packages[@]} -gt 0 ]]; then
      echo "Install the packages as root (not done here: ${why_not:-installing did not provide them}):"
      echo "  apt-get update && apt-get install -y --no-install-recommends $(printf '%s\n' "${!packages[@]}" | sort | paste -sd' ')"
    fi
    if [[ ${#files[@]} -gt 0 ]]; then
      echo "Put the project's shared/ directory beside the clone, as ${shared}."
    fi
    if [[ "${envtest}" == 1 ]]; then
      echo "Or run only the fast tiers, without the real apiserver and Prometheus: NM_SKIP_ENVTEST=1 hack/test-all.sh"
    fi
  } >&2
  exit 1
fi

# The chart tests' virtualenv, now: pip needs the package index, and a failure here is clearer
# than one in the middle of the tests.
if ! venv_ready; then
  if ! "${repo_root}/hack/chart-venv.sh" >/dev/null; then
    say "could not make the chart tests' virtualenv: pip installs tests/chart/requirements.txt from the package index (PyPI, or PIP_INDEX_URL); is it reachable?"
    exit 1
  fi
fi

ready=()
if [[ "${envtest}" == 1 ]]; then
  etcd="$(etcd_path)"
  # awk reads all of it: head would close the pipe early and pipefail fail on SIGPIPE.
  ready+=("$("${etcd}" --version 2>&1 | awk 'NR == 1') (${etcd})")
  ready+=("$(prometheus --version 2>&1 | awk 'NR == 1')")
  ready+=("promtool, kube-apiserver ${version} (${KUBEBUILDER_ASSETS:-${bundle}}), fake kubelet")
fi
ready+=("chart virtualenv ${target_dir#"${repo_root}/"}/chart-venv")
say "ready: $(printf '%s; ' "${ready[@]}" | sed 's/; $//')"
