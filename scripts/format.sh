#!/usr/bin/env bash
# Formats Kiln's C and C++ sources with clang-format-19 and .clang-format
# (Google style, 100 columns). With --check, changes nothing and exits
# non-zero naming the files that need formatting (the test command runs
# this). Debian's default clang-format formats differently: use 19.
set -euo pipefail
cd "$(dirname "$0")/.."
# Left as written: third-party code, and the two headers whose text is
# embedded in every generated artifact (reformatting them would change
# every artifact's source for nothing).
files=$(git ls-files '*.cc' '*.h' '*.c' | grep -v -e '^third_party/' \
          -e '^codegen/emit/kiln_math.h$' -e '^abi/kiln_abi.h$')
if [[ "${1:-}" == "--check" ]]; then
  unformatted=$(echo "$files" | xargs clang-format-19 --dry-run 2>&1 |
                  sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning:.*/\1/p' | sort -u)
  if [[ -n "$unformatted" ]]; then
    echo "not formatted (run scripts/format.sh):" $unformatted >&2
    exit 1
  fi
  exit 0
fi
echo "$files" | xargs clang-format-19 -i
