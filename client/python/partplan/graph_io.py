"""Reading and writing messages as proto3 JSON (.json) or binary (anything else).

    graph = partplan.load_graph("g.json")      # a Graph, or the graph of a request file
    partplan.save_message(graph, "g.pb")       # binary
    partplan.save_message(graph, "g.json")     # proto3 JSON
"""

import json
import re
from typing import Any, Mapping, Optional, Tuple, Type, Union

import grpc
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from .errors import FieldViolation, InvalidMessageError
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


# Per message type: {JSON or proto field name: (attribute, kind, converter)}.
_FIELD_TABLES: dict = {}
_SCALAR, _REPEATED_SCALAR, _MESSAGE, _REPEATED_MESSAGE = range(4)


def _field_table(descriptor) -> dict:
    table = _FIELD_TABLES.get(descriptor)
    if table is None:
        table = {}
        for f in descriptor.fields:
            if f.message_type is not None and f.message_type.GetOptions().map_entry:
                raise ValueError(f"{f.full_name}: map fields are not supported here")
            repeated = f.label == FieldDescriptor.LABEL_REPEATED
            convert = None  # bool, string, bytes: as given
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                kind = _REPEATED_MESSAGE if repeated else _MESSAGE
            else:
                kind = _REPEATED_SCALAR if repeated else _SCALAR
                if f.type == FieldDescriptor.TYPE_ENUM:
                    values = f.enum_type.values_by_name
                    convert = (lambda values: lambda v: v if isinstance(v, int) else values[v].number)(values)
                elif f.cpp_type in (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64,
                                    FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_UINT32):
                    convert = int
                elif f.cpp_type in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT):
                    convert = float  # also "NaN", "Infinity", "-Infinity"
            table[f.json_name] = table[f.name] = (f.name, kind, convert)
        _FIELD_TABLES[descriptor] = table
    return table


def message_from_dict(doc: Mapping[str, Any], message: Message) -> Message:
    """Fills `message` from a proto3 JSON dict the library itself wrote (the
    exporter's): the fields and values json_format.ParseDict takes, without
    its checks, which cost more than everything else an export does on a
    large graph. For untrusted input use parse_dict, which names what is
    wrong. Returns `message`."""
    table = _field_table(message.DESCRIPTOR)
    for key, value in doc.items():
        entry = table.get(key)
        if entry is None:
            raise ValueError(f"{message.DESCRIPTOR.full_name} has no field {key!r}")
        name, kind, convert = entry
        if kind == _SCALAR:
            setattr(message, name, value if convert is None else convert(value))
        elif kind == _REPEATED_MESSAGE:
            target = getattr(message, name)
            for item in value:
                message_from_dict(item, target.add())
        elif kind == _MESSAGE:
            target = getattr(message, name)
            message_from_dict(value, target)
            if not value:
                target.SetInParent()
        else:
            getattr(message, name).extend(value if convert is None else [convert(v) for v in value])
    return message


def parse_dict(doc: Any, message: Union[Message, Type[Message]], *, field: str = "",
               method: str = "") -> Message:
    """json_format.ParseDict, raising InvalidMessageError (a PartplanError
    with code INVALID_ARGUMENT, and a ValueError) that names the field which
    does not parse, e.g. `graph.nodes[3].op: Invalid enum value BOGUS for enum
    type partplan.v1.Op`. `field` is the path of `doc` in the request
    ("graph", "devices"; "" for a whole request), `method` the RPC."""
    if isinstance(message, type):
        message = message()
    try:
        return json_format.ParseDict(doc, message)
    except json_format.ParseError as e:
        path, description = _locate_error(doc, type(message), field, e)
    except (TypeError, AttributeError) as e:  # not a dict at all, in some protobuf versions
        path, description = _locate_error(doc, type(message), field, e)
    name = path or message.DESCRIPTOR.full_name
    raise InvalidMessageError(grpc.StatusCode.INVALID_ARGUMENT, f"{name}: {description}",
                              field_violations=[FieldViolation(name, description)],
                              method=method, attempts=0) from None


def _parse_error(doc: Any, cls: Type[Message]) -> Optional[Exception]:
    try:
        json_format.ParseDict(doc, cls())
    except (json_format.ParseError, TypeError, AttributeError) as e:
        return e
    return None


_FAILED_PREFIX = re.compile(r"^(Failed to parse \w+ field: )+")
_AT_PATH = re.compile(r' at "?[A-Za-z_][\w.]*(\[\d+\][\w.]*)*"?(?=[.\n]|$)')


def _describe(error: Exception) -> str:
    """protobuf's message without its "Failed to parse x field:" chain and
    its own (partial) location."""
    text = _FAILED_PREFIX.sub("", str(error).strip())
    text = _AT_PATH.sub("", text.split("\n", 1)[0])
    return text.rstrip(".") or str(error)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_plain_message(field: FieldDescriptor) -> bool:
    """A message field parse_dict can descend into (not a map, not a
    google.protobuf well-known type with its own JSON form)."""
    t = field.message_type
    return (t is not None and not t.GetOptions().map_entry
            and not t.full_name.startswith("google.protobuf."))


def _locate_error(doc: Any, cls: Type[Message], path: str, error: Exception) -> Tuple[str, str]:
    """(field path, description) of the first part of `doc` that does not
    parse as a `cls`; `error` is what parsing the whole gave."""
    descriptor = cls.DESCRIPTOR
    if not isinstance(doc, Mapping):
        return path, f"want a JSON object ({descriptor.full_name}), got {type(doc).__name__}"
    fields = {}
    for f in descriptor.fields:
        fields[f.name] = f
        fields[f.json_name] = f
    for key, value in doc.items():
        field = fields.get(key)
        if field is None:
            names = ", ".join(f.json_name for f in descriptor.fields)
            return _join(path, str(key)), f"no such field in {descriptor.full_name} (fields: {names})"
        where = _join(path, field.name)
        field_error = _parse_error({key: value}, cls)
        if field_error is None:
            continue
        if field.label == FieldDescriptor.LABEL_REPEATED and isinstance(value, list) and \
                not (field.message_type is not None and field.message_type.GetOptions().map_entry):
            for i, element in enumerate(value):
                element_error = _parse_error({key: [element]}, cls)
                if element_error is None:
                    continue
                if element is not None and _is_plain_message(field):
                    element_cls = type(getattr(cls(), field.name).add())
                    return _locate_error(element, element_cls, f"{where}[{i}]", element_error)
                return f"{where}[{i}]", _describe(element_error)
        elif value is not None and field.label != FieldDescriptor.LABEL_REPEATED and \
                _is_plain_message(field):
            return _locate_error(value, type(getattr(cls(), field.name)), where, field_error)
        return where, _describe(field_error)
    return path, _describe(error)  # no one field: e.g. two members of a oneof


def load_message(path: str, cls: Type[Message], *, binary_as_bytes: bool = False):
    """Reads a message of type cls from proto3 JSON (.json, or text that
    parses as JSON) or binary. With binary_as_bytes, a binary file is
    returned as its bytes, unparsed (Client.call sends bytes as they are)."""
    with open(path, "rb") as f:
        data = f.read()
    message = cls()
    json_file = is_json_path(path) or data.lstrip()[:1] == b"{"
    if binary_as_bytes and not json_file:
        return data
    if json_file:
        try:
            doc = json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise ValueError(f"{path}: not JSON: {e}") from None
        parse_dict(doc, message)
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
        try:
            doc = json.loads(data.decode("utf-8"))
        except ValueError as e:
            raise ValueError(f"{path}: not JSON: {e}") from None
        if isinstance(doc, dict) and "nodes" not in doc and isinstance(doc.get("graph"), dict):
            doc = doc["graph"]
        return parse_dict(doc, Graph, field="graph")
    graph = Graph()
    try:
        graph.ParseFromString(data)
    except DecodeError as e:
        raise ValueError(f"{path}: not a binary partplan.v1.Graph: {e}") from None
    return graph
