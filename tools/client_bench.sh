#!/usr/bin/env bash
# The clients against the server's own time: the C++ CLI (`partplan call`),
# the Python client (`Client.call` with the request's bytes, a function
# reading them, or request_file's parts) and the Python CLI (`python3 -m
# partplan call`, JSON to stdout), each on a 10^6-node request, timed from
# outside (wall time and peak RSS) and set beside the duration the server
# logs for the same call (its x-request-id). The server runs with the plan
# cache off, so every call is planned.
#
# The Python rows send the request in parts (PartitionPlannerInParts, as
# Client.call does for every request of PARTS_MIN_BYTES or more): the
# server's duration_ms is then counted from when the whole request has
# arrived, as for a unary call, and its receive_ms (the upload) is left out
# of it. A Python call the server logged without receive_ms went unary and is
# flagged below the table.
#
#   tools/client_bench.sh            # 10^6 nodes, 3 runs of each
#   tools/client_bench.sh 100000 5   # 10^5 nodes, 5 runs
#   PARTPLAN_BENCH_BIN=/tmp/bin tools/client_bench.sh  # binaries built before
#
# PARTPLAN_BENCH_BIN names a directory holding server/partplan_server,
# client/cli/partplan and tests/bench/write_request (as bazel-bin does), to
# time binaries built before (while the tree is being changed) without
# building.
#
# Prints one line per client and call: median wall time of the process, of the
# call alone (the Python client's, without starting the interpreter), the
# server's median duration, the call's ratio to it, peak RSS, its ratio to
# the request's size, and (for the Python client) the ratio of what the call
# added to the RSS of the imported, connected client before it. The
# targets (issue #28): wall time at most 2x the server's for Validate and 3x
# for PartitionGraph with JSON output; RSS at most 2x the request.
set -euo pipefail
cd "$(dirname "$0")/.."

nodes=${1:-1000000}
runs=${2:-3}
python=${PARTPLAN_PYTHON:-/usr/bin/python3}
if [[ -n "${PARTPLAN_BENCH_BIN:-}" ]]; then
  bin=$PARTPLAN_BENCH_BIN
else
  bazel build --config=opt //server:partplan_server //client/cli:partplan //tests/bench:write_request
  bin=$(bazel info --config=opt bazel-bin 2>/dev/null)
fi
work=$(mktemp -d)
# Python runs as an installed package does: its bytecode compiled once (pip
# compiles it at install), here into the bench's own directory, whatever
# PYTHONDONTWRITEBYTECODE says (with it and no cache, each start compiles
# partplan's and the generated modules again, about 0.02 s).
export PYTHONPYCACHEPREFIX=$work/pycache
unset PYTHONDONTWRITEBYTECODE
PYTHONPATH=client/python "$python" -c 'import partplan.cli, partplan.json_writer'
server_pid=
cleanup() {
  [[ -n "$server_pid" ]] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/tests/bench/write_request" "$nodes" 8 "$work/partition_graph.pb" >/dev/null
"$bin/tests/bench/write_request" "$nodes" 8 "$work/partition_graph_by_index.pb" indices >/dev/null
# Validate takes the same graph and devices (fields 1 and 2 of both requests).
PYTHONPATH=client/python "$python" - "$work" <<'EOF'
import sys
import partplan
work = sys.argv[1]
with open(f"{work}/partition_graph.pb", "rb") as f:
    request = partplan.PartitionGraphRequest.FromString(f.read())
with open(f"{work}/validate.pb", "wb") as f:
    f.write(partplan.ValidateRequest(graph=request.graph, devices=request.devices).SerializeToString())
EOF

port=$(PYTHONPATH=client/python "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin/server/partplan_server" --host=127.0.0.1 --port="$port" --metrics_port=-1 \
  --log_format=json --plan_cache_bytes=0 >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  grep -q '"serving"' "$work/server.log" && break
  sleep 0.1
done

# run ID COMMAND...: wall seconds and peak RSS of one call, tagged ID.
run() {
  local id=$1
  shift
  /usr/bin/time -f "%e %M" -o "$work/time.$id" "$@" >/dev/null
  echo "$id $(cat "$work/time.$id")" >>"$work/timings"
}

for i in $(seq "$runs"); do
  for rpc in Validate:validate PartitionGraph:partition_graph PartitionGraph:partition_graph_by_index; do
    method=${rpc%%:*}
    file=${rpc##*:}
    run "cli.$file.$i" "$bin/client/cli/partplan" call "$method" --request="$work/$file.pb" \
      --target="127.0.0.1:$port" --deadline=300s --request_id="cli.$file.$i"
    # python: the bytes, held by the caller; pyread: a function reading them,
    # so that the client can let them go once sent; pyfile: request_file,
    # the file read a part at a time, never held whole; pyraw: the same,
    # the response returned as bytes (response_bytes=True), not parsed.
    for client in python pyread pyfile pyraw; do
      run "$client.$file.$i" env PYTHONPATH=client/python "$python" -c '
import sys, time, partplan
client_id, method, path, target, request_id, timing = sys.argv[1:]
def read():
    with open(path, "rb") as f:
        return f.read()
with partplan.Client(target, timeout=300) as client:
    client.wait_until_ready()
    with open("/proc/self/status") as f:  # RSS of the imported, connected client
        before = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    start = time.monotonic()  # what a notebook pays: the file read and the call
    if client_id == "python":
        data = read()
        client.call(method, data, metadata=[("x-request-id", request_id)])
    elif client_id == "pyread":
        client.call(method, read, metadata=[("x-request-id", request_id)])
    else:
        client.call(method, partplan.request_file(path), response_bytes=client_id == "pyraw",
                    metadata=[("x-request-id", request_id)])
    with open(timing, "w") as out:
        out.write(f"{time.monotonic() - start} {before}")
' "$client" "$method" "$work/$file.pb" "127.0.0.1:$port" "$client.$file.$i" "$work/call.$client.$file.$i"
    done
    run "pycli.$file.$i" env PYTHONPATH=client/python "$python" -m partplan call "$method" \
      --request="$work/$file.pb" --target="127.0.0.1:$port" --deadline=300s --request-id="pycli.$file.$i"
  done
done

PYTHONPATH=client/python "$python" - "$work" <<'EOF'
import json, os, statistics, sys
work = sys.argv[1]
server = {}
in_parts = set()
with open(f"{work}/server.log") as f:
    for line in f:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("request_id") and "duration_ms" in entry:
            server[entry["request_id"]] = float(entry["duration_ms"]) / 1000
            if "receive_ms" in entry:
                in_parts.add(entry["request_id"])
runs = {}
unary = []
with open(f"{work}/timings") as f:
    for line in f:
        request_id, wall, rss_kb = line.split()
        client, file, _ = request_id.split(".")
        if client.startswith("py") and request_id not in in_parts:
            unary.append(request_id)
        call_file = f"{work}/call.{request_id}"
        call, before_kb = float(wall), None
        if os.path.exists(call_file):
            call, before_kb = open(call_file).read().split()
            call, before_kb = float(call), int(before_kb)
        runs.setdefault((client, file), []).append(
            (float(wall), call, int(rss_kb) * 1024, server[request_id],
             None if before_kb is None else (int(rss_kb) - before_kb) * 1024))
# wall: the whole process; call: the file read and the call alone (for the
# CLIs, the process is the call); added: peak RSS less the client's before.
print(f"{'client':7} {'request':26} {'wall s':>7} {'call s':>7} {'server s':>8} {'ratio':>6} "
      f"{'RSS MB':>7} {'RSS/req':>7} {'added/req':>9}")
for (client, file), samples in sorted(runs.items()):
    wall = statistics.median(s[0] for s in samples)
    call = statistics.median(s[1] for s in samples)
    duration = statistics.median(s[3] for s in samples)
    rss = max(s[2] for s in samples)
    size = os.path.getsize(f"{work}/{file}.pb")
    added = "" if samples[0][4] is None else f"{max(s[4] for s in samples) / size:9.2f}"
    print(f"{client:7} {file:26} {wall:7.2f} {call:7.2f} {duration:8.2f} {call / duration:6.1f} "
          f"{rss / 2**20:7.0f} {rss / size:7.2f} {added}")
if unary:
    print(f"not in parts (the server has no PartitionPlannerInParts?): {' '.join(unary)}")
EOF
