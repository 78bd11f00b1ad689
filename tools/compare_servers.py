"""Sends every request of a corpus to two partplan_server binaries and counts
the answers that differ: for a change that must not change behaviour (a
refactor), the old build against the new.

    bazel build //tests/fuzz:make_corpus && bazel-bin/tests/fuzz/make_corpus /tmp/corpus
    /usr/bin/python3 tools/compare_servers.py OLD_SERVER NEW_SERVER /tmp/corpus

The corpus is make_corpus's: a directory per RPC (snake_case), a serialised
request per file. Responses are compared with every planner_seconds cleared
(wall time); errors by code, message and the bytes of their google.rpc.Status
details. Exits 1 when any answer differs.
"""

import glob
import os
import re
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "python"))
import grpc  # noqa: E402
from partplan import messages as pb  # noqa: E402

SERVICE = pb.planner_service_pb2.DESCRIPTOR.services_by_name["PartitionPlanner"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(binary):
    """The server on a free loopback port, and a channel to it."""
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--port={port}", "--metrics_port=-1", "--health_port=-1", "--max_call_seconds=120"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                    options=[("grpc.max_receive_message_length", 1 << 30)])
    grpc.channel_ready_future(channel).result(timeout=60)
    return process, channel


def clear_planner_seconds(message):
    for field, value in message.ListFields():
        if field.name == "planner_seconds":
            message.ClearField(field.name)
        elif field.message_type is not None and not field.message_type.GetOptions().map_entry:
            for item in (value if field.label == field.LABEL_REPEATED else [value]):
                clear_planner_seconds(item)


def answer(channel, method, request):
    """("OK", normalised response bytes) or (code, message and details)."""
    call = channel.unary_unary(f"/{SERVICE.full_name}/{method.name}")
    try:
        response = getattr(pb, method.output_type.name)()
        response.ParseFromString(call(request, timeout=300))
        clear_planner_seconds(response)
        return ("OK", response.SerializeToString(deterministic=True))
    except grpc.RpcError as error:
        details = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin", b"")
        return (str(error.code()), f"{error.details()}|{details.hex()}")


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    old_binary, new_binary, corpus = sys.argv[1:]
    old, old_channel = start(old_binary)
    new, new_channel = start(new_binary)
    total = differ = 0
    try:
        for method in SERVICE.methods:
            snake = re.sub(r"(?<!^)(?=[A-Z])", "_", method.name).lower()
            files = sorted(glob.glob(os.path.join(corpus, snake, "*")))
            differ_here = 0
            for path in files:
                with open(path, "rb") as f:
                    request = f.read()
                before = answer(old_channel, method, request)
                after = answer(new_channel, method, request)
                total += 1
                if before != after:
                    differ += 1
                    differ_here += 1
                    if differ_here <= 3:
                        print(f"DIFF {method.name} {os.path.basename(path)}:\n"
                              f"  old {before[0]} {str(before[1])[:200]!r}\n"
                              f"  new {after[0]} {str(after[1])[:200]!r}")
            print(f"{method.name}: {len(files)} requests, {differ_here} differ", flush=True)
    finally:
        old.kill()
        new.kill()
    print(f"total: {total} requests, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
