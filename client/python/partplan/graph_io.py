"""Reading and writing messages as proto3 JSON (.json) or binary (anything else).

    graph = partplan.load_graph("g.json")      # a Graph, or the graph of a request file
    partplan.save_message(graph, "g.pb")       # binary
    partplan.save_message(graph, "g.json")     # proto3 JSON
"""

import json
from typing import Optional, Type

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from .messages import Graph


def is_json_path(path: str) -> bool:
    return path.lower().endswith(".json")


def message_to_json(message: Message, indent: Optional[int] = 1) -> str:
    """proto3 JSON: lowerCamelCase names, 64-bit integers as strings, enums by name."""
    return json_format.MessageToJson(message, indent=indent)


def save_message(message: Message, path: str, *, binary: Optional[bool] = None) -> None:
    """Writes proto3 JSON when the path ends in .json (or binary=False), else binary."""
    if binary is None:
        binary = not is_json_path(path)
    if binary:
        with open(path, "wb") as f:
            f.write(message.SerializeToString())
    else:
        with open(path, "w") as f:
            f.write(message_to_json(message))
            f.write("\n")


def load_message(path: str, cls: Type[Message]) -> Message:
    """Reads a message of type cls from proto3 JSON (.json, or text that
    parses as JSON) or binary."""
    with open(path, "rb") as f:
        data = f.read()
    message = cls()
    if is_json_path(path) or data.lstrip()[:1] == b"{":
        json_format.Parse(data.decode("utf-8"), message)
    else:
        try:
            message.ParseFromString(data)
        except DecodeError as e:
            raise ValueError(f"{path}: not a binary {cls.DESCRIPTOR.full_name}: {e}") from None
    return message


def load_graph(path: str) -> Graph:
    """A partplan.v1.Graph from a file: a Graph, or any request holding one in
    its `graph` field (e.g. client/examples/partition_graph.json)."""
    with open(path, "rb") as f:
        data = f.read()
    if is_json_path(path) or data.lstrip()[:1] == b"{":
        doc = json.loads(data.decode("utf-8"))
        if isinstance(doc, dict) and "nodes" not in doc and isinstance(doc.get("graph"), dict):
            doc = doc["graph"]
        return json_format.ParseDict(doc, Graph())
    graph = Graph()
    try:
        graph.ParseFromString(data)
    except DecodeError as e:
        raise ValueError(f"{path}: not a binary partplan.v1.Graph: {e}") from None
    return graph
