#!/usr/bin/env bash
# Runs every test and ends with the line `tests: N passed, M failed`.
#
#   tools/test.sh                   # all tests
#   tools/test.sh --config=asan     # Bazel flags given replace --config=opt
#   PARTPLAN_SANITIZE=1 tools/test.sh  # also every C++ test under ASan+UBSan
#
# Installs missing Debian packages first (tools/install_deps.sh --python:
# the Python client's tests need python3-torch, python3-torchvision,
# python3-grpcio and python3-protobuf). The count is of GoogleTest cases,
# read from each test target's test.xml (a target that failed to build or
# crashed without a report counts as one failure), plus the Python client's
# unittest cases (client/python/tests/run.py, run with /usr/bin/python3 or
# $PARTPLAN_PYTHON against the server binary this run built).
#
# The Bazel tests run once, built with --config=opt as the image's binary
# is: the compiler warns about more at -O2, and no code differs between
# build modes (tests/architecture:build_mode_test keeps assert and NDEBUG
# out of the sources), so a second run in the default mode would test the
# same code again.
#
# With PARTPLAN_SANITIZE=1 the C++ tests run once more, built with
# --config=asan-ubsan (into an output directory of their own), and their
# cases count too. It is off by default: a cold sanitizer build and run took
# about 25 minutes on a 2-core machine (README.md, "Reliability").
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh --python || { echo "tests: 0 passed, 1 failed"; exit 1; }

targets=$(bazel query 'tests(//...)' 2>/dev/null)
if [[ -z "$targets" ]]; then
  echo "no test targets found" >&2
  echo "tests: 0 passed, 1 failed"
  exit 1
fi

# The build that ships (deploy/docker/Dockerfile builds with -c opt), unless
# Bazel flags are given.
given_flags=("$@")
flags=("${given_flags[@]}")
if [[ ${#flags[@]} -eq 0 ]]; then
  flags=(--config=opt)
fi

summary=$(mktemp)
python_log=$(mktemp)
trap 'rm -f "$summary" "$python_log"' EXIT
bazel test --keep_going --test_summary=short "${flags[@]}" //... 2>&1 | tee "$summary"
bazel_status=${PIPESTATUS[0]}

passed=0
failed=0
# count_reports SUMMARY TESTLOGS TARGET...: adds the GoogleTest cases of
# each target's test.xml to passed and failed.
count_reports() {
  local summary_file=$1 testlogs=$2
  shift 2
  local target package name xml p f
  for target in "$@"; do
    package=${target#//}
    package=${package%%:*}
    name=${target##*:}
    xml="$testlogs/$package/$name/test.xml"
    # Only a target this run tested (or found cached) has a current report;
    # one that failed to build or has no status may have a stale one.
    if ! grep -Eq "^$target +(\(cached\) )?(PASSED|FAILED)" "$summary_file" || [[ ! -f "$xml" ]]; then
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
}
# shellcheck disable=SC2086  # one target per word
count_reports "$summary" "$(bazel info bazel-testlogs "${flags[@]}" 2>/dev/null)" $targets

if [[ $bazel_status -ne 0 && $failed -eq 0 ]]; then
  # Bazel failed (e.g. a build error) without a failing test case to show.
  failed=1
fi

# rerun_cpp_tests CONFIG EXCLUDED: every test but those under EXCLUDED (a
# package pattern, or "" for none) again, built with --config=CONFIG into
# that config's own output directory; their cases count too.
rerun_cpp_tests() {
  local config=$1 excluded=$2
  local query='tests(//...)' patterns=(//...)
  if [[ -n "$excluded" ]]; then
    query="$query except tests($excluded)"
    patterns+=("-$excluded")
  fi
  local rerun_targets rerun_summary rerun_status failed_before
  rerun_targets=$(bazel query "$query" 2>/dev/null)
  rerun_summary=$(mktemp)
  # --symlink_prefix=/: the bazel-* links keep pointing at the first run's build.
  bazel test --config="$config" --symlink_prefix=/ --keep_going --test_summary=short \
    "${given_flags[@]}" -- \
    "${patterns[@]}" 2>&1 | tee "$rerun_summary"
  rerun_status=${PIPESTATUS[0]}
  failed_before=$failed
  # shellcheck disable=SC2086  # one target per word
  count_reports "$rerun_summary" \
    "$(bazel info --config="$config" bazel-testlogs "${given_flags[@]}" 2>/dev/null)" $rerun_targets
  rm -f "$rerun_summary"
  if [[ $rerun_status -ne 0 && $failed -eq $failed_before ]]; then
    failed=$((failed + 1))
  fi
  if [[ $rerun_status -ne 0 ]]; then
    bazel_status=$rerun_status
  fi
}
if [[ "${PARTPLAN_SANITIZE:-0}" == 1 ]]; then
  # The C++ tests only: tests/deploy checks the image's packages against the
  # binary's libraries, which under sanitizers include libasan and libubsan.
  rerun_cpp_tests asan-ubsan //tests/deploy/...
fi

# The Python client (client/python): its last line is
# `python tests: N passed, M failed, K skipped`; skipped tests count as
# neither.
python=${PARTPLAN_PYTHON:-/usr/bin/python3}
bazel_bin=$(bazel info bazel-bin "${flags[@]}" 2>/dev/null)
PARTPLAN_SERVER="$bazel_bin/server/partplan_server" "$python" client/python/tests/run.py 2>&1 |
  tee "$python_log"
python_status=${PIPESTATUS[0]}
python_count=$(sed -nE 's/^python tests: ([0-9]+) passed, ([0-9]+) failed.*/\1 \2/p' "$python_log" | tail -1)
python_failed=1  # no count (a crash) is one failure
if [[ -n "$python_count" ]]; then
  read -r python_passed python_failed <<<"$python_count"
  passed=$((passed + python_passed))
else
  echo "no count from the Python tests" >&2
fi
if [[ $python_status -ne 0 && $python_failed -eq 0 ]]; then
  python_failed=1  # it failed without a failing test to show
fi
failed=$((failed + python_failed))

echo "tests: $passed passed, $failed failed"
[[ $failed -eq 0 && $bazel_status -eq 0 && $python_status -eq 0 ]]
