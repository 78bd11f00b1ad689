#!/usr/bin/env bash
# Soak: minutes of mixed load (valid, hostile and garbage requests of every
# RPC, calls cancelled mid-plan, expiring deadlines, oversized messages)
# against the real partplan_server, from 8 concurrent clients. Prints the
# server's RSS over time and the status of every call by kind; the last
# line is `soak: N calls in T s, L lost; server RSS ... (flat|GROWING); clean
# exit`. Exit status 0 when no call was lost, RSS stayed flat and the server
# stopped cleanly on SIGTERM. See tests/reliability/soak_client.cc.
#
#   tools/soak.sh                # 300 s, 8 clients
#   tools/soak.sh 900 16         # 15 min, 16 clients
#   PARTPLAN_SOAK_BAZEL_FLAGS=-c\ opt tools/soak.sh   # against an optimised build
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-300}
concurrency=${2:-8}
read -r -a flags <<<"${PARTPLAN_SOAK_BAZEL_FLAGS:-}"
bazel build "${flags[@]}" //server:partplan_server //tests/reliability:soak_client || exit 1
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)
exec "$bin/tests/reliability/soak_client" --server="$bin/server/partplan_server" \
  --seconds="$seconds" --concurrency="$concurrency" \
  --sample_seconds="$(((seconds + 29) / 30))"
