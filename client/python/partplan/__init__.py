"""partplan: export torch.fx graphs, call the partplan service, and rebuild
runnable submodules from its plans.

    import partplan
    gm = partplan.trace(model)                      # torch.fx.symbolic_trace
    graph = partplan.export(gm, (x,))               # a partplan.v1.Graph
    with partplan.Client("localhost:50051") as client:
        response = client.plan(graph, devices=["8GiB", "8GiB"])
    split = partplan.apply_plan(gm, response)       # torch.fx split_module
    assert torch.allclose(split(x), gm(x))

The Python code of the API (partplan.v1.*_pb2 and the gRPC stubs) comes
with an installed package (`pip install ./client/python`); imported from a
checkout, it is generated from proto/ on first import into a per-user cache,
never into the source tree (see _codegen.py). Importing partplan
does not import torch; `export`, `trace`, `export_aten` and `apply_plan`
load it when first used.
"""

import os as _os

from . import _codegen

# protoc writes `from partplan.v1 import graph_pb2`: make partplan.v1 the
# generated package, partplan/v1 under the generated code's directory.
__path__.append(_os.path.join(_codegen.ensure(), "partplan"))  # noqa: F821

from .messages import *  # noqa: E402,F401,F403
from .messages import __all__ as _messages_all  # noqa: E402
from ._sizes import format_byte_size, parse_byte_size  # noqa: E402
from .errors import InvalidMessageError, PartplanError  # noqa: E402
from .client import (NO_RETRY, Client, RetryPolicy, aot_config, device_inventory,  # noqa: E402
                     request_file)
from .graph_io import load_graph, load_message, save_message  # noqa: E402
# `partplan.parallelize` is the function; the module's other names are
# exported here too (`from partplan.parallelize import options` reaches the
# module itself).
from .parallelize import (cluster, format_configurations, host_group, parallelize,  # noqa: E402
                          parallelize_request, transformer)
from .report import Report, report_html, show  # noqa: E402
from .report import install_repr_html as _install_repr_html  # noqa: E402

# A notebook cell whose value is a response shows its report.
_install_repr_html([globals()[_n] for _n in _messages_all if _n.endswith("Response")])

__version__ = "0.1.0"

# Names whose modules import torch, loaded on first use.
_LAZY = {
    "export": "exporter",
    "export_aten": "exporter",
    "trace": "exporter",
    "graph_to_dict": "exporter",
    "AtenExport": "exporter",
    "apply_plan": "apply",
    "assignment_of": "apply",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'partplan' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Client",
    "RetryPolicy",
    "NO_RETRY",
    "aot_config",
    "PartplanError",
    "InvalidMessageError",
    "device_inventory",
    "request_file",
    "load_graph",
    "load_message",
    "save_message",
    "cluster",
    "host_group",
    "transformer",
    "parallelize",
    "parallelize_request",
    "format_configurations",
    "parse_byte_size",
    "format_byte_size",
    "Report",
    "report_html",
    "show",
] + list(_LAZY) + list(_messages_all)
