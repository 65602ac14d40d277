"""Queue item bytes, as Curator's ItemSerializer writes them, and the serializers of values.

A node holds one or more items: int32 BE version ``0x00010001``, then per
item the byte ``0x01``, an int32 BE length and the item's bytes, then the
byte ``0x02``. ``put("hello")`` is ``00010001 01 00000005 68656c6c6f 02``;
``put_multi`` writes several items into one node. Bytes that do not parse
raise ``CorruptedItemError`` (Curator logs "Corrupted queue item" and
deletes the node: we move it aside instead, see DistributedQueue).

**Attempts, after the end.** A node whose consumer failed carries, after the
end byte, a trailer: ``ZKR1``, int32 BE attempts so far, int32 BE length and
the last error as UTF-8 (at most ``ERROR_BYTES``). Curator's ItemSerializer
stops reading at the end byte, so a Curator consumer reads such a node as the
same items; ours reads the count, so it survives the consumer that made it.

A ``QueueSerializer`` turns values into an item's bytes and back: ``BYTES``
(the default: bytes as they are) and ``JSON`` (UTF-8 JSON text, what a Java
peer's Jackson-based ``QueueSerializer`` reads). No pickle: a queue is read
by whoever can write to ZooKeeper.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from zk_recipes._errors import ConfigurationError

VERSION = 0x00010001
_ITEM = 0x01
_END = 0x02
_INT = struct.Struct(">i")
_TRAILER = b"ZKR1"
#: The longest last error a trailer keeps (UTF-8 bytes; longer ones are cut).
ERROR_BYTES = 1000

T = TypeVar("T")


class CorruptedItemError(ValueError):
    """A queue node's bytes are not Curator's item format."""


def to_bytes(items: Sequence[bytes]) -> bytes:
    """One node's bytes for ``items`` (at least one)."""
    if not items:
        raise ConfigurationError("a queue node holds at least one item")
    out = bytearray(_INT.pack(VERSION))
    for item in items:
        out.append(_ITEM)
        out.extend(_INT.pack(len(item)))
        out.extend(item)
    out.append(_END)
    return bytes(out)


def from_bytes(data: bytes) -> list[bytes]:
    """The items of one node; CorruptedItemError saying where it is wrong."""
    return _parse(data)[0]


def split(data: bytes) -> tuple[bytes, int, str]:
    """``(items' bytes without the trailer, attempts so far, last error)``: the module note.

    CorruptedItemError as ``from_bytes``; a trailer that does not parse counts
    as none (another writer's bytes after the end: Curator ignores them too).
    """
    _items, end = _parse(data)
    body, rest = data[:end], data[end:]
    if len(rest) < 12 or rest[:4] != _TRAILER:
        return body, 0, ""
    (attempts,) = _INT.unpack_from(rest, 4)
    (size,) = _INT.unpack_from(rest, 8)
    error = rest[12 : 12 + max(0, size)].decode("utf-8", "replace")
    return body, max(0, attempts), error


def with_trailer(body: bytes, attempts: int, error: str) -> bytes:
    """``body`` (a node's items, no trailer) with a trailer: ``attempts`` so far, ``error``."""
    raw = error.encode("utf-8")[:ERROR_BYTES]
    return body + _TRAILER + _INT.pack(attempts) + _INT.pack(len(raw)) + raw


def _parse(data: bytes) -> tuple[list[bytes], int]:
    """The items, and the offset just after the end byte."""
    if len(data) < 5:
        raise CorruptedItemError(f"{len(data)} bytes: too short for a queue item")
    (version,) = _INT.unpack_from(data, 0)
    if version != VERSION:
        raise CorruptedItemError(f"version {version:#010x}, not {VERSION:#010x}")
    items: list[bytes] = []
    offset = 4
    while offset < len(data):
        opcode = data[offset]
        offset += 1
        if opcode == _END:
            return items, offset
        if opcode != _ITEM or offset + 4 > len(data):
            raise CorruptedItemError(f"opcode {opcode:#04x} at byte {offset - 1}")
        (size,) = _INT.unpack_from(data, offset)
        offset += 4
        if size < 0 or offset + size > len(data):
            raise CorruptedItemError(f"an item of {size} bytes at byte {offset - 4}")
        items.append(data[offset : offset + size])
        offset += size
    raise CorruptedItemError("no end marker")


class QueueSerializer(Protocol[T]):
    """Values to item bytes and back (Curator's QueueSerializer)."""

    def serialize(self, value: T) -> bytes: ...

    def deserialize(self, data: bytes) -> T: ...


class _Bytes:
    def serialize(self, value: bytes) -> bytes:
        if not isinstance(value, bytes | bytearray):
            raise ConfigurationError(
                f"this queue takes bytes (serializer=BYTES), got {type(value).__name__}: "
                "encode it, or make the queue with serializer=JSON"
            )
        return bytes(value)

    def deserialize(self, data: bytes) -> bytes:
        return data


class _Json:
    def serialize(self, value: Any) -> bytes:
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"a JSON queue item must be JSON: {exc}") from None

    def deserialize(self, data: bytes) -> Any:
        return json.loads(data.decode())


#: Items are bytes, as they are (the default).
BYTES: QueueSerializer[bytes] = _Bytes()
#: Items are JSON values, written as compact UTF-8 JSON.
JSON: QueueSerializer[Any] = _Json()
