"""json_format.MessageToJson(message, indent=1)'s text, written straight from
a message's serialised bytes, without parsing them into a message.

A plan naming 10^6 nodes is 34 MB on the wire and 79 MB of JSON; parsing it
(protobuf's cpp backend allocates each of its 10^6 assignments and node
names) and then reading it element by element from Python took 1.2 s. Here
the bytes are walked by the message's descriptor, and the long runs of one
repeated field (the plan's assignments, a partition's nodes, the node
indices) are read and written with numpy, a run at a time: element positions
found as a chain of length prefixes and checked to be one, strings copied
as they are when they need no escaping, and each element's JSON joined from
columns. Whatever is unusual (unknown fields, maps, well-known types, a
singular field given twice, invalid bytes, no numpy) raises Unsupported, and
the caller parses the message and converts it as before. The pieces made
before are the text's start, to the character: a caller that wrote them
writes the rest of json_format's text.

    pieces = message_json(data, partplan.PartitionGraphResponse.DESCRIPTOR)
    out.write("".join(pieces))  # the text and its newline

    message_json(data, descriptor, out=sink)  # sink.append(piece) as each is made
"""

import base64
import bisect
import math
import struct
from json.encoder import encode_basestring_ascii
from typing import Dict, List

from google.protobuf.descriptor import FieldDescriptor as F

__all__ = ["Unsupported", "message_json"]


class Unsupported(Exception):
    """The bytes hold something this module does not convert (or are not a
    valid message): parse them and use json_format instead."""


# A run of one repeated length-delimited field is read with numpy from this
# many bytes of message left on; shorter ones element by element.
_BULK_MIN_BYTES = 1 << 14
# Element positions are looked for this many bytes at a time.
_WINDOW = 1 << 20
# The elements of a run of messages are converted this many at a time.
_CHUNK = 1 << 14
# String bytes copied as they are: printable ASCII but '"' and '\\'
# (encode_basestring_ascii changes the others). Gathered strings are each
# after a mark.
_PLAIN = bytes(b for b in range(0x20, 0x80) if b not in (0x22, 0x5C))
_MARK = 1
_MARK_TEXT = chr(_MARK)
_MARK_BYTE = bytes([_MARK])

_VARINT_INT = (F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64, F.TYPE_SINT32,
               F.TYPE_SINT64, F.TYPE_BOOL, F.TYPE_ENUM)
_QUOTED = (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64, F.TYPE_SFIXED64)
_FIXED = {F.TYPE_FIXED32: "<I", F.TYPE_SFIXED32: "<i", F.TYPE_FLOAT: "<f",
          F.TYPE_FIXED64: "<Q", F.TYPE_SFIXED64: "<q", F.TYPE_DOUBLE: "<d"}
_WIRE = {F.TYPE_STRING: 2, F.TYPE_BYTES: 2, F.TYPE_MESSAGE: 2,
         F.TYPE_FIXED32: 5, F.TYPE_SFIXED32: 5, F.TYPE_FLOAT: 5,
         F.TYPE_FIXED64: 1, F.TYPE_SFIXED64: 1, F.TYPE_DOUBLE: 1}


def _np():
    try:
        import numpy
    except ImportError:
        raise Unsupported("no numpy") from None
    return numpy


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------


def _varint(data, p: int):
    b = data[p]
    if b < 0x80:
        return b, p + 1
    result, shift = b & 0x7F, 7
    while True:
        p += 1
        b = data[p]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, p + 1
        shift += 7
        if shift >= 70:
            raise Unsupported("varint too long")


def _int_value(t: int, v: int) -> int:
    """A varint's value as field type `t` reads it."""
    if t in (F.TYPE_INT32, F.TYPE_ENUM):
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v
    if t == F.TYPE_INT64:
        v &= 0xFFFFFFFFFFFFFFFF
        return v - (1 << 64) if v >= 1 << 63 else v
    if t == F.TYPE_UINT32:
        return v & 0xFFFFFFFF
    if t == F.TYPE_UINT64:
        return v & 0xFFFFFFFFFFFFFFFF
    if t == F.TYPE_SINT32:
        v &= 0xFFFFFFFF
        return (v >> 1) ^ -(v & 1)
    if t == F.TYPE_SINT64:
        v &= 0xFFFFFFFFFFFFFFFF
        return (v >> 1) ^ -(v & 1)
    if t == F.TYPE_BOOL:
        return 1 if v else 0
    raise Unsupported(f"varint for type {t}")


def _float_json(field, value: float) -> str:
    if math.isinf(value):
        return '"-Infinity"' if value < 0 else '"Infinity"'
    if math.isnan(value):
        return '"NaN"'
    if field.type == F.TYPE_FLOAT:
        from google.protobuf.internal.type_checkers import ToShortestFloat

        value = ToShortestFloat(value)
    return float.__repr__(value)


def _scalar_text(field, value) -> str:
    """json_format's JSON of one scalar value (a decoded int, float, or the
    bytes of a string or bytes field)."""
    t = field.type
    if t == F.TYPE_STRING:
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            raise Unsupported("invalid UTF-8") from None
        return encode_basestring_ascii(text)
    if t == F.TYPE_BYTES:
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    if t == F.TYPE_BOOL:
        return "true" if value else "false"
    if t == F.TYPE_ENUM:
        v = field.enum_type.values_by_number.get(value)
        return encode_basestring_ascii(v.name) if v is not None else "%d" % value
    if t in (F.TYPE_FLOAT, F.TYPE_DOUBLE):
        return _float_json(field, value)
    if t in _QUOTED:
        return '"%d"' % value
    return "%d" % value


# ---------------------------------------------------------------------------
# Descriptors
# ---------------------------------------------------------------------------


class _Field:
    __slots__ = ("field", "number", "type", "repeated", "presence", "key", "message",
                 "packable", "wire", "unsupported", "oneof")

    def __init__(self, field):
        self.field = field
        self.number = field.number
        self.type = field.type
        self.repeated = field.label == F.LABEL_REPEATED
        self.message = None
        self.unsupported = field.type == F.TYPE_GROUP or (
            field.message_type is not None and field.message_type.GetOptions().map_entry)
        if field.type == F.TYPE_MESSAGE and not self.unsupported:
            try:
                self.message = _info(field.message_type)
            except Unsupported:
                self.unsupported = True
        # proto3 without presence: written when not 0, "" or false.
        self.presence = field.type == F.TYPE_MESSAGE or field.containing_oneof is not None
        self.key = encode_basestring_ascii(field.json_name) + ": "
        self.packable = self.repeated and self.type not in (F.TYPE_STRING, F.TYPE_BYTES,
                                                            F.TYPE_MESSAGE)
        self.wire = _WIRE.get(self.type, 0)
        oneof = field.containing_oneof
        self.oneof = [f.number for f in oneof.fields if f.number != self.number] if oneof else []


class _Message:
    __slots__ = ("descriptor", "fields", "flat", "tags")

    def __init__(self, descriptor):
        self.descriptor = descriptor
        self.fields: Dict[int, _Field] = {}
        # For a run read with numpy: only strings and varints, no presence.
        self.flat = True
        self.tags = {}


_INFOS: Dict[str, _Message] = {}


def _info(descriptor) -> _Message:
    info = _INFOS.get(descriptor.full_name)
    if info is not None:
        return info
    if descriptor.full_name.startswith("google.protobuf.") or descriptor.GetOptions().map_entry:
        raise Unsupported(descriptor.full_name)
    if descriptor.file.syntax != "proto3" or descriptor.extension_ranges:
        raise Unsupported(descriptor.full_name)
    info = _Message(descriptor)
    _INFOS[descriptor.full_name] = info
    try:
        for field in descriptor.fields:
            f = _Field(field)
            info.fields[f.number] = f
            if f.repeated or f.presence or f.type not in _VARINT_INT + (F.TYPE_STRING,) \
                    or f.number >= 16:
                info.flat = False
            else:
                info.tags[(f.number << 3) | f.wire] = f
    except Unsupported:
        del _INFOS[descriptor.full_name]
        raise
    return info


# ---------------------------------------------------------------------------
# Runs of one repeated length-delimited field, read with numpy
# ---------------------------------------------------------------------------


def _run(np, arr, data, p: int, end: int, tag: int):
    """The elements of the run of length-delimited field `tag` (one byte)
    starting at p, before end: (starts, lengths) of their contents as
    arrays, and where the run ends."""
    starts_parts, lengths_parts = [], []
    while p < end and data[p] == tag:
        w_end = min(end, p + _WINDOW)
        cand = np.flatnonzero(arr[p:w_end] == tag)
        cand += p
        # Lengths of one or two bytes (a longer one ends the chain here).
        b1 = arr[np.minimum(cand + 1, end - 1)]
        length = b1.astype(np.int64)
        two = b1 >= 0x80
        if two.any():
            b2 = arr[np.minimum(cand + 2, end - 1)].astype(np.int64)
            length = np.where(two, (length & 0x7F) | (b2 << 7), length)
            head = np.where(two, 3, 2)
            bad = (two & (b2 >= 0x80)) | (two & (cand + 2 >= end))
        else:
            head = np.full(len(cand), 2, dtype=np.int64)
            bad = np.zeros(len(cand), dtype=bool)
        nxt = cand + head + length
        bad |= (nxt > end) | (cand + 1 >= end)
        nxt[bad] = -1
        # The elements are the chain from p, each one's end the next one's
        # start. Bytes inside an element can look like the tag: if many,
        # those no other candidate ends at are dropped; the few left are
        # jumped.
        follows = np.empty(len(cand), dtype=bool)
        follows[:-1] = nxt[:-1] == cand[1:]
        follows[-1] = False
        breaks = np.flatnonzero(~follows)
        if len(breaks) > 16:
            pointed_at = np.zeros(w_end - p + 1, dtype=bool)
            inside = nxt[(nxt > p) & (nxt < w_end)]
            pointed_at[inside - p] = True
            pointed = pointed_at[cand - p]
            pointed[0] = True
            cand, head, length, nxt = cand[pointed], head[pointed], length[pointed], nxt[pointed]
            follows = np.empty(len(cand), dtype=bool)
            follows[:-1] = nxt[:-1] == cand[1:]
            follows[-1] = False
            breaks = np.flatnonzero(~follows)
        breaks = breaks.tolist()
        positions = None
        i = b = 0
        while True:
            # cand[i] is an element; the chain runs on to the next break.
            while breaks[b] < i:
                b += 1
            j = breaks[b]
            q = int(nxt[j])
            if q < 0:
                # A length of three bytes or more, or one past the message:
                # the run ends before, and the element is read on its own.
                starts_parts.append(cand[i:j] + head[i:j])
                lengths_parts.append(length[i:j])
                return _joined(np, starts_parts, lengths_parts, int(cand[j]))
            starts_parts.append(cand[i:j + 1] + head[i:j + 1])
            lengths_parts.append(length[i:j + 1])
            p = q
            if q >= w_end or data[q] != tag:
                break
            if positions is None:
                positions = cand.tolist()
            k = bisect.bisect_left(positions, q)
            if k >= len(positions) or positions[k] != q:
                break  # not a candidate: looked for again from here
            i = k
    return _joined(np, starts_parts, lengths_parts, p)


def _joined(np, starts_parts, lengths_parts, p: int):
    starts, lengths = np.concatenate(starts_parts), np.concatenate(lengths_parts)
    if not len(starts):
        raise Unsupported("no run")
    return starts, lengths, p


def _gather(np, arr, starts, lengths) -> bytes:
    """The bytes of the elements (starts, lengths; in order, apart, each
    after a byte of its own) each after a _MARK byte."""
    base = int(starts[0]) - 1
    top = int(starts[-1] + lengths[-1])
    segment = arr[base:top].copy()
    ends = starts + lengths
    # What lies between an element and the next mark is left out: a few
    # bytes (tags, lengths, other fields) each, dropped in as many steps.
    gap_start = ends[:-1] - base
    gap = starts[1:] - 1 - ends[:-1]
    widest = int(gap.max()) if len(gap) else 0
    if widest <= 16:
        inside = np.ones(top - base, dtype=bool)
        for d in range(widest):
            wide = gap > d
            inside[(gap_start[wide] if not wide.all() else gap_start) + d] = False
    else:
        delta = np.zeros(top - base + 1, dtype=np.int8)
        delta[starts - 1 - base] = 1
        delta[ends - base] -= 1
        inside = np.cumsum(delta[:-1], dtype=np.int8).view(bool)
    segment[starts - 1 - base] = _MARK
    return segment[inside].tobytes()


def _names(np, arr, data, starts, lengths) -> List[str]:
    """Each element as the inside of its JSON string."""
    if not len(starts):
        return []
    blob = _gather(np, arr, starts, lengths)
    if _plain(blob, len(starts)):
        return blob.decode("ascii").split(_MARK_TEXT)[1:]
    return [_scalar_text_string(data[s:s + n])[1:-1]
            for s, n in zip(starts.tolist(), lengths.tolist())]


def _strings_json(np, arr, data, starts, lengths, sep: str) -> str:
    """JSON strings of the elements, joined by sep."""
    blob = _gather(np, arr, starts, lengths)
    if _plain(blob, len(starts)):
        # "a"<sep>"b"...: every mark becomes the quotes and separator.
        return '"' + blob[1:].decode("ascii").replace(_MARK_TEXT, '"' + sep + '"') + '"'
    return sep.join(_scalar_text_string(data[s:s + n])
                    for s, n in zip(starts.tolist(), lengths.tolist()))


def _plain(blob: bytes, count: int) -> bool:
    """Whether the strings gathered in blob (count, each after a mark) are
    their JSON as they are: no byte to escape, and no mark but those."""
    marks = blob.translate(None, _PLAIN)
    return len(marks) == count and marks.count(_MARK_BYTE) == count


def _scalar_text_string(value: bytes) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise Unsupported("invalid UTF-8") from None
    return encode_basestring_ascii(text)


def _string_list(np, arr, data, starts, lengths) -> List[str]:
    """Each element as a JSON string."""
    if not len(starts):
        return []
    blob = _gather(np, arr, starts, lengths)
    if _plain(blob, len(starts)):
        parts = blob.decode("ascii").replace(_MARK_TEXT, '"\x01"').split(_MARK_TEXT)
        parts = parts[1:]
        parts[-1] += '"'
        return parts
    return [_scalar_text_string(data[s:s + n]) for s, n in zip(starts.tolist(), lengths.tolist())]


def _varints(np, arr, pos, limit):
    """Varints at positions pos (an array), none reaching limit (an array):
    (values as uint64, their sizes)."""
    top = len(arr) - 1
    first = arr[np.minimum(pos, top)]
    if not (first >= 0x80).any():
        if (pos >= limit).any():
            raise Unsupported("varint past its element")
        return first.astype(np.uint64), np.ones(len(pos), dtype=np.int64)
    value = np.zeros(len(pos), dtype=np.uint64)
    size = np.zeros(len(pos), dtype=np.int64)
    going = np.ones(len(pos), dtype=bool)
    for k in range(10):
        if not going.any():
            return value, size
        at = pos + k
        b = arr[np.minimum(at, top)].astype(np.uint64)
        if (going & (at >= limit)).any():
            raise Unsupported("varint past its element")
        value |= np.where(going, (b & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        size += going
        going &= b >= 0x80
    if going.any():
        raise Unsupported("varint too long")
    return value, size


def _ints(np, field, values):
    """Varint values (a uint64 array) as field's type reads them."""
    t = field.type
    if t in (F.TYPE_INT32, F.TYPE_ENUM):
        ints = values.astype(np.uint32).astype(np.int32)
    elif t == F.TYPE_INT64:
        ints = values.astype(np.int64)
    elif t == F.TYPE_UINT32:
        ints = values.astype(np.uint32)
    elif t == F.TYPE_UINT64:
        ints = values
    elif t == F.TYPE_SINT32:
        u = values.astype(np.uint32).astype(np.int64)
        ints = (u >> 1) ^ -(u & 1)
    elif t == F.TYPE_SINT64:
        u = values
        ints = ((u >> np.uint64(1)).astype(np.int64)) ^ -((u & np.uint64(1)).astype(np.int64))
    elif t == F.TYPE_BOOL:
        ints = (values != 0).astype(np.int64)
    else:
        raise Unsupported(f"varint for type {t}")
    return ints


def _int_texts(np, field, values) -> List[str]:
    """JSON of each varint value (uint64 array) as field's type reads it."""
    ints = _ints(np, field, values)
    if not len(ints):
        return []
    low, high = int(ints.min()), int(ints.max())
    if high - low < 4096:
        table = np.empty(high - low + 1, dtype=object)
        table[:] = [_scalar_text(field, v) for v in range(low, high + 1)]
        return table[(ints - low) if low else ints].tolist()
    plain = ints.tolist()
    if field.type in _QUOTED:
        return list(map('"%d"'.__mod__, plain))
    if field.type in (F.TYPE_ENUM, F.TYPE_BOOL):
        return [_scalar_text(field, v) for v in plain]
    return list(map(int.__repr__, plain))


def _messages_json(np, arr, data, info: _Message, starts, lengths, depth: int,
                   sep: str) -> str:
    """The JSON of the elements of a run of flat messages (strings and
    varints, no presence), each at depth, joined by sep; Unsupported if one
    holds anything else or a field twice."""
    n = len(starts)
    ends = starts + lengths
    cursor = starts.copy()
    fields = sorted(info.fields.values(), key=lambda f: f.number)
    slot = {f.number: i for i, f in enumerate(fields)}
    # Per field: the elements holding it and where (strings: content start
    # and length; varints: value).
    found = [[] for _ in fields]
    tag_field = np.full(256, -1, dtype=np.int64)
    for tag, f in info.tags.items():
        tag_field[tag] = slot[f.number]
    while True:
        live = np.flatnonzero(cursor < ends)
        if not len(live):
            break
        at = cursor[live]
        which = tag_field[arr[at]]
        if (which < 0).any():
            raise Unsupported("unexpected tag")
        for i, f in enumerate(fields):
            sel = live[which == i]
            if not len(sel):
                continue
            pos = cursor[sel] + 1
            value, size = _varints(np, arr, pos, ends[sel])
            if f.type == F.TYPE_STRING:
                begin = pos + size
                length = value.astype(np.int64)
                if (begin + length > ends[sel]).any():
                    raise Unsupported("string past its element")
                cursor[sel] = begin + length
                found[i].append((sel, begin, length))
            else:
                cursor[sel] = pos + size
                found[i].append((sel, value))
        del at, which
    if (cursor != ends).any():
        raise Unsupported("field past its element")
    for parts in found:
        if len(parts) > 1:
            # Found in several passes: in distinct elements, or given twice.
            held = np.zeros(n, dtype=bool)
            sel = np.concatenate([part[0] for part in parts])
            held[sel] = True
            if int(np.count_nonzero(held)) != len(sel):
                raise Unsupported("a field twice")
    text = _string_first_json(np, arr, data, fields, found, n, depth, sep)
    if text is not None:
        return text
    inner = "\n" + " " * (depth + 1)
    close = "\n" + " " * depth + "}"
    columns = []
    any_before = np.zeros(n, dtype=bool)
    for i, f in enumerate(fields):
        if not found[i]:
            continue
        if f.type == F.TYPE_STRING:
            sel, begin, length = (np.concatenate(c) for c in zip(*found[i]))
            order = np.argsort(begin, kind="stable")  # _gather takes them in order
            sel, begin, length = sel[order], begin[order], length[order]
            keep = length > 0
            sel, begin, length = sel[keep], begin[keep], length[keep]
            texts = _string_list(np, arr, data, begin, length)
        else:
            sel, value = (np.concatenate(c) for c in zip(*found[i]))
            keep = value != 0
            if f.type in (F.TYPE_INT32, F.TYPE_ENUM, F.TYPE_UINT32, F.TYPE_SINT32):
                keep = (value & np.uint64(0xFFFFFFFF)) != 0
            sel, value = sel[keep], value[keep]
            texts = _int_texts(np, f.field, value)
        if not len(sel):
            continue
        present = np.zeros(n, dtype=bool)
        present[sel] = True
        prefix = np.array(["", "{" + inner + f.key, "," + inner + f.key], dtype=object)
        code = present.astype(np.int8) * (1 + any_before.astype(np.int8))
        columns.append(prefix[code].tolist())
        if len(sel) == n and (n < 2 or bool((sel[1:] > sel[:-1]).all())):
            columns.append(texts)
        else:
            column = np.full(n, "", dtype=object)
            held = np.empty(len(texts), dtype=object)
            held[:] = texts
            column[sel] = held
            columns.append(column.tolist())
        any_before |= present
    ending = np.array(["{}", close], dtype=object)
    columns.append(ending[any_before.astype(np.int8)].tolist())
    # Each element after the separator but the first.
    lead = [sep] * n
    lead[0] = ""
    columns.insert(0, lead)
    width = len(columns)
    parts = [None] * (n * width)
    for c, column in enumerate(columns):
        parts[c::width] = column
    return "".join(parts)


def _string_first_json(np, arr, data, fields, found, n: int, depth: int, sep: str):
    """_messages_json's text when every element holds its one string field,
    numbered before its other fields, which hold integers of few distinct
    combinations: each element's name, then what follows it up to the next
    one's name, looked up by the combination. None otherwise."""
    string, numbers = None, []
    for i, f in enumerate(fields):
        if not found[i]:
            continue
        if f.type != F.TYPE_STRING:
            if string is None:
                return None
            numbers.append((f, found[i]))
        elif string is not None:
            return None
        else:
            string = (f, found[i])
    if string is None:
        return None
    string_field, parts = string
    sel, begin, length = (np.concatenate(c) for c in zip(*parts))
    if len(sel) != n or not (length > 0).all():
        return None
    if len(parts) > 1:
        order = np.argsort(begin, kind="stable")
        begin, length = begin[order], length[order]
    code = np.zeros(n, dtype=np.int64)
    combinations = 1
    columns = []
    for f, parts in numbers:
        sel, value = (np.concatenate(c) for c in zip(*parts))
        ints = _ints(np, f.field, value)
        if ints.dtype == np.uint64:
            if (ints >= np.uint64(1 << 63)).any():
                return None
            ints = ints.astype(np.int64)
        v = np.zeros(n, dtype=np.int64)
        v[sel] = ints
        low, high = int(v.min()), int(v.max())
        radix = high - low + 1
        if combinations * radix > 1 << 16:
            return None
        code += (v - low) * combinations
        columns.append((f, low, combinations, radix))
        combinations *= radix
    names = _names(np, arr, data, begin, length)
    inner = "\n" + " " * (depth + 1)
    close = "\n" + " " * depth + "}"
    opener = "{" + inner + string_field.key + '"'
    after = np.empty(combinations, dtype=object)
    for c in np.flatnonzero(np.bincount(code, minlength=combinations)).tolist():
        text = ""
        for f, low, stride, radix in columns:
            value = low + (c // stride) % radix
            if value:
                text += "," + inner + f.key + _scalar_text(f.field, value)
        after[c] = '"' + text + close + sep + opener
    follows = after[code].tolist()
    follows[-1] = follows[-1][:-len(sep + opener)]
    items = [None] * (2 * n)
    items[0::2] = names
    items[1::2] = follows
    return opener + "".join(items)


# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------


class _Ctx:
    """The bytes, and numpy and a view of them as an array, imported and made
    when a long run is met (a small response converts without numpy)."""

    __slots__ = ("data", "_np", "_arr")

    def __init__(self, data):
        self.data = data
        self._np = self._arr = None

    @property
    def np(self):
        if self._np is None:
            self._np = _np()
        return self._np

    @property
    def arr(self):
        if self._arr is None:
            self._arr = self.np.frombuffer(self.data, dtype=self.np.uint8)
        return self._arr


def message_json(data: bytes, descriptor, out=None) -> List[str]:
    """MessageToJson(<message of `descriptor` parsed from data>, indent=1)
    and a newline, as a list of strings to write in order; or appended to
    `out` (anything with append) as they are made, and `out` returned."""
    info = _info(descriptor)
    ctx = _Ctx(data)
    if out is None:
        out = []
    try:
        _message(ctx, 0, len(data), info, 0, out)
    except (IndexError, ValueError, OverflowError) as e:
        raise Unsupported(str(e)) from None
    out.append("\n")
    return out


def _message(ctx, p: int, end: int, info: _Message, depth: int, out: List[str]) -> None:
    data = ctx.data
    # number -> last value (singular) or list of items (repeated): an item is
    # a value, ("span", start, end) of a message, or ("run", starts, lengths).
    values = {}
    fields = info.fields
    while p < end:
        key, p = _varint(data, p)
        number, wire = key >> 3, key & 7
        f = fields.get(number)
        if f is None or f.unsupported:
            raise Unsupported(f"field {number} of {info.descriptor.full_name}")
        for other in f.oneof:
            values.pop(other, None)  # the last member of a oneof given is set
        if wire == 2:
            if f.repeated and f.wire == 2 and key < 0x80 and end - p > _BULK_MIN_BYTES:
                length, q = _varint(data, p)
                if length < 0x4000:
                    starts, lengths, p = _run(ctx.np, ctx.arr, data, p - 1, end, key)
                    values.setdefault(number, []).append(("run", starts, lengths))
                    continue
            length, p = _varint(data, p)
            q = p + length
            if q > end:
                raise Unsupported("length past its message")
            if f.type == F.TYPE_MESSAGE:
                item = ("span", p, q)
            elif f.type in (F.TYPE_STRING, F.TYPE_BYTES):
                item = data[p:q]
            elif f.packable:
                if q - p > _BULK_MIN_BYTES and f.type in _VARINT_INT:
                    values.setdefault(number, []).append(("packed", p, q))
                    p = q
                    continue
                items = values.setdefault(number, [])
                while p < q:
                    items.append(_scalar(f, data, p))
                    p = _skip(f.wire, data, p)
                if p != q:
                    raise Unsupported("packed field past its end")
                continue
            else:
                raise Unsupported("wire type")
            p = q
        else:
            if f.repeated and not f.packable or wire != f.wire:
                raise Unsupported("wire type")
            item = _scalar(f, data, p)
            p = _skip(wire, data, p)
        if f.repeated:
            values.setdefault(number, []).append(item)
        elif number in values and f.type == F.TYPE_MESSAGE:
            raise Unsupported("a message field twice")  # they would merge
        else:
            values[number] = item
    if p != end:
        raise Unsupported("field past its message")
    _emit(ctx, info, values, depth, out)


def _skip(wire: int, data, p: int) -> int:
    if wire == 0:
        while data[p] >= 0x80:
            p += 1
        return p + 1
    if wire == 1:
        return p + 8
    if wire == 5:
        return p + 4
    raise Unsupported("wire type")


def _scalar(f: _Field, data, p: int):
    """The value of a scalar at p: an int, or (value, raw bytes) of a fixed
    size one (whose bits tell presence: -0.0 is written)."""
    if f.wire == 0:
        v, _ = _varint(data, p)
        return _int_value(f.type, v)
    size = 8 if f.wire == 1 else 4
    raw = data[p:p + size]
    if len(raw) != size:
        raise Unsupported("truncated")
    return struct.unpack(_FIXED[f.type], raw)[0], raw


def _present(f: _Field, item) -> bool:
    if f.presence:
        return True
    if isinstance(item, tuple):
        value, raw = item
        return raw != b"\0" * len(raw)
    return bool(item)


def _text(f: _Field, item) -> str:
    if isinstance(item, tuple):
        return _scalar_text(f.field, item[0])
    return _scalar_text(f.field, item)


def _emit(ctx, info: _Message, values, depth: int, out: List[str]) -> None:
    present = []
    for number in sorted(values):
        f = info.fields[number]
        item = values[number]
        if (item if f.repeated else _present(f, item)):
            present.append((f, item))
    if not present:
        out.append("{}")
        return
    inner = "\n" + " " * (depth + 1)
    for i, (f, item) in enumerate(present):
        out.append(("{" if i == 0 else ",") + inner + f.key)
        if not f.repeated:
            if f.type == F.TYPE_MESSAGE:
                _message(ctx, item[1], item[2], f.message, depth + 1, out)
            else:
                out.append(_text(f, item))
        else:
            _emit_list(ctx, f, item, depth + 1, out)
    out.append("\n" + " " * depth + "}")


def _emit_list(ctx, f: _Field, items, depth: int, out: List[str]) -> None:
    data = ctx.data
    item_indent = "\n" + " " * (depth + 1)
    sep = "," + item_indent
    out.append("[" + item_indent)
    first = True
    for item in items:
        kind = item[0] if isinstance(item, tuple) and isinstance(item[0], str) else None
        if kind == "run":
            _, starts, lengths = item
            if not len(starts):
                continue
            if not first:
                out.append(sep)
            first = False
            if f.type == F.TYPE_STRING:
                out.append(_strings_json(ctx.np, ctx.arr, data, starts, lengths, sep))
            elif f.type == F.TYPE_BYTES:
                out.append(sep.join('"' + base64.b64encode(data[s:s + n]).decode("ascii") + '"'
                                    for s, n in zip(starts.tolist(), lengths.tolist())))
            else:
                _emit_messages(ctx, f, starts, lengths, depth + 1, sep, out)
            continue
        if kind == "packed":
            _, p, q = item
            text = _packed_json(ctx, f, p, q, sep)
            if text:
                if not first:
                    out.append(sep)
                first = False
                out.append(text)
            continue
        if not first:
            out.append(sep)
        first = False
        if kind == "span":
            _message(ctx, item[1], item[2], f.message, depth + 1, out)
        else:
            out.append(_text(f, item))
    out.append("\n" + " " * depth + "]")


def _emit_messages(ctx, f: _Field, starts, lengths, depth: int, sep: str, out) -> None:
    """A run of message elements, each at depth."""
    for c in range(0, len(starts), _CHUNK):
        # In chunks, to hold the numpy arrays and lists of a few at a time.
        if c:
            out.append(sep)
        chunk_starts, chunk_lengths = starts[c:c + _CHUNK], lengths[c:c + _CHUNK]
        if f.message.flat:
            try:
                text = _messages_json(ctx.np, ctx.arr, ctx.data, f.message, chunk_starts,
                                      chunk_lengths, depth, sep)
            except Unsupported:
                pass
            else:
                out.append(text)
                continue
        for k, (s, n) in enumerate(zip(chunk_starts.tolist(), chunk_lengths.tolist())):
            if k:
                out.append(sep)
            _message(ctx, s, s + n, f.message, depth, out)


def _packed_json(ctx, f: _Field, p: int, q: int, sep: str) -> str:
    """A long packed run of varints, as JSON values joined by sep."""
    np, arr = ctx.np, ctx.arr
    chunk = arr[p:q]
    last = np.flatnonzero(chunk < 0x80)
    if not len(last) or last[-1] != q - p - 1:
        raise Unsupported("packed varints past their end")
    begin = np.empty(len(last), dtype=np.int64)
    begin[0] = 0
    begin[1:] = last[:-1] + 1
    value, size = _varints(np, arr, begin + p, np.full(len(last), q, dtype=np.int64))
    if f.type in (F.TYPE_BOOL, F.TYPE_ENUM) or len(value) < 4096:
        return sep.join(_int_texts(np, f.field, value))
    return _decimals(np, _ints(np, f.field, value), sep, f.type in _QUOTED)


def _decimals(np, ints, sep: str, quoted: bool) -> str:
    """The integers (an int64 or uint64 array) in decimal, each in quotes
    when quoted, joined by sep: a row of bytes each, the digits
    right-aligned, and what is before the first digit but the sign and
    quote left out."""
    n = len(ints)
    negative = ints < 0 if ints.dtype != np.uint64 else np.zeros(n, dtype=bool)
    magnitude = ints.astype(np.uint64)
    magnitude[negative] = ~magnitude[negative] + np.uint64(1)
    width = len(str(int(magnitude.max())))
    q = 1 if quoted else 0
    tail = ('"' if quoted else "") + sep
    row = q + 1 + width + len(tail)
    rows = np.empty((n, row), dtype=np.uint8)
    keep = np.ones((n, row), dtype=bool)
    rows[:, 0] = ord('"')
    keep[:, 0] = quoted
    rows[:, q] = ord("-")
    keep[:, q] = negative
    rest = magnitude.copy()
    ten = np.uint64(10)
    digits_left = q + 1
    for column in range(digits_left + width - 1, digits_left - 1, -1):
        rows[:, column] = (rest % ten).astype(np.uint8) + ord("0")
        rest //= ten
    # Leading zeros: columns before each number's first digit.
    count = np.ones(n, dtype=np.int64)
    for k in range(1, width):
        count += magnitude >= np.uint64(10 ** k)
    for column in range(width - 1):
        keep[:, digits_left + column] = count >= width - column
    rows[:, digits_left + width:] = np.frombuffer(tail.encode("ascii"), dtype=np.uint8)
    text = rows[keep].tobytes().decode("ascii")
    return text[:-len(sep)] if sep else text
