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

# The reference workloads are a copy (tests/workloads/workloads.py); say when
# the shared original beside the checkout has moved on.
shared=../shared/workloads/workloads.py
if [[ -f $shared ]] && ! cmp -s "$shared" tests/workloads/workloads.py; then
  echo "warning: tests/workloads/workloads.py differs from $shared: copy it over" >&2
fi

log=$(mktemp /tmp/kiln-test-XXXXXX.log)
bazel test //... --test_summary=short "$@" 2>&1 | tee "$log"
bazel_status=${PIPESTATUS[0]}

# Count test cases from each target's JUnit XML; a target that failed
# without one (build failure, crash, timeout) counts as one failure.
python3 - "$log" <<'PY'
import os, re, sys, xml.etree.ElementTree as ET
passed = failed = 0
line_re = re.compile(r"^(//\S+)\s+(?:\(cached\) )?(PASSED|FAILED|TIMEOUT|FLAKY|NO STATUS|FAILED TO BUILD|SKIPPED)")
for line in open(sys.argv[1], errors="replace"):
    m = line_re.match(line.strip())
    if not m:
        continue
    target, status = m.groups()
    path = os.path.join("bazel-testlogs", target[2:].replace(":", "/"), "test.xml")
    cases = fails = 0
    if status in ("PASSED", "FAILED", "FLAKY") and os.path.exists(path):
        for suite in ET.parse(path).getroot().iter("testsuite"):
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
print(f"{passed} passed, {failed} failed")
PY
rm -f "$log"
[[ "${CI:-}" == "true" ]] && bazel shutdown >/dev/null 2>&1
exit $bazel_status
