"""Generates the Python protobuf and gRPC code of partplan's API from proto/.

Nothing generated is committed, and nothing is generated into the source
tree. protoc (Debian's `protobuf-compiler`) with `--python_out` and
grpc_python_plugin (`protobuf-compiler-grpc`) turn proto/partplan/v1/*.proto
into partplan/v1/*_pb2*.py, and protoc writes a descriptor set of
third_party/googleapis/google/rpc/*.proto (google_rpc.desc) for decoding
error details. Where the output goes:

- An installed package (`pip install ./client/python`) carries the code the
  build backend generated, in partplan/_generated/, and never generates.
- A package imported from a checkout (PYTHONPATH=client/python) generates on
  first import into a per-user cache, $PARTPLAN_CACHE_DIR or
  $XDG_CACHE_HOME/partplan or ~/.cache/partplan, in a directory named after a
  hash of the .proto files and of the tools: a changed .proto gets new code,
  an unchanged one reuses it, and checkouts with the same protos share it.

    /usr/bin/python3 -m partplan gen-protos            # regenerate the cached code now
    /usr/bin/python3 -m partplan gen-protos --check    # "current", "stale" (exit 1) or "bundled"
    /usr/bin/python3 -m partplan gen-protos --out DIR  # generate into DIR

Environment overrides: PARTPLAN_PROTO_DIR (the directory holding
partplan/v1/*.proto), PARTPLAN_GOOGLEAPIS_DIR (holding google/rpc/*.proto),
PROTOC and GRPC_PYTHON_PLUGIN (the tools), PARTPLAN_CACHE_DIR.

This module imports only the standard library: the build backend
(client/python/build_backend) loads it on its own, without the package.
"""

import contextlib
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Optional

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
# Where a wheel carries its generated code. A checkout never has it (the build
# backend writes into its own temporary directory), so its presence is what
# tells an installed package from a checkout.
BUNDLED_DIR = os.path.join(PACKAGE_DIR, "_generated")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(PACKAGE_DIR)))
STAMP_NAME = "STAMP"
# google.rpc.Status and BadRequest, loaded into a private descriptor pool (see
# errors.py), never into the default one.
RPC_DESCRIPTOR_NAME = "google_rpc.desc"
_MARKER = os.path.join("partplan", "v1", "planner_service_pb2_grpc.py")
_GENERATOR_VERSION = "2"

# The directory ensure() settled on, for this process.
_active: Optional[str] = None


class CodegenError(RuntimeError):
    """The generated code is missing and cannot be generated."""


def proto_dir() -> str:
    return os.environ.get("PARTPLAN_PROTO_DIR") or os.path.join(_REPO_ROOT, "proto")


def googleapis_dir() -> str:
    return os.environ.get("PARTPLAN_GOOGLEAPIS_DIR") or os.path.join(
        _REPO_ROOT, "third_party", "googleapis"
    )


def _tool(env: str, name: str) -> str:
    path = os.environ.get(env) or shutil.which(name) or os.path.join("/usr/bin", name)
    if not os.path.exists(path):
        raise CodegenError(
            f"{name} not found (set {env}); install it with tools/install_deps.sh "
            "(Debian packages protobuf-compiler and protobuf-compiler-grpc)"
        )
    return path


def tools():
    """(protoc, grpc_python_plugin)."""
    return _tool("PROTOC", "protoc"), _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin")


def _inputs(proto_root: Optional[str] = None, googleapis_root: Optional[str] = None):
    """(include root, [relative .proto paths]) of partplan.v1 and google.rpc."""
    root = proto_root or proto_dir()
    api = sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "partplan", "v1", "*.proto"))
    )
    if not api:
        raise CodegenError(
            f"no partplan/v1/*.proto under {root}: run from a partplan checkout, "
            "set PARTPLAN_PROTO_DIR, or install the package (pip install ./client/python)"
        )
    rpc_root = googleapis_root or googleapis_dir()
    rpc = sorted(
        os.path.relpath(p, rpc_root) for p in glob.glob(os.path.join(rpc_root, "google", "rpc", "*.proto"))
    )
    if not rpc:
        raise CodegenError(f"no google/rpc/*.proto under {rpc_root}; set PARTPLAN_GOOGLEAPIS_DIR")
    return root, api, rpc_root, rpc


def fingerprint(protoc: str, plugin: str, proto_root: Optional[str] = None,
                googleapis_root: Optional[str] = None) -> str:
    """A hash of the .proto files (names and contents) and of the tools."""
    root, api, rpc_root, rpc = _inputs(proto_root, googleapis_root)
    h = hashlib.sha256(_GENERATOR_VERSION.encode())
    for base, names in ((root, api), (rpc_root, rpc)):
        for name in names:
            h.update(name.encode() + b"\0")
            with open(os.path.join(base, name), "rb") as f:
                h.update(f.read())
    version = subprocess.run([protoc, "--version"], capture_output=True, text=True).stdout
    h.update(version.encode())
    h.update(plugin.encode())
    return h.hexdigest()


def _read_stamp(out_dir: str) -> str:
    try:
        with open(os.path.join(out_dir, STAMP_NAME)) as f:
            return f.read().strip()
    except OSError:
        return ""


def is_complete(out_dir: str) -> bool:
    """Whether out_dir holds generated code (the stamp is written last)."""
    return (
        os.path.exists(os.path.join(out_dir, _MARKER))
        and os.path.exists(os.path.join(out_dir, RPC_DESCRIPTOR_NAME))
        and bool(_read_stamp(out_dir))
    )


def is_bundled() -> bool:
    """Whether this copy of the package was installed with its code."""
    return is_complete(BUNDLED_DIR)


def cache_root() -> str:
    explicit = os.environ.get("PARTPLAN_CACHE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec says to ignore a relative XDG_CACHE_HOME.
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "partplan")


def cache_dir(fp: str) -> str:
    """The cache directory of the code for one fingerprint."""
    return os.path.join(cache_root(), fp[:16])


@contextlib.contextmanager
def _locked(out_dir: str):
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise CodegenError(
            f"cannot create {out_dir} for partplan's generated code ({e}); "
            "set PARTPLAN_CACHE_DIR or XDG_CACHE_HOME to a writable directory"
        ) from e
    import fcntl

    with open(os.path.join(out_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CodegenError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()}")


def generate(out_dir: str, force: bool = False, proto_root: Optional[str] = None,
             googleapis_root: Optional[str] = None) -> bool:
    """Generates the code into out_dir (partplan/v1/*.py, google_rpc.desc and
    STAMP) if it is missing or stale there, always with force. Concurrent
    callers are serialised by a lock file in out_dir. Returns whether
    anything was generated."""
    protoc, plugin = tools()
    with _locked(out_dir):
        fp = fingerprint(protoc, plugin, proto_root, googleapis_root)
        if not force and is_complete(out_dir) and _read_stamp(out_dir) == fp:
            return False
        root, api, rpc_root, rpc = _inputs(proto_root, googleapis_root)
        includes = []
        # The well-known types (google/protobuf/any.proto) for google.rpc.
        if os.path.exists("/usr/include/google/protobuf/any.proto"):
            includes.append("-I/usr/include")
        tmp = tempfile.mkdtemp(prefix=".gen-", dir=out_dir)
        try:
            _run(
                [protoc, f"-I{root}", f"--python_out={tmp}", f"--grpc_python_out={tmp}",
                 f"--plugin=protoc-gen-grpc_python={plugin}"] + api
            )
            _run(
                [protoc, f"-I{rpc_root}"] + includes
                + [f"--descriptor_set_out={os.path.join(tmp, RPC_DESCRIPTOR_NAME)}", "--include_imports"]
                + rpc
            )
            # The stamp goes last, so a directory with a stamp is complete.
            stamp = os.path.join(out_dir, STAMP_NAME)
            if os.path.exists(stamp):
                os.remove(stamp)
            old = os.path.join(out_dir, "partplan")
            if os.path.exists(old):
                shutil.rmtree(old)
            os.rename(os.path.join(tmp, "partplan"), old)
            os.replace(os.path.join(tmp, RPC_DESCRIPTOR_NAME), os.path.join(out_dir, RPC_DESCRIPTOR_NAME))
            with open(stamp + ".tmp", "w") as f:
                f.write(fp + "\n")
            os.replace(stamp + ".tmp", stamp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return True


def current_dir() -> str:
    """Where the code for the current .proto files is or would be: the
    bundled directory of an installed package, else the cache directory of
    the current fingerprint."""
    if is_bundled():
        return BUNDLED_DIR
    return cache_dir(fingerprint(*tools()))


def is_current() -> bool:
    """Whether the code for the current .proto files exists (always true for
    an installed package, which uses what it was built with)."""
    if is_bundled():
        return True
    protoc, plugin = tools()
    fp = fingerprint(protoc, plugin)
    out_dir = cache_dir(fp)
    return is_complete(out_dir) and _read_stamp(out_dir) == fp


def ensure() -> str:
    """Returns the directory of the generated code, generating it into the
    cache first when it is not there (never for an installed package)."""
    global _active
    if is_bundled():
        _active = BUNDLED_DIR
        return _active
    protoc, plugin = tools()
    fp = fingerprint(protoc, plugin)
    out_dir = cache_dir(fp)
    # Checked without the lock first: the stamp is written last, so a
    # matching stamp means the code is all there.
    if not (is_complete(out_dir) and _read_stamp(out_dir) == fp):
        generate(out_dir)
    _active = out_dir
    return _active


def generated_dir() -> str:
    """The directory this process imports its generated code from."""
    return _active or ensure()


def rpc_descriptor_set() -> str:
    """The path of the google.rpc descriptor set (see errors.py)."""
    return os.path.join(generated_dir(), RPC_DESCRIPTOR_NAME)


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 -m partplan gen-protos",
        description="(re)generate the Python code of partplan's API from proto/")
    parser.add_argument("--check", action="store_true",
                        help="only report whether it is current: current, stale (exit 1) or bundled")
    parser.add_argument("--out", metavar="DIR", help="generate into DIR instead of the cache")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.check:
        if is_bundled():
            print("bundled")
            return 0
        current = is_current()
        print("current" if current else "stale")
        return 0 if current else 1
    if args.out:
        out_dir = os.path.abspath(args.out)
    elif is_bundled():
        print(f"partplan is installed with its generated code in {BUNDLED_DIR}; "
              "nothing to generate (--out DIR generates elsewhere)")
        return 0
    else:
        out_dir = current_dir()
    generate(out_dir, force=True)
    print(f"generated Python code for {proto_dir()} into {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
