#!/usr/bin/env bash
# Kiln's main job, end to end: start kilnd on a fresh cache, compile
# examples/f.json (relu(x @ x.T + 1) on 64x64) from one process, then run it
# from a brand-new process that hits the cache, checking both against a
# reference and printing the timings; then the same from Python: a saved
# transformer layer loaded by fresh worker processes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --with-torch
echo "Building kilnd, kiln and the Python package's extension (bazel -c opt)..."
bazel build -c opt --ui_event_filters=-info,-stdout --noshow_progress \
  //daemon:kilnd //tools/kiln:kiln //client/python:kiln/_kiln.so \
  //client/python:kiln/libkiln_grpc.so

work=$(mktemp -d /tmp/kiln-demo-XXXXXX)
export KILN_SOCKET="$work/run/kilnd.sock" KILN_CACHE_DIR="$work/cache"
bin=bazel-out/k8-opt/bin  # not bazel-bin: that follows whichever build ran last
kiln=$bin/tools/kiln/kiln
cleanup() {
  [[ -n "${daemon_pid:-}" ]] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

echo
echo "== 1. kilnd on an empty cache ($KILN_CACHE_DIR)"
mkdir -m 700 -p "$work/run"
$bin/daemon/kilnd --log_level=warning &
daemon_pid=$!
until $kiln stats --start=false >/dev/null 2>&1; do sleep 0.02; done
$kiln stats

echo
echo "== 2. process A: compile (a miss: lower, generate C++, clang, store) and run"
$kiln run examples/f.json --check --start=false

echo
echo "== 3. process B, brand new: the same graph is a cache hit (no compile, and no"
echo "      round trip: the key is computed in-process and found in kilnd's local index)"
$kiln run examples/f.json --check --start=false

echo
echo "== 4. the daemon's counters: one compile (B never had to ask)"
$kiln stats
echo
echo "== 5. Python: kiln.save the transformer encoder layer (traced, not compiled), then"
echo "      fresh worker processes kiln.load it: the first compiles, the next one hits"
export PYTHONPATH=$PWD/client/python
python=.venv/bin/python3  # the pinned torch the extension is built against
"$python" examples/serve_worker.py --save "$work/layer.kiln"
for worker in 1 2; do
  echo "worker $worker:"
  printf '16 2\n8 3\n' | "$python" examples/serve_worker.py "$work/layer.kiln"
done

echo
echo "Explain what was built: $kiln explain examples/f.json"
