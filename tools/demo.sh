#!/usr/bin/env bash
# Installs what is missing, builds the server and the CLI (optimised, as the
# container image's binary is: the default build plans several times slower),
# starts the server
# with its defaults (gRPC on :50051, metrics on :9090) and sends the sample
# graph through the CLI, printing the plan. The server keeps running until
# Ctrl-C (it then drains and exits cleanly).
#
#   tools/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh
bazel build --config=opt //server:partplan_server //client/cli:partplan
server=bazel-bin/server/partplan_server
cli=bazel-bin/client/cli/partplan

"$server" &
server_pid=$!
stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
trap stop_server EXIT
trap 'exit 0' INT TERM

# Wait until the server answers (a Validate call), for at most 10 s.
for _ in $(seq 50); do
  if "$cli" call Validate --request=client/examples/validate.json --deadline=1s >/dev/null 2>&1; then
    break
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "the server exited; is port 50051 or 9090 already in use?" >&2
    exit 1
  fi
  sleep 0.2
done

echo "== partplan partition --graph=client/examples/graph_mlp.json --device_memory=10MiB,10MiB,10MiB"
"$cli" partition --graph=client/examples/graph_mlp.json --device_memory=10MiB,10MiB,10MiB \
  --output=table
echo
echo "The server is running: gRPC on localhost:50051, metrics on http://localhost:9090/metrics."
echo "Try: $cli call PartitionGraph --request=client/examples/partition_graph.json"
echo "Press Ctrl-C to stop it."
wait "$server_pid"
