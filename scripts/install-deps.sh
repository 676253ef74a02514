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
  libclang-rt-19-dev                    # ASan/UBSan/TSan and libFuzzer runtimes (--config=asan/tsan/fuzz)
  libmicrohttpd-dev                     # kilnd's /metrics endpoint (HTTP on a Unix socket)
  curl                                  # tests/metrics_test scrapes /metrics with it
  libhiredis-dev                        # the fleet tier's Redis client (cache/remote)
  redis-server redis-tools              # its tests start real Redis servers and a cluster
  libdnnl-dev                           # convolutions (oneDNN 2.6), loaded by the runtime only when an artifact needs them
)
if [[ "${1:-}" == "--with-torch" ]]; then
  packages+=(python3-torch)             # eager baselines (benchmarks, tracer)
  packages+=(libtorch-dev pybind11-dev) # the Python package's extension (client/python)
  packages+=(python3-pytest)            # its tests
  packages+=(python3-torchvision)       # convolution nets (resnet18) for the tracer's tests and the kernels bench
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "Installing ${#missing[@]} Debian packages: ${missing[*]}" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
