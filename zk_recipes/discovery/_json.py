"""JSON written as Jackson's default ObjectMapper writes it, so our bytes equal Curator's.

Compact (no spaces), UTF-8 without ``\\u`` escapes for non-ASCII text
(except characters beyond U+FFFF, which Jackson writes as an escaped
surrogate pair, ``\\uD83D\\uDE00``), the
short escapes ``\\" \\\\ \\b \\f \\n \\r \\t``, other control characters as
``\\u00XX`` with upper-case hex (Python writes lower case), ``/`` as is; keys
in the order given. A float is written as Java's ``Double.toString`` does:
plain between 10^-3 and 10^7, else ``1.0E10``-style (Python writes
``10000000000.0``). NaN and infinities have no JSON form and are refused.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_CONTROL = re.compile(r"[\x00-\x1f\"\\\U00010000-\U0010ffff]")
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    code = ord(char)
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return _SHORT.get(char) or f"\\u{code:04X}"


def string(text: str) -> str:
    return '"' + _CONTROL.sub(_escape, text) + '"'


def number(value: float) -> str:
    if isinstance(value, bool):
        raise TypeError("a bool is not a number here")
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON form")
    magnitude = abs(value)
    if value == 0 or 1e-3 <= magnitude < 1e7:
        text = repr(value)
        return text if "e" not in text else _scientific(value)
    return _scientific(value)


def _scientific(value: float) -> str:
    mantissa, exponent = f"{value:.17e}".split("e")
    # The shortest digits that read back as the same double, as Java prints them.
    for digits in range(1, 18):
        candidate = f"{value:.{digits - 1}e}"
        if float(candidate) == value:
            mantissa, exponent = candidate.split("e")
            break
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}E{int(exponent)}"


def dumps(value: Any) -> str:
    """``value`` as Jackson writes it (dicts in key order, lists, str, int, float, bool, None)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return string(value)
    if isinstance(value, int | float):
        return number(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{string(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    raise TypeError(f"{type(value).__name__} has no JSON form")


def loads(data: bytes) -> Any:
    """Parse UTF-8 JSON, keeping key order (a duplicate key keeps its last value, as Jackson)."""
    return json.loads(data.decode("utf-8"))
