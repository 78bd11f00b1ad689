#!/usr/bin/env python3
"""The table of tools/bench_compare.sh: reads its output directory and prints,
per benchmark, the median time over the repetitions before and after, and the
change.

  /usr/bin/python3 tools/bench_compare.py [--threshold 5] OUT_DIR [OUT_DIR...]

Several OUT_DIRs (say a full run and a repeat of some rows with --only) are
pooled: every run of a benchmark counts. Each OUT_DIR holds one Google Benchmark JSON file per run, named
<before|after>_<repetition>_<index>.json, and load.txt (lines "side rep index
load1"). The time is CPU time, except for benchmarks measured in real time
(whose names end in /real_time). Rows whose median moved by more than the
threshold are marked. Two more views of the same runs, for judging noise:
"min change" compares the fastest run of each side, which a busy machine
disturbs least; "paired change" is the median over repetitions of after /
before within one repetition (the two runs were back to back, so they saw
about the same load).
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

SCALE = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threshold", type=float, default=5.0)
    parser.add_argument("outs", nargs="+")
    args = parser.parse_args()

    times = {}  # (index, name) -> {"before": [s, ...], "after": [...]}
    errors = {}  # name -> {"side: message", ...}
    paired = {}  # (index, name) -> {rep: {"before": s, "after": s}}
    first_seen = set()  # (directory's position, index, name)
    paths = [(d, p) for d in args.outs for p in sorted(glob.glob(os.path.join(d, "*.json")))]
    for out, path in paths:
        m = re.match(r"(before|after)_(\d+)_(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        side, rep, index = m.group(1), (out, int(m.group(2))), int(m.group(3))
        with open(path) as f:
            rows = json.load(f).get("benchmarks", [])
        for row in rows:
            if row.get("run_type") == "aggregate":
                continue
            name = row["name"]
            first_seen.add((args.outs.index(out), index, name))
            sides = times.setdefault((index, name), {"before": [], "after": []})
            if row.get("error_occurred"):
                errors.setdefault(name, set()).add(f"{side}: {row.get('error_message', '')}")
                continue
            key = "real_time" if name.endswith("/real_time") else "cpu_time"
            seconds = row[key] * SCALE[row["time_unit"]]
            sides[side].append(seconds)
            paired.setdefault((index, name), {}).setdefault(rep, {})[side] = seconds

    if not times:
        sys.exit(f"no results in {' '.join(args.outs)}")

    header = ("Benchmark", "before ms", "after ms", "change", "min change", "paired change", "runs")
    lines = []
    flagged = []
    # In the order of the set: where a name first appears, directory by directory.
    order = {}
    for (out, index, name) in sorted(first_seen):
        order.setdefault(name, (out, index))
    merged = {}
    for (index, name), sides in times.items():
        m = merged.setdefault(name, {"before": [], "after": []})
        m["before"] += sides["before"]
        m["after"] += sides["after"]
    merged_pairs = {}
    for (index, name), reps in paired.items():
        for rep, pair in reps.items():
            merged_pairs.setdefault(name, {})[(index, rep)] = pair
    for name in sorted(merged, key=lambda n: order[n]):
        sides = merged[name]
        b, a = sides["before"], sides["after"]
        if not b or not a:
            lines.append((name, "-", "-", "error" if name in errors else "missing", "", "",
                          f"{len(b)}/{len(a)}"))
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        change = 100 * (ma / mb - 1)
        min_change = 100 * (min(a) / min(b) - 1)
        ratios = [r["after"] / r["before"] for r in merged_pairs[name].values()
                  if "after" in r and "before" in r]
        paired_change = 100 * (statistics.median(ratios) - 1)
        mark = " *" if abs(change) > args.threshold else ""
        if mark:
            flagged.append(name)
        lines.append((name, f"{mb * 1e3:.2f}", f"{ma * 1e3:.2f}", f"{change:+.1f}%{mark}",
                      f"{min_change:+.1f}%", f"{paired_change:+.1f}%", f"{len(b)}/{len(a)}"))

    widths = [max(len(str(r[i])) for r in [header] + lines) for i in range(len(header))]
    def fmt(r):
        return "| " + " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(r, widths))) + " |"
    print()
    print(fmt(header))
    print("|" + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":"
                         for i, w in enumerate(widths)) + "|")
    for r in lines:
        print(fmt(r))

    loads = {"before": [], "after": []}
    for out in args.outs:
        load_path = os.path.join(out, "load.txt")
        if not os.path.exists(load_path):
            continue
        with open(load_path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4 and parts[0] in loads:
                    loads[parts[0]].append(float(parts[3]))
    print()
    print("Medians of CPU time (real time for /real_time) over the runs of each side; change is "
          "after / before - 1; * beyond "
          f"{args.threshold:g}%.")
    for side in ("before", "after"):
        if loads[side]:
            print(f"1-minute load average at the start of the {side} runs: mean "
                  f"{statistics.mean(loads[side]):.2f}, min {min(loads[side]):.2f}, "
                  f"max {max(loads[side]):.2f} ({os.cpu_count()} CPUs)")
    for name, messages in sorted(errors.items()):
        for message in sorted(messages):
            print(f"error: {name}: {message}")
    if flagged:
        print(f"Beyond {args.threshold:g}%: " + ", ".join(flagged))
        print("Repeat them with --only before reading them as a change.")
    else:
        print(f"No row beyond {args.threshold:g}%.")


if __name__ == "__main__":
    main()
