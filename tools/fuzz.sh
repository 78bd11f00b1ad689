#!/usr/bin/env bash
# Runs partplan's libFuzzer targets (tests/fuzz) for a given time each and
# reports what they found.
#
#   tools/fuzz.sh                 # every fuzzer, 60 s each
#   tools/fuzz.sh 600             # every fuzzer, 10 min each
#   tools/fuzz.sh 300 plan split_graph
#
# Builds the fuzzers with clang, libFuzzer, ASan and UBSan (--config=fuzz)
# in a Bazel output base of their own ($PARTPLAN_FUZZ_OUTPUT_BASE, default
# ~/.cache/partplan-fuzz-bazel), so the workspace's usual build is left
# alone. Installs clang and libclang-rt-14-dev if missing
# (tools/install_deps.sh --fuzz). Everything else goes under
# $PARTPLAN_FUZZ_DIR (default /tmp/partplan-fuzz):
#   seeds/<fuzzer>/     the seed corpus, made from tests/fixtures/**.json and
#                       client/examples (tests/fuzz/make_corpus), each run
#   corpus/<fuzzer>/    what libFuzzer adds; kept, so later runs go on from it
#   findings/<fuzzer>/  crash-*, leak-*, timeout-*, oom-* inputs
#   logs/<fuzzer>.log   libFuzzer's output
# A fuzzer keeps going after a finding (fork mode) until its time is up.
# PARTPLAN_FUZZ_JOBS=N runs N fuzzers at a time (default 1).
#
# The last line is `fuzz: N fuzzers, T s each, E executions, F findings`
# (findings of this run); the exit status is 1 when anything was found. Reproduce a finding with the
# fuzzer binary the summary names, e.g.
#   ~/.cache/partplan-fuzz-bazel/.../tests/fuzz/plan_fuzzer findings/plan/crash-...
# or, with gcc and no libFuzzer: bazel run //tests/fuzz:plan_fuzzer -- $PWD/crash-...
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: tools/fuzz.sh [seconds] [fuzzer...]" >&2
  exit 2
fi
all_fuzzers=(partition_graph split_graph shard_graph build_pipeline_graph plan_data_parallel plan
  validate)
fuzzers=("$@")
if [[ ${#fuzzers[@]} -eq 0 ]]; then
  fuzzers=("${all_fuzzers[@]}")
fi
out=${PARTPLAN_FUZZ_DIR:-/tmp/partplan-fuzz}
output_base=${PARTPLAN_FUZZ_OUTPUT_BASE:-$HOME/.cache/partplan-fuzz-bazel}
jobs=${PARTPLAN_FUZZ_JOBS:-1}

tools/install_deps.sh --fuzz || exit 1

bazel=(bazel --output_base="$output_base")
targets=(//tests/fuzz:make_corpus)
for fuzzer in "${fuzzers[@]}"; do
  targets+=("//tests/fuzz:${fuzzer}_fuzzer")
done
echo "building ${#fuzzers[@]} fuzzers with --config=fuzz (output base $output_base)" >&2
if ! "${bazel[@]}" build --config=fuzz "${targets[@]}"; then
  echo "fuzz: build failed" >&2
  exit 1
fi
bin=$("${bazel[@]}" info --config=fuzz bazel-bin 2>/dev/null)

mkdir -p "$out/seeds" "$out/logs"
rm -rf "$out/seeds"
"$bin/tests/fuzz/make_corpus" "$out/seeds" >&2 || {
  echo "fuzz: cannot make the seed corpus" >&2
  exit 1
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

run_one() {
  local fuzzer=$1
  mkdir -p "$out/corpus/$fuzzer" "$out/findings/$fuzzer"
  # -timeout: an input planning for over 10 s is a finding (a hang); the
  # planners' own bounds keep every valid one far below that.
  "$bin/tests/fuzz/${fuzzer}_fuzzer" \
    -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=1048576 \
    -print_final_stats=1 -artifact_prefix="$out/findings/$fuzzer/" \
    "$out/corpus/$fuzzer" "$out/seeds/$fuzzer" >"$out/logs/$fuzzer.log" 2>&1
}

finding_files() {
  find "$out/findings/$1" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) 2>/dev/null | sort
}
declare -A before
for fuzzer in "${fuzzers[@]}"; do
  before[$fuzzer]=$(finding_files "$fuzzer")
done

running=0
for fuzzer in "${fuzzers[@]}"; do
  echo "fuzzing $fuzzer for $seconds s" >&2
  run_one "$fuzzer" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

total_execs=0
total_findings=0
printf '%-22s %10s %8s %8s %8s %s\n' fuzzer executions cov corpus findings >&2
for fuzzer in "${fuzzers[@]}"; do
  log="$out/logs/$fuzzer.log"
  # Fork mode's last status line: "#N: cov: C ft: F corp: K exec/s: ..."
  status=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -1)
  execs=$(sed -nE 's/^#([0-9]+): .*/\1/p' <<<"$status")
  cov=$(sed -nE 's/.* cov: ([0-9]+) .*/\1/p' <<<"$status")
  corp=$(sed -nE 's/.* corp: ([0-9]+) .*/\1/p' <<<"$status")
  # Findings of this run only (earlier runs' stay in the directory).
  new=$(comm -13 <(echo "${before[$fuzzer]}") <(finding_files "$fuzzer") | sed '/^$/d')
  findings=$(sed '/^$/d' <<<"$new" | wc -l)
  printf '%-22s %10s %8s %8s %8s\n' "$fuzzer" "${execs:-?}" "${cov:-?}" "${corp:-?}" \
    "$findings" >&2
  total_execs=$((total_execs + ${execs:-0}))
  total_findings=$((total_findings + findings))
  if [[ $findings -gt 0 ]]; then
    grep -h -m3 -E '==partplan fuzz finding==|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' \
      "$log" "$out/findings/$fuzzer"/*.log 2>/dev/null | sed 's/^/    /' >&2
    sed 's/^/    new: /' <<<"$new" >&2
    echo "    binary: $bin/tests/fuzz/${fuzzer}_fuzzer" >&2
  fi
done
echo "fuzz: ${#fuzzers[@]} fuzzers, $seconds s each, $total_execs executions, $total_findings findings"
[[ $total_findings -eq 0 ]]
