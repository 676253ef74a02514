#!/usr/bin/env bash
# Runs one libFuzzer target of tests/fuzz for a bounded time.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   scripts/fuzz.sh --list
#
# TARGET is one of graph_json, compile_request, guards, local_index,
# store_entry. Builds //tests/fuzz:TARGET_fuzzer with --config=fuzz (clang
# 19, -fsanitize=fuzzer,address,undefined), then fuzzes from the seed
# corpus tests/fuzz/corpus/TARGET (read only) plus a working corpus of its
# own (KILN_FUZZ_WORK, default /tmp/kiln-fuzz/TARGET: new inputs and
# crashes go there, never into the checkout). Prints one summary line,
#   fuzz TARGET: N executions in S s, cov C ft F, corpus K, crashes X
# and exits non-zero when libFuzzer found a crash, a timeout (an input
# taking over 10 s) or an out-of-memory (over 2 GiB RSS). Reproduce a
# finding with
#   bazel-bin/tests/fuzz/TARGET_fuzzer CRASH_FILE    (after --config=fuzz)
# and keep it as a regression: copy it to tests/fuzz/corpus/TARGET/regression-<what>.
#
# KILN_BAZEL_OUTPUT_BASE: an output base for this build (default: the
# workspace's); the fuzz config never reconfigures the default toolchain.
set -uo pipefail
cd "$(dirname "$0")/.."

targets=(graph_json compile_request guards local_index store_entry)
if [[ "${1:-}" == "--list" ]]; then printf '%s\n' "${targets[@]}"; exit 0; fi
if [[ $# -lt 2 || "${1:-}" == "--help" || ! " ${targets[*]} " =~ " $1 " ]]; then
  echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]; TARGET: ${targets[*]}" >&2
  exit 2
fi
target=$1 seconds=$2
shift 2

# The largest input worth trying per target: a few times the largest seed.
case $target in
  graph_json) max_len=65536 ;;
  compile_request|guards) max_len=32768 ;;
  *) max_len=16384 ;;
esac
dict=()
[[ -f tests/fuzz/$target.dict ]] && dict=(-dict="tests/fuzz/$target.dict")

bazel_cmd=(bazel)
[[ -n "${KILN_BAZEL_OUTPUT_BASE:-}" ]] && bazel_cmd+=(--output_base="$KILN_BAZEL_OUTPUT_BASE")
if ! "${bazel_cmd[@]}" build --config=fuzz "//tests/fuzz:${target}_fuzzer" >/tmp/kiln-fuzz-build.$$ 2>&1; then
  tail -40 /tmp/kiln-fuzz-build.$$ >&2
  rm -f /tmp/kiln-fuzz-build.$$
  echo "fuzz $target: the fuzz build failed" >&2
  exit 1
fi
rm -f /tmp/kiln-fuzz-build.$$
binary=$("${bazel_cmd[@]}" info --config=fuzz bazel-bin 2>/dev/null)/tests/fuzz/${target}_fuzzer

work=${KILN_FUZZ_WORK:-/tmp/kiln-fuzz/$target}
mkdir -p "$work/corpus" "$work/crashes"
log=$work/fuzz.log
# -rss_limit_mb: ASan's shadow and RocksDB's caches fit well under 2 GiB; a
# graph that makes codegen use more is a finding. -timeout: the slowest seed
# takes well under a second under ASan.
touch "$work/.start"
start=$(date +%s)
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
LLVM_SYMBOLIZER_PATH=/usr/lib/llvm-19/bin/llvm-symbolizer \
  "$binary" -max_total_time="$seconds" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
  -use_value_profile=1 -print_final_stats=1 -artifact_prefix="$work/crashes/" "${dict[@]}" \
  "$@" "$work/corpus" "tests/fuzz/corpus/$target" >"$log" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
last=$(grep -E '^#[0-9]+' "$log" | tail -1)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corpus=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
crashes=$(find "$work/crashes" -type f -newer "$work/.start" | wc -l)
echo "fuzz $target: ${execs:-0} executions in ${elapsed} s, cov ${cov:-?} ft ${ft:-?}, corpus ${corpus:-?}, crashes $crashes (status $status; log $log)"
if [[ $status -ne 0 ]]; then
  grep -E "ERROR: (AddressSanitizer|libFuzzer|UndefinedBehaviorSanitizer|LeakSanitizer)|runtime error|FUZZ CHECK FAILED|SUMMARY" "$log" | head -5 >&2
  find "$work/crashes" -type f -newer "$work/.start" | head -5 >&2
fi
exit $status
