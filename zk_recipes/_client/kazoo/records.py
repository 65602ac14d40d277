"""kazoo's wire records and ours, and their conversions: what a request and a reply look like.

The requests kazoo 2.11 cannot send (CONTAINER and TTL creates, opcodes 19
and 21, answered by a Create2Response), the table of which requests prove
that the ensemble's leader heard us, how messages name a request, and the
conversions of kazoo's stat, event type and ACL records to and from ours.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from typing import Any

from kazoo.protocol.serialization import (
    Create,
    Create2,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Reconfig,
    SetACL,
    SetData,
    Sync,
    Transaction,
    long_struct,
)
from kazoo.protocol.states import EventType
from kazoo.security import ACL, Id

from zk_recipes._types import Acl, WatchEventType, ZnodeStat

EVENT_TYPES = {
    EventType.CREATED: WatchEventType.CREATED,
    EventType.DELETED: WatchEventType.DELETED,
    EventType.CHANGED: WatchEventType.CHANGED,
    EventType.CHILD: WatchEventType.CHILD,
    EventType.NONE: WatchEventType.NONE,
}


def stat_of(raw: Any) -> ZnodeStat:
    return ZnodeStat(
        raw.czxid,
        raw.mzxid,
        raw.ctime,
        raw.mtime,
        raw.version,
        raw.cversion,
        raw.aversion,
        raw.ephemeralOwner,
        raw.dataLength,
        raw.numChildren,
        raw.pzxid,
    )


#: Requests whose reply proves the ensemble's leader handled them: writes and syncs,
#: which a follower forwards to the leader. Reads and pings a follower answers alone.
THROUGH_THE_LEADER = frozenset(
    {
        Create.type,
        Create2.type,
        Delete.type,
        SetData.type,
        SetACL.type,
        Sync.type,
        Transaction.type,
        Reconfig.type,
        19,  # createContainer (CreateContainer)
        21,  # createTTL (CreateTTL)
    }
)


class CreateContainer(namedtuple("CreateContainer", "path data acl flags")):
    """createContainer (opcode 19): a CreateRequest with flags=4, answered by a Create2Response."""

    type = 19
    serialize = Create2.serialize
    deserialize = Create2.deserialize


class CreateTTL(namedtuple("CreateTTL", "path data acl flags ttl")):
    """createTTL (opcode 21): CreateTTLRequest = CreateRequest + int64 ttl (ms)."""

    type = 21
    deserialize = Create2.deserialize

    def serialize(self) -> bytearray:
        b: bytearray = Create2.serialize(self)
        b.extend(long_struct.pack(self.ttl))
        return b


#: A request's xid and type, which the server counts in its length with the body.
HEADER_BYTES = 8
#: How messages name a request, by opcode.
REQUEST_NAMES = {
    16: "reconfig",
    Create.type: "create",
    Create2.type: "create",
    19: "create",
    21: "create",
    Delete.type: "delete",
    Exists.type: "exists",
    GetData.type: "get",
    SetData.type: "set",
    GetChildren.type: "get_children",
    Sync.type: "sync",
    SetACL.type: "set_acl",
    Transaction.type: "multi",
}


def kazoo_acl(acl: Sequence[Acl]) -> list[Any]:
    return [ACL(int(a.perms), Id(a.scheme, a.id)) for a in acl]
