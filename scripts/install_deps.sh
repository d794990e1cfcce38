#!/usr/bin/env bash
# Installs the Debian packages elastrain builds and runs with (and, with --test, tests
# with). Idempotent: it skips apt entirely when every package is already installed.
set -euo pipefail
PKGS=(cmake g++ make pkg-config libopenblas-dev libdnnl-dev libsentencepiece-dev
      sentencepiece libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev
      libfmt-dev libxxhash-dev fortunes libgtest-dev libbenchmark-dev libgloo-dev
      libcpp-httplib-dev libssl-dev openssl etcd-server libpcre2-dev)
# --test: also what only the tests use: promtool (Prometheus' rule and metrics checker),
# headless Chromium (drives the dashboard), curl and iproute2 (ss), and for the fuzz
# harnesses (fuzz/README.md) clang with libFuzzer and the sanitizer runtimes
# (libclang-rt-14-dev) and the OpenMP runtime clang links (libomp-dev); PyTorch for
# /usr/bin/python3 (python3-torch, CPU) to run a torchrun script under `elastrain launch`
# (tests/integration/test_launch_*.sh, bench/launch_recovery.sh) and PyYAML (python3-yaml) to
# merge MaxText configs as MaxText does (tests/integration/maxtext_walk.py), python3-regex (\p{L})
# for the independent BPE reference (tests/reference/bpe_reference.py); ethtool and ping for the
# multi-host harness on network namespaces (tests/cluster/README.md); Slurm and MUNGE for
# a one-machine Slurm cluster, kubectl (kustomize) and Node.js (a schema validator from npm)
# for the deploy/ tests (tests/deploy/README.md).
if [ "${1:-}" = "--test" ]; then
  PKGS+=(prometheus chromium-headless-shell curl iproute2 clang libclang-rt-14-dev libomp-dev python3-torch python3-yaml python3-regex
         ethtool iputils-ping slurm-wlm munge)
  # A kubectl already installed (another vendor's package) stays; Debian's otherwise.
  command -v kubectl >/dev/null 2>&1 || PKGS+=(kubernetes-client)
  command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
  command -v npm >/dev/null 2>&1 || PKGS+=(npm)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
