"""Queue item bytes, as Curator's ItemSerializer writes them, and the serializers of values.

A node holds one or more items: int32 BE version ``0x00010001``, then per
item the byte ``0x01``, an int32 BE length and the item's bytes, then the
byte ``0x02``. ``put("hello")`` is ``00010001 01 00000005 68656c6c6f 02``;
``put_multi`` writes several items into one node. Bytes that do not parse
raise ``CorruptedItemError`` (Curator logs "Corrupted queue item" and
deletes the node: we move it aside instead, see DistributedQueue).

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
            return items
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
