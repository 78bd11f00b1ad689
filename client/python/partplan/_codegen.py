"""Generates the Python protobuf and gRPC code of partplan's API from proto/.

Nothing generated is committed. On first import, `partplan` runs protoc
(Debian's `protobuf-compiler`) with `--python_out` and grpc_python_plugin
(`protobuf-compiler-grpc`) over proto/partplan/v1/*.proto into
client/python/partplan/_proto/ (git-ignored), and writes a descriptor set of
third_party/googleapis/google/rpc/*.proto next to it for decoding error
details. A stamp file records a hash of the inputs and of the tools, so the
code is regenerated whenever a .proto changes, and not otherwise.

    /usr/bin/python3 -m partplan gen-protos          # force a regeneration
    /usr/bin/python3 -m partplan._codegen --check    # exit 1 when stale

Environment overrides: PARTPLAN_PROTO_DIR (the directory holding
partplan/v1/*.proto), PARTPLAN_GOOGLEAPIS_DIR (holding google/rpc/*.proto),
PROTOC and GRPC_PYTHON_PLUGIN (the tools).
"""

import contextlib
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(PACKAGE_DIR, "_proto")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(PACKAGE_DIR)))
STAMP = os.path.join(OUT_DIR, "STAMP")
# google.rpc.Status and BadRequest, loaded into a private descriptor pool (see
# errors.py), never into the default one.
RPC_DESCRIPTOR_SET = os.path.join(OUT_DIR, "google_rpc.desc")
_GENERATOR_VERSION = "1"


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


def _inputs():
    """(include root, [relative .proto paths]) of partplan.v1 and google.rpc."""
    root = proto_dir()
    api = sorted(
        os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "partplan", "v1", "*.proto"))
    )
    if not api:
        raise CodegenError(
            f"no partplan/v1/*.proto under {root}: run from a partplan checkout "
            "or set PARTPLAN_PROTO_DIR"
        )
    rpc_root = googleapis_dir()
    rpc = sorted(
        os.path.relpath(p, rpc_root) for p in glob.glob(os.path.join(rpc_root, "google", "rpc", "*.proto"))
    )
    if not rpc:
        raise CodegenError(f"no google/rpc/*.proto under {rpc_root}; set PARTPLAN_GOOGLEAPIS_DIR")
    return root, api, rpc_root, rpc


def _fingerprint(protoc: str, plugin: str) -> str:
    root, api, rpc_root, rpc = _inputs()
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


def _read_stamp() -> str:
    try:
        with open(STAMP) as f:
            return f.read().strip()
    except OSError:
        return ""


def _have_generated() -> bool:
    return os.path.exists(
        os.path.join(OUT_DIR, "partplan", "v1", "planner_service_pb2_grpc.py")
    ) and os.path.exists(RPC_DESCRIPTOR_SET)


def is_current() -> bool:
    protoc = _tool("PROTOC", "protoc")
    plugin = _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    return _have_generated() and _read_stamp() == _fingerprint(protoc, plugin)


@contextlib.contextmanager
def _locked():
    os.makedirs(OUT_DIR, exist_ok=True)
    import fcntl

    with open(os.path.join(OUT_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise CodegenError(f"{' '.join(cmd)} failed:\n{done.stderr.strip()}")


def generate(force: bool = False) -> bool:
    """Generates the code if it is missing or stale (always with force).
    Returns whether anything was generated."""
    protoc = _tool("PROTOC", "protoc")
    plugin = _tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin")
    with _locked():
        fingerprint = _fingerprint(protoc, plugin)
        if not force and _have_generated() and _read_stamp() == fingerprint:
            return False
        root, api, rpc_root, rpc = _inputs()
        includes = []
        # The well-known types (google/protobuf/any.proto) for google.rpc.
        if os.path.exists("/usr/include/google/protobuf/any.proto"):
            includes.append("-I/usr/include")
        tmp = tempfile.mkdtemp(prefix=".gen-", dir=OUT_DIR)
        try:
            _run(
                [protoc, f"-I{root}", f"--python_out={tmp}", f"--grpc_python_out={tmp}",
                 f"--plugin=protoc-gen-grpc_python={plugin}"] + api
            )
            _run(
                [protoc, f"-I{rpc_root}"] + includes
                + [f"--descriptor_set_out={os.path.join(tmp, 'google_rpc.desc')}", "--include_imports"]
                + rpc
            )
            # Replace the previous output in place of a partial one.
            old = os.path.join(OUT_DIR, "partplan")
            if os.path.exists(old):
                shutil.rmtree(old)
            os.rename(os.path.join(tmp, "partplan"), old)
            os.replace(os.path.join(tmp, "google_rpc.desc"), RPC_DESCRIPTOR_SET)
            with open(STAMP + ".tmp", "w") as f:
                f.write(fingerprint + "\n")
            os.replace(STAMP + ".tmp", STAMP)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return True


def ensure() -> None:
    """Generates the code unless it is current. When the .proto sources are
    not around (an installed copy of the package), generated code that is
    already present is used as is."""
    try:
        generate()
    except (CodegenError, OSError):
        if not _have_generated():
            raise


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        current = is_current()
        print("current" if current else "stale")
        return 0 if current else 1
    generate(force=True)
    print(f"generated Python code for {proto_dir()} into {OUT_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
