#!/usr/bin/env bash
# Runs every test and ends with the line `tests: N passed, M failed`.
#
#   tools/test.sh                   # all tests
#   tools/test.sh --config=asan     # extra Bazel flags are passed through
#
# Installs missing Debian packages first (tools/install_deps.sh). The count
# is of GoogleTest cases, read from each test target's test.xml; a target
# that failed to build or crashed without a report counts as one failure.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh || { echo "tests: 0 passed, 1 failed"; exit 1; }

targets=$(bazel query 'tests(//...)' 2>/dev/null)
if [[ -z "$targets" ]]; then
  echo "no test targets found" >&2
  echo "tests: 0 passed, 1 failed"
  exit 1
fi

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
bazel test --keep_going --test_summary=short "$@" //... 2>&1 | tee "$summary"
bazel_status=${PIPESTATUS[0]}

testlogs=$(bazel info bazel-testlogs "$@" 2>/dev/null)
passed=0
failed=0
for target in $targets; do
  package=${target#//}
  package=${package%%:*}
  name=${target##*:}
  xml="$testlogs/$package/$name/test.xml"
  # Only a target this run tested (or found cached) has a current report;
  # one that failed to build or has no status may have a stale one.
  if ! grep -Eq "^$target +(\(cached\) )?(PASSED|FAILED)" "$summary" || [[ ! -f "$xml" ]]; then
    echo "no test report for $target" >&2
    failed=$((failed + 1))
    continue
  fi
  read -r p f < <(awk '
    /<testcase/ { in_case = 1; bad = 0; total++ }
    in_case && /<(failure|error)/ { bad = 1 }
    in_case && (/<\/testcase>/ || /<testcase[^>]*\/>/) { if (bad) failures++; in_case = 0 }
    END { print total - failures, failures + 0 }' "$xml")
  passed=$((passed + p))
  failed=$((failed + f))
done

if [[ $bazel_status -ne 0 && $failed -eq 0 ]]; then
  # Bazel failed (e.g. a build error) without a failing test case to show.
  failed=1
fi
echo "tests: $passed passed, $failed failed"
[[ $failed -eq 0 && $bazel_status -eq 0 ]]
