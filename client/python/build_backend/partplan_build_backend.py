"""partplan's PEP 517 / PEP 660 build backend: standard library only.

pyproject.toml names this module with `requires = []` and `backend-path`, so
`pip install ./client/python` builds without downloading anything: pip's
build isolation would otherwise fetch setuptools from PyPI, which a machine
with only Debian's archive cannot reach.

- build_wheel: a pure-Python wheel of partplan/*.py plus the code protoc and
  grpc_python_plugin generate from the .proto files (partplan/_codegen.py's
  generate(), run at build time into partplan/_generated/), so the installed
  package never generates anything. The dist-info (METADATA from
  pyproject.toml's [project], WHEEL, RECORD with sha256 hashes) is written
  by hand.
- build_sdist: the package, this backend, and a copy of the .proto files it
  needs (under _protos/), so a wheel builds from the sdist alone.
- build_editable: a wheel whose .pth imports a finder that serves `partplan`
  from this source tree; such a copy generates its code into the per-user
  cache on first import, as any checkout does.

Nothing is written into the source tree: everything is built in temporary
directories and written to the directory pip passes.
"""

import base64
import hashlib
import importlib.util
import io
import os
import re
import sys
import tarfile
import tempfile
import zipfile

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_DIR = os.path.join(SOURCE_DIR, "partplan")
# The sdist's copy of the .proto files (absent in a checkout).
SDIST_PROTOS = os.path.join(SOURCE_DIR, "_protos")
# Directories of the package that never go into a wheel: bytecode, the
# generated code of older versions, and generated code in general.
_SKIP_DIRS = {"__pycache__", "_proto", "_generated"}
TAG = "py3-none-any"
# Files outside partplan/ that the package reads at run time, carried inside
# it in a wheel or sdist: report.py looks for report.html beside itself first.
_PACKAGE_DATA = {
    "report.html": os.path.join(os.path.dirname(SOURCE_DIR), "report", "report.html"),
}


# -- metadata ----------------------------------------------------------------


def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        raise RuntimeError("building partplan needs Python 3.11 or newer (tomllib)") from None
    with open(os.path.join(SOURCE_DIR, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _version() -> str:
    # One source of truth: partplan.__version__.
    with open(os.path.join(PACKAGE_DIR, "__init__.py"), encoding="utf-8") as f:
        match = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
    if not match:
        raise RuntimeError("no __version__ in partplan/__init__.py")
    return match.group(1)


def _name() -> str:
    return re.sub(r"[-_.]+", "_", _pyproject()["project"]["name"]).lower()


def _dist_info() -> str:
    return f"{_name()}-{_version()}.dist-info"


def _metadata() -> str:
    project = _pyproject()["project"]
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {_version()}",
    ]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    for requirement in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {requirement}")
    for extra, requirements in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for requirement in requirements:
            if ";" in requirement:
                spec, marker = requirement.split(";", 1)
                lines.append(f'Requires-Dist: {spec.strip()}; ({marker.strip()}) and extra == "{extra}"')
            else:
                lines.append(f'Requires-Dist: {requirement}; extra == "{extra}"')
    body = ""
    readme = project.get("readme")
    if isinstance(readme, str):
        with open(os.path.join(SOURCE_DIR, readme), encoding="utf-8") as f:
            body = f.read()
        lines.append("Description-Content-Type: text/markdown")
    text = "\n".join(lines) + "\n"
    if body:
        text += "\n" + body
    return text


def _wheel_file() -> str:
    return (
        "Wheel-Version: 1.0\n"
        "Generator: partplan_build_backend\n"
        "Root-Is-Purelib: true\n"
        f"Tag: {TAG}\n"
    )


# -- wheels ------------------------------------------------------------------


def _date_time():
    # Reproducible archives: SOURCE_DATE_EPOCH when given, else zip's epoch.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        import time

        return max(time.gmtime(int(epoch))[:6], (1980, 1, 1, 0, 0, 0))
    return (1980, 1, 1, 0, 0, 0)


class _WheelWriter:
    """A wheel zip whose RECORD lists every file with its sha256 and size."""

    def __init__(self, path: str):
        self._zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self._records = []
        self._date_time = _date_time()

    def add(self, arcname: str, data: bytes) -> None:
        info = zipfile.ZipInfo(arcname, date_time=self._date_time)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self._zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self._records.append(f"{arcname},sha256={digest},{len(data)}")

    def add_tree(self, directory: str, prefix: str) -> None:
        for root, dirs, files in os.walk(directory):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            for name in sorted(files):
                if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                    continue
                path = os.path.join(root, name)
                arcname = prefix + "/" + os.path.relpath(path, directory).replace(os.sep, "/")
                with open(path, "rb") as f:
                    self.add(arcname, f.read())

    def close(self, dist_info: str) -> None:
        self.add(f"{dist_info}/METADATA", _metadata().encode())
        self.add(f"{dist_info}/WHEEL", _wheel_file().encode())
        self.add(f"{dist_info}/top_level.txt", b"partplan\n")
        record = f"{dist_info}/RECORD"
        self._records.append(f"{record},,")
        info = zipfile.ZipInfo(record, date_time=self._date_time)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self._zip.writestr(info, "\n".join(self._records) + "\n")
        self._zip.close()


def _wheel_name() -> str:
    return f"{_name()}-{_version()}-{TAG}.whl"


def _package_data():
    """(name in partplan/, path) of each data file to add; in an sdist they
    are inside partplan/ already."""
    for name, path in sorted(_PACKAGE_DATA.items()):
        if os.path.exists(os.path.join(PACKAGE_DIR, name)):
            continue
        if not os.path.exists(path):
            raise RuntimeError(f"{path} is missing: partplan/{name} cannot be packaged")
        yield name, path


def _load_codegen():
    """partplan/_codegen.py on its own: importing the package would run its
    __init__, which needs grpcio and generated code."""
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    spec = importlib.util.spec_from_file_location(
        "_partplan_codegen", os.path.join(PACKAGE_DIR, "_codegen.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _proto_roots(codegen):
    """(partplan protos, googleapis protos): the environment's overrides,
    else the sdist's copy, else the checkout's."""
    proto = os.environ.get("PARTPLAN_PROTO_DIR")
    googleapis = os.environ.get("PARTPLAN_GOOGLEAPIS_DIR")
    if os.path.isdir(SDIST_PROTOS):
        proto = proto or os.path.join(SDIST_PROTOS, "proto")
        googleapis = googleapis or os.path.join(SDIST_PROTOS, "googleapis")
    return proto or codegen.proto_dir(), googleapis or codegen.googleapis_dir()


def _write_metadata(metadata_directory: str) -> str:
    dist_info = _dist_info()
    path = os.path.join(metadata_directory, dist_info)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(path, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return dist_info


# -- PEP 517 -----------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    codegen = _load_codegen()
    proto_root, googleapis_root = _proto_roots(codegen)
    name = _wheel_name()
    with tempfile.TemporaryDirectory(prefix="partplan-build-") as tmp:
        generated = os.path.join(tmp, "_generated")
        codegen.generate(generated, force=True, proto_root=proto_root,
                         googleapis_root=googleapis_root)
        os.makedirs(wheel_directory, exist_ok=True)
        wheel = _WheelWriter(os.path.join(wheel_directory, name))
        wheel.add_tree(PACKAGE_DIR, "partplan")
        for data_name, path in _package_data():
            with open(path, "rb") as f:
                wheel.add(f"partplan/{data_name}", f.read())
        # _codegen.BUNDLED_DIR: its presence marks an installed package.
        wheel.add_tree(generated, "partplan/_generated")
        wheel.close(_dist_info())
    return name


def build_sdist(sdist_directory, config_settings=None):
    codegen = _load_codegen()
    proto_root, googleapis_root = _proto_roots(codegen)
    _, api, _, rpc = codegen._inputs(proto_root, googleapis_root)
    base = f"{_name()}-{_version()}"
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))  # 1980-01-01

    def add(tar, arcname, data):
        info = tarfile.TarInfo(f"{base}/{arcname}")
        info.size = len(data)
        info.mtime = mtime
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    os.makedirs(sdist_directory, exist_ok=True)
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "PKG-INFO", _metadata().encode())
        for top in ("pyproject.toml", "README.md"):
            add(tar, top, read(os.path.join(SOURCE_DIR, top)))
        for directory in ("build_backend", "partplan"):
            for root, dirs, files in os.walk(os.path.join(SOURCE_DIR, directory)):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                for file in sorted(files):
                    if not file.startswith(".") and not file.endswith((".pyc", ".pyo")):
                        path = os.path.join(root, file)
                        add(tar, os.path.relpath(path, SOURCE_DIR).replace(os.sep, "/"), read(path))
        for data_name, path in _package_data():
            add(tar, f"partplan/{data_name}", read(path))
        for root, names, prefix in ((proto_root, api, "_protos/proto"),
                                    (googleapis_root, rpc, "_protos/googleapis")):
            for rel in names:
                add(tar, f"{prefix}/{rel}", read(os.path.join(root, rel)))
    return name


# -- PEP 660 -----------------------------------------------------------------

_EDITABLE_FINDER = '''\
"""Serves `partplan` from {source!r} (an editable install)."""
import sys
from importlib.machinery import PathFinder


class _PartplanFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "partplan":
            return PathFinder.find_spec(name, [{source!r}])
        return None


if _PartplanFinder not in sys.meta_path:
    sys.meta_path.append(_PartplanFinder)
'''


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _write_metadata(metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # A finder for `partplan` alone, rather than the source directory on
    # sys.path, which would also expose tests/ and build_backend/.
    name = _wheel_name()
    os.makedirs(wheel_directory, exist_ok=True)
    wheel = _WheelWriter(os.path.join(wheel_directory, name))
    wheel.add("_partplan_editable.py", _EDITABLE_FINDER.format(source=SOURCE_DIR).encode())
    wheel.add("__editable__.partplan.pth", b"import _partplan_editable\n")
    wheel.close(_dist_info())
    return name
