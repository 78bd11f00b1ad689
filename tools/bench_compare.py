#!/usr/bin/env python3
"""The table of tools/bench_compare.sh: reads its output directory and prints,
per benchmark, the median time over the repetitions before and after, and the
change.

  /usr/bin/python3 tools/bench_compare.py [--threshold 5] OUT_DIR

OUT_DIR holds one Google Benchmark JSON file per run, named
<before|after>_<repetition>_<index>.json, and load.txt (lines "side rep index
load1"). The time is CPU time, except for benchmarks measured in real time
(whose names end in /real_time). Rows whose median moved by more than the
threshold are marked; "min" is the change between the fastest runs of each
side, which a busy machine disturbs less than the median.
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
    parser.add_argument("out")
    args = parser.parse_args()

    times = {}  # (index, name) -> {"before": [s, ...], "after": [...]}
    errors = {}  # name -> {"side: message", ...}
    for path in glob.glob(os.path.join(args.out, "*.json")):
        m = re.match(r"(before|after)_(\d+)_(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        side, index = m.group(1), int(m.group(3))
        with open(path) as f:
            rows = json.load(f).get("benchmarks", [])
        for row in rows:
            if row.get("run_type") == "aggregate":
                continue
            name = row["name"]
            sides = times.setdefault((index, name), {"before": [], "after": []})
            if row.get("error_occurred"):
                errors.setdefault(name, set()).add(f"{side}: {row.get('error_message', '')}")
                continue
            key = "real_time" if name.endswith("/real_time") else "cpu_time"
            seconds = row[key] * SCALE[row["time_unit"]]
            sides[side].append(seconds)

    if not times:
        sys.exit(f"no results in {args.out}")

    header = ("Benchmark", "before ms", "after ms", "change", "min change", "runs")
    lines = []
    flagged = []
    for (index, name), sides in sorted(times.items()):
        b, a = sides["before"], sides["after"]
        if not b or not a:
            lines.append((name, "-", "-", "error" if name in errors else "missing", "",
                          f"{len(b)}/{len(a)}"))
            continue
        mb, ma = statistics.median(b), statistics.median(a)
        change = 100 * (ma / mb - 1)
        min_change = 100 * (min(a) / min(b) - 1)
        mark = " *" if abs(change) > args.threshold else ""
        if mark:
            flagged.append(name)
        lines.append((name, f"{mb * 1e3:.2f}", f"{ma * 1e3:.2f}", f"{change:+.1f}%{mark}",
                      f"{min_change:+.1f}%", f"{len(b)}/{len(a)}"))

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
    load_path = os.path.join(args.out, "load.txt")
    if os.path.exists(load_path):
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
