#!/usr/bin/env bash
# Runs every Kiln test (unit tests and the end-to-end tests that start real
# kilnd and client processes) and prints "N passed, N failed" over the
# individual test cases. Exits non-zero when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --with-torch || { echo "0 passed, 1 failed"; exit 1; }

# The hostile-user tests act as a second local user (tests/hostile_user_test.cc).
if [[ $(id -u) -eq 0 ]] && ! getent passwd kiln-stranger >/dev/null; then
  useradd --system --no-create-home --shell /usr/sbin/nologin kiln-stranger
fi

# Counts test cases from each target's JUnit XML (in TESTLOGS, the
# bazel-testlogs of the config that ran); a target that failed without one
# (build failure, crash, timeout) counts as one failure. Prints "PASSED FAILED".
count_cases() {
  python3 - "$1" "$2" <<'PY'
import glob, os, re, sys, xml.etree.ElementTree as ET
passed = failed = 0
line_re = re.compile(r"^(//\S+)\s+(?:\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|SKIPPED)")
for line in open(sys.argv[1], errors="replace"):
    m = line_re.match(line.strip())
    if not m:
        continue
    target, status = m.groups()
    logs = os.path.join(sys.argv[2], target[2:].replace(":", "/"))
    # A sharded target has one XML per shard.
    paths = glob.glob(os.path.join(logs, "test.xml")) or glob.glob(os.path.join(logs, "shard_*", "test.xml"))
    cases = fails = 0
    if status in ("PASSED", "FAILED", "FLAKY"):
        for suite in (s for path in paths for s in ET.parse(path).getroot().iter("testsuite")):
            cases += int(suite.get("tests", 0)) - int(suite.get("disabled", 0) or 0) - int(suite.get("skipped", 0) or 0)
            fails += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    if status == "PASSED" and cases:
        passed += cases - fails
        failed += fails
    elif status == "PASSED":
        passed += 1
    else:
        failed += max(fails, 1)
        passed += max(cases - fails, 0)
print(passed, failed)
PY
}

log=$(mktemp /tmp/kiln-test-XXXXXX.log)
bazel test //... --test_summary=short "$@" 2>&1 | tee "$log"
bazel_status=${PIPESTATUS[0]}
read -r passed failed < <(count_cases "$log" bazel-testlogs)

# Formatting (scripts/format.sh, clang-format-19): one more case.
if scripts/format.sh --check; then
  passed=$((passed + 1))
else
  failed=$((failed + 1)) bazel_status=1
fi

# The suite in BUILD.bazel (//:tests) must name every test: one more case.
unlisted=$(comm -23 <(bazel query 'tests(//...)' 2>/dev/null | sort) \
                    <(bazel query 'tests(//:tests)' 2>/dev/null | sort))
if [[ -n "$unlisted" ]]; then
  echo "BUILD.bazel: //:tests does not name these tests: $unlisted" >&2
  failed=$((failed + 1)) bazel_status=1
else
  passed=$((passed + 1))
fi

# The client links neither GenerateCode (passes, emitter) nor RocksDB: one
# more case (a Python extension links the client).
leak=$(bazel query 'somepath(//client:client, //codegen:pipeline + //third_party/system:rocksdb)' \
         2>/dev/null) || leak="(bazel query failed)"
if [[ -n "$leak" ]]; then
  echo "BUILD.bazel: //client:client must not depend on //codegen:pipeline or RocksDB:" $leak >&2
  failed=$((failed + 1)) bazel_status=1
else
  passed=$((passed + 1))
fi

# Keys are kilnd's alone: the client finds hits by request digest and links
# no key computation (cache/request_key). One more case.
leak=$(bazel query 'somepath(//client:client_core, //cache:request_key)' 2>/dev/null) ||
  leak="(bazel query failed)"
if [[ -n "$leak" ]]; then
  echo "BUILD.bazel: //client:client_core must not depend on //cache:request_key:" $leak >&2
  failed=$((failed + 1)) bazel_status=1
else
  passed=$((passed + 1))
fi

# The client links no codegen: kilnd re-types respecializations
# (CompileRequest.input_layouts), proves padding (ProvePadding) and sends
# the limits a call's sizes are checked against (ArtifactMetadata
# .run_time_sizes); the ABI and the targets are abi/. One more case.
leak=$(bazel query 'deps(//client:client_core) intersect //codegen/...' 2>/dev/null) ||
  leak="(bazel query failed)"
if [[ -n "$leak" ]]; then
  echo "BUILD.bazel: //client:client_core must not depend on codegen:" $leak >&2
  failed=$((failed + 1)) bazel_status=1
else
  passed=$((passed + 1))
fi

# ---------------------------------------------------------------------------
# Sanitizers and fuzzing (docs/RELIABILITY.md; owner: the reliability work).
# Bounded forms only: ASan+UBSan over the unit and end-to-end tests, TSan
# over the concurrency tests, each fuzz target for KILN_FUZZ_SECONDS (25).
# Every test case counts as above, each fuzz target as one case.
# KILN_SANITIZERS=0 skips the section (a quick local run).
if [[ "${KILN_SANITIZERS:-1}" != "0" ]]; then
  sanitizer_run() {  # CONFIG TARGETS...
    local config=$1
    shift
    echo "=== --config=$config: $*"
    local start=$SECONDS
    bazel test --config="$config" --test_summary=short --keep_going "$@" 2>&1 | tee "$log"
    local status=${PIPESTATUS[0]}
    local p f
    read -r p f < <(count_cases "$log" "$(bazel info --config="$config" bazel-testlogs 2>/dev/null)")
    passed=$((passed + p)) failed=$((failed + f))
    [[ $status -ne 0 ]] && bazel_status=$status
    echo "=== --config=$config: $p passed, $f failed in $((SECONDS - start)) s"
  }
  # ASan+UBSan: every unit and end-to-end suite but the op cases and the
  # traced workloads (their eager comparisons are the default run's job).
  sanitizer_run asan //common:all //cache:all //cache/remote:all //codegen:all //codegen/compile:all \
    //codegen/compile/worker:worker_compiler_test \
    //daemon:all //daemon/admin:all //client:all //tests:e2e_test //tests:restart_test //tests:fleet_test \
    //tests:hostile_user_test //tests/ops:compare_test //tests/fuzz:all
  # TSan: the tests whose threads share memory in one process.
  sanitizer_run tsan //daemon:compile_queue_test //daemon/admin:admin_pool_test \
    //daemon:artifact_cache_test //client:runtime_test \
    //client:traffic_test //cache/remote:redis_client_test //cache/remote:remote_tier_test \
    //cache/remote:fleet_tier_test
  for target in $(scripts/fuzz.sh --list); do
    KILN_FUZZ_WORK=$(mktemp -d /tmp/kiln-fuzz-XXXXXX)
    if KILN_FUZZ_WORK=$KILN_FUZZ_WORK scripts/fuzz.sh "$target" "${KILN_FUZZ_SECONDS:-25}"; then
      passed=$((passed + 1))
      rm -rf "$KILN_FUZZ_WORK"
    else
      failed=$((failed + 1)) bazel_status=1
    fi
  done
fi
# ---------------------------------------------------------------------------

echo "$passed passed, $failed failed"
rm -f "$log"
[[ "${CI:-}" == "true" ]] && bazel shutdown >/dev/null 2>&1
exit $bazel_status
