#!/usr/bin/env bash
# Compares the Google Benchmark results of two checkouts of this repository,
# side by side: "before" (e.g. a worktree at the commit before a change) and
# "after" (e.g. a worktree at the change). It runs a fixed set of benchmarks
# covering every RPC's planner path from each checkout's optimised bazel-bin,
# interleaved (each benchmark before, after, then after, before on the next
# repetition, so that a busy spell on the machine hits both sides), and prints
# per benchmark the median over the repetitions on each side and the change
# (tools/bench_compare.py; also the change between the fastest runs and the
# median change within back-to-back pairs, which load disturbs less).
#
#   git -C /work/main worktree add --detach /work/wt-before <before-commit>
#   git -C /work/main worktree add --detach /work/wt-after <after-commit>
#   tools/bench_compare.sh --build /work/wt-before /work/wt-after
#
#   # Later, for a new "after" commit:
#   git -C /work/wt-after checkout --detach <commit>
#   tools/bench_compare.sh --build /work/wt-before /work/wt-after
#
#   # Again for the rows that moved (a regex over the benchmark names):
#   tools/bench_compare.sh --only 'KlBased|EndToEnd' /work/wt-before /work/wt-after
#
# Options:
#   --build         first `bazel build --config=opt` the benchmarks in both
#                   checkouts (otherwise they must be built already)
#   --reps N        repetitions per side (default 3; at least 3 for a median)
#   --only REGEX    run only the benchmarks of the set whose name matches
#   --min-time S    --benchmark_min_time per run (default: the library's)
#   --threshold P   mark rows whose median moved by more than P% (default 5)
#
# The time compared is CPU time, except for the benchmarks measured in real
# time (names ending /real_time: end to end through a loopback server). A
# benchmark missing from either checkout's binary is skipped with a warning.
# Raw outputs (--benchmark_out_format=json, one file per run) and the machine's
# load go to $BENCH_OUT (default: a new /tmp/bench_compare.* directory). The
# machine's load average is printed before and after, and the mean load during
# each side's runs in the table's footer: on a shared machine, repeat the rows
# beyond the threshold (--only) before reading them as a change, and pool the
# runs: /usr/bin/python3 tools/bench_compare.py OUT_DIR OUT_DIR2 ... The rows
# timed in real time (client and server on the same cores) swing most with
# the load; for them --min-time 3 gives several calls per run.
set -euo pipefail

usage() {
  echo "usage: $0 [--build] [--reps N] [--only REGEX] [--min-time S] [--threshold P] BEFORE_DIR AFTER_DIR" >&2
  exit 2
}

build=0
reps=3
only=
min_time=
threshold=5
dirs=()
while (($#)); do
  case "$1" in
    --build) build=1 ;;
    --reps) reps=${2:?}; shift ;;
    --only) only=${2:?}; shift ;;
    --min-time) min_time=${2:?}; shift ;;
    --threshold) threshold=${2:?}; shift ;;
    -h|--help) usage ;;
    -*) usage ;;
    *) dirs+=("$1") ;;
  esac
  shift
done
((${#dirs[@]} == 2)) || usage
before_dir=$(cd "${dirs[0]}" && pwd)
after_dir=$(cd "${dirs[1]}" && pwd)
tools_dir=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3

targets=(//tests/bench:partitioner_bench //tests/bench:end_to_end_bench
         //tests/bench/pipeline:pipeline_bench)

# The set: binary (under bazel-bin) and exact benchmark name. Every RPC's
# planner at sizes where one run takes tens of milliseconds or more. Only
# benchmarks whose bodies time the same work on both sides belong here.
benchmarks=(
  # Validate (the import alone), PartitionGraph per mode, SplitGraph, on two
  # graph shapes at 10^5 nodes.
  "tests/bench/partitioner_bench BM_Validate/residual/100000"
  "tests/bench/partitioner_bench BM_Validate/transformer/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphSizeBased/residual/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphSizeBased/transformer/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphKlBased/residual/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphKlBased/transformer/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphAotBased/residual/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphAotBased/transformer/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphAotBasedShuffled/chain/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphSparseNn/recommendation/100000"
  "tests/bench/partitioner_bench BM_PartitionGraphSparseNnInterleaved/interleaved/100000"
  # COST_AWARE's pairwise search is quadratic or worse: a small graph.
  "tests/bench/partitioner_bench BM_PartitionGraphCostAware/residual/128"
  "tests/bench/partitioner_bench BM_SplitGraph/residual/100000"
  "tests/bench/partitioner_bench BM_SplitGraph/transformer/100000"
  "tests/bench/partitioner_bench BM_PlanDataParallel/aten_mlp/100000"
  # ShardGraph as the server answers it, Plan with BALANCED stages,
  # BuildPipelineGraph. Not BM_Plan: 88e2dc5 changed what it times (the
  # response's bytes instead of a response message), so the two sides of a
  # comparison across that commit time different work.
  "tests/bench/pipeline/pipeline_bench BM_Request/balanced_8/100000"
  "tests/bench/pipeline/pipeline_bench BM_Request/fairscale_8/100000"
  "tests/bench/pipeline/pipeline_bench BM_PlanShards/balanced_8/100000"
  "tests/bench/pipeline/pipeline_bench BM_PipelineGraph/100000"
  # PartitionGraph through gRPC on loopback, 10^6 nodes, plan by index and by
  # name.
  "tests/bench/end_to_end_bench BM_PartitionGraphEndToEnd/by_index/1000000/real_time"
  "tests/bench/end_to_end_bench BM_PartitionGraphEndToEnd/by_name/1000000/real_time"
)

out=${BENCH_OUT:-$(mktemp -d /tmp/bench_compare.XXXXXX)}
mkdir -p "$out"

if ((build)); then
  for dir in "$before_dir" "$after_dir"; do
    echo "== bazel build --config=opt in $dir ($(git -C "$dir" rev-parse --short HEAD))"
    (cd "$dir" && bazel build --config=opt "${targets[@]}")
  done
fi

# The optimised bazel-bin of each checkout, whatever the bazel-bin symlink
# points at now.
before_bin=$(cd "$before_dir" && bazel info --config=opt bazel-bin 2>/dev/null)
after_bin=$(cd "$after_dir" && bazel info --config=opt bazel-bin 2>/dev/null)
for bin in "$before_bin" "$after_bin"; do
  for target in "${targets[@]}"; do
    path=${target#//}
    path="$bin/${path/://}"
    [[ -x "$path" ]] || { echo "$path: not built (run with --build)" >&2; exit 1; }
  done
done

# Benchmarks present in both binaries.
selected=()
for entry in "${benchmarks[@]}"; do
  read -r binary name <<< "$entry"
  [[ -n "$only" && ! "$name" =~ $only ]] && continue
  present=1
  for bin in "$before_bin" "$after_bin"; do
    list="$out/list_$(echo "$bin/$binary" | md5sum | cut -c1-8).txt"
    [[ -f "$list" ]] || "$bin/$binary" --benchmark_list_tests > "$list" 2>/dev/null
    grep -qxF "$name" "$list" || { echo "warning: $name not in $bin/$binary; skipped" >&2; present=0; }
  done
  ((present)) && selected+=("$entry")
done
((${#selected[@]})) || { echo "no benchmark selected" >&2; exit 1; }

{
  echo "before: $before_dir $(git -C "$before_dir" rev-parse --short HEAD) ($before_bin)"
  echo "after:  $after_dir $(git -C "$after_dir" rev-parse --short HEAD) ($after_bin)"
  echo "benchmarks: ${#selected[@]}, repetitions per side: $reps, outputs: $out"
  echo "uptime before: $(uptime)"
} | tee "$out/conditions.txt"

# One run: one benchmark of one side, its JSON and the load average around it.
run() {
  local side=$1 rep=$2 index=$3 binary=$4 name=$5 bin
  if [[ $side == before ]]; then bin=$before_bin; else bin=$after_bin; fi
  local filter="^${name}\$"
  local args=(--benchmark_filter="$filter" --benchmark_out_format=json
              --benchmark_out="$out/${side}_${rep}_${index}.json")
  [[ -n "$min_time" ]] && args+=(--benchmark_min_time="$min_time")
  echo "$side $rep $index $(cut -d' ' -f1 /proc/loadavg)" >> "$out/load.txt"
  # The end-to-end server logs a line per call to stdout.
  "$bin/$binary" "${args[@]}" > "$out/${side}_${rep}_${index}.txt" 2>&1 \
    || echo "warning: $side: $name failed; see $out/${side}_${rep}_${index}.txt" >&2
}

total=$((reps * ${#selected[@]}))
done_runs=0
for ((rep = 1; rep <= reps; rep++)); do
  if ((rep % 2)); then order=(before after); else order=(after before); fi
  for index in "${!selected[@]}"; do
    read -r binary name <<< "${selected[$index]}"
    done_runs=$((done_runs + 1))
    printf '[%d/%d] %s (%s first), load %s\n' "$done_runs" "$total" "$name" "${order[0]}" \
      "$(cut -d' ' -f1-3 /proc/loadavg)"
    for side in "${order[@]}"; do
      run "$side" "$rep" "$index" "$binary" "$name"
    done
  done
done

echo "uptime after: $(uptime)" | tee -a "$out/conditions.txt"
"$python" "$tools_dir/bench_compare.py" --threshold "$threshold" "$out"
