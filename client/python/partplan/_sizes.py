"""Byte sizes for people: "16GiB" <-> 17179869184, as the C++ CLI reads them.

Suffixes are case-insensitive. K, M, G, T (also KB, MB, ...) are powers of
1000 and KiB, MiB, GiB, TiB (also Ki, Mi, ...) powers of 1024; B or no suffix
means bytes. Fractions and exponents are allowed ("1.5GiB", "1.2e10").
"""

import math
import re
from typing import Union

_KI, _K = 1024.0, 1000.0
# Longer suffixes first: "KiB" must win over "B", "KB" over "B".
_UNITS = [
    ("kib", _KI), ("mib", _KI**2), ("gib", _KI**3), ("tib", _KI**4),
    ("ki", _KI), ("mi", _KI**2), ("gi", _KI**3), ("ti", _KI**4),
    ("kb", _K), ("mb", _K**2), ("gb", _K**3), ("tb", _K**4),
    ("k", _K), ("m", _K**2), ("g", _K**3), ("t", _K**4),
    ("b", 1.0),
]
_NUMBER = re.compile(r"^[0-9.eE+-]+$")


def parse_byte_size(text: Union[str, int, float]) -> int:
    """A non-negative byte count from "16GiB", "1.5G", "1024" or a number."""
    if isinstance(text, bool):
        raise ValueError(f"invalid byte size {text!r}")
    if isinstance(text, (int, float)):
        if not math.isfinite(text) or text < 0:
            raise ValueError(f"invalid byte size {text!r}")
        return int(round(text))
    number = text.strip()
    multiplier = 1.0
    lower = number.lower()
    for suffix, mult in _UNITS:
        if lower.endswith(suffix):
            number = number[: -len(suffix)]
            multiplier = mult
            break
    number = number.rstrip()
    try:
        if not _NUMBER.match(number):
            raise ValueError
        value = float(number)
    except ValueError:
        raise ValueError(
            f"invalid byte size {text!r}: want a number with an optional suffix B, K, M, G, T "
            "(powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g. 16GiB"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"invalid byte size {text!r}")
    result = round(value * multiplier)
    if result >= 2**63:
        raise ValueError(f"byte size {text!r} is too large")
    return int(result)


def format_byte_size(n: int) -> str:
    """"512 B", "1.5 KiB", "16.0 GiB": the largest binary unit keeping it >= 1."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024.0
        if value < 1024.0 or unit == "EiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")
