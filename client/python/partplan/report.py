"""Plan reports: a response of the service as one self-contained HTML page.

    response = client.plan_training(graph, devices, config)
    partplan.show(response, request)            # in a notebook: drawn in place
    partplan.show(response).save("plan.html")   # anywhere: a file to open
    html = partplan.report_html(response, request)

The page draws the partition or stage DAG (edges labelled with the bytes
crossing when the request's graph is given), per-device memory bars, the
critical path, a training plan's timeline and cut report, and a searchable
node table. It fetches nothing: its CSS and JS are inline, so it opens in a
locked-down cluster. The drawing is client/report/report.html, the one
renderer the C++ CLI's `--output=html` embeds too; this module only fills in
the data. Responses of the service also get `_repr_html_`, so a notebook
cell whose value is a response shows its report.
"""

import html as _html
import json
import os
from typing import Optional

from google.protobuf import json_format
from google.protobuf.message import Message

_PLACEHOLDER = "__PARTPLAN_DATA__"
_HERE = os.path.dirname(os.path.abspath(__file__))
# Installed packages carry the template beside this module; the source tree
# has it in client/report/.
_TEMPLATES = (
    os.path.join(_HERE, "report.html"),
    os.path.join(os.path.dirname(os.path.dirname(_HERE)), "report", "report.html"),
)


def _template() -> str:
    for path in _TEMPLATES:
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    raise FileNotFoundError(f"the report template is missing (looked in {', '.join(_TEMPLATES)})")


def _rpc_of(response: Message) -> str:
    name = response.DESCRIPTOR.name
    return name[: -len("Response")] if name.endswith("Response") else name


def _as_json(message: Optional[Message]):
    if message is None:
        return None
    # The CLI prints proto3 JSON with camelCase names and without defaults;
    # the page reads that form and supplies defaults itself.
    return json.loads(json_format.MessageToJson(message))


def report_html(response: Message, request=None, *, title: Optional[str] = None) -> str:
    """The report page of `response`. With `request` (its message, or its
    serialised bytes as Client.call takes them), edges carry bytes."""
    if isinstance(request, (bytes, bytearray, memoryview)):
        from .client import RPCS

        request = RPCS[_rpc_of(response)][1].FromString(bytes(request))
    data = {
        "rpc": _rpc_of(response),
        "title": title or "",
        "response": _as_json(response),
        "request": _as_json(request),
    }
    # No value may close the script element or open a comment in it.
    payload = (json.dumps(data, separators=(",", ":"))
               .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    template = _template()
    if template.count(_PLACEHOLDER) != 1:
        raise ValueError("the report template must hold its data placeholder once")
    return template.replace(_PLACEHOLDER, payload)


class Report:
    """A report page: shown by a notebook, or saved to a file."""

    def __init__(self, page: str):
        self.html = page

    def save(self, path: str) -> str:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.html)
        return path

    def _repr_html_(self) -> str:
        # An iframe keeps the page's script and styles apart from the
        # notebook's, and runs in front ends that do not run scripts placed
        # directly in an output.
        return ('<iframe style="width:100%;height:820px;border:1px solid #ddd" srcdoc="'
                + _html.escape(self.html, quote=True) + '"></iframe>')


def show(response: Message, request=None, *, title: Optional[str] = None) -> Report:
    """The report of `response`; a notebook displays it when it is a cell's value."""
    return Report(report_html(response, request, title=title))


def install_repr_html(classes) -> None:
    """Gives each response class a `_repr_html_` drawing its report."""
    def repr_html(self):
        return show(self)._repr_html_()
    for cls in classes:
        cls._repr_html_ = repr_html
