"""The multi request (opcode 14) with every result read, create2's path and stat included.

kazoo's ``Transaction`` reads a create's reply as a path only and drops the
stat a ``create2`` (opcode 15), ``createContainer`` (19) or ``createTTL``
(21) answers with; it also keeps no place for a ``check`` or ``delete``
result. ``Multi`` sends the same bytes (``MultiHeader`` + each op, then the
done header) and reads one result per operation, in order:

- ``("create", path, stat)`` (stat None for a plain ``create``, opcode 1);
- ``("set", stat)``, ``("delete",)``, ``("check",)``;
- ``("error", code)``: the whole multi failed; the failing operation has its
  own code, those before it 0 (rolled back), those after it -2 (not run).

A multi that fails is still a successful reply (its header's err is 0):
the errors are in the body, and ``zk_recipes._client.transaction`` turns
them into one error naming the operation.
"""

from __future__ import annotations

from collections import namedtuple
from typing import NamedTuple

from kazoo.protocol.serialization import (
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_string,
    stat_struct,
)
from kazoo.protocol.states import ZnodeStat as KazooStat


class TxOp(NamedTuple):
    """One operation of a transaction, as the client describes it (no kazoo type in it).

    ``kind``: "create", "set", "delete" or "check"; ``path`` absolute (with the
    namespace); ``mode`` a CreateMode's wire flag; ``ttl`` milliseconds.
    """

    kind: str
    path: str
    data: bytes = b""
    version: int = -1
    mode: int = 0
    acl: tuple[object, ...] | None = None
    ttl: int | None = None


#: Result kinds by the operation type in the result's header.
_CREATE, _DELETE, _SET, _CHECK, _ERROR = 1, 2, 5, 13, -1
_CREATE_WITH_STAT = frozenset({15, 19, 21})


class Multi(namedtuple("Multi", "operations")):
    """multi (opcode 14): ``operations`` are kazoo's or our request records."""

    type = 14

    def serialize(self) -> bytearray:
        body = bytearray()
        for op in self.operations:
            body.extend(MultiHeader(op.type, False, -1).serialize() + op.serialize())
        body.extend(multiheader_struct.pack(-1, True, -1))
        return body

    @classmethod
    def deserialize(cls, buffer: bytes, offset: int) -> list[tuple[object, ...]]:
        results: list[tuple[object, ...]] = []
        header, offset = MultiHeader.deserialize(buffer, offset)
        while not header.done:
            kind = header.type
            if kind == _CREATE or kind in _CREATE_WITH_STAT:
                path, offset = read_string(buffer, offset)
                stat = None
                if kind in _CREATE_WITH_STAT:
                    stat = KazooStat._make(stat_struct.unpack_from(buffer, offset))
                    offset += stat_struct.size
                results.append(("create", path, stat))
            elif kind == _SET:
                results.append(("set", KazooStat._make(stat_struct.unpack_from(buffer, offset))))
                offset += stat_struct.size
            elif kind == _DELETE:
                results.append(("delete",))
            elif kind == _CHECK:
                results.append(("check",))
            elif kind == _ERROR:
                results.append(("error", int_struct.unpack_from(buffer, offset)[0]))
                offset += int_struct.size
            else:
                raise ValueError(f"a multi result of unknown type {kind}")
            header, offset = MultiHeader.deserialize(buffer, offset)
        return results
