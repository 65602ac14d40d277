"""What a cache holds and tells: immutable nodes, and the events between two states of it."""

from __future__ import annotations

import dataclasses
import enum

from zk_recipes._client.states import StateChange
from zk_recipes._types import ZnodeStat


@dataclasses.dataclass(frozen=True, slots=True)
class CachedNode:
    """One node as the server held it: its path (in the client's namespace), data and stat.

    ``data`` is None in a cache made with ``cache_data=False``. Immutable: a
    change makes a new one, so a value handed out stays what it was.
    """

    path: str
    data: bytes | None
    stat: ZnodeStat


class CacheEventType(enum.Enum):
    #: A node appeared (at the first load too, for every node there).
    CREATED = "CREATED"
    #: A node's data (or version) changed; ``node`` is the new value, ``old`` the one before.
    CHANGED = "CHANGED"
    #: A node went; ``old`` is its last value.
    DELETED = "DELETED"
    #: The first load is done: the cache equals what the server held at some moment.
    INITIALIZED = "INITIALIZED"
    #: After a reconnect or a new session, the cache is equal to the server again.
    RESYNCED = "RESYNCED"
    #: The client's connection state changed (``state`` has it): SUSPENDED means the
    #: cache may be behind until RESYNCED.
    CONNECTION = "CONNECTION"


@dataclasses.dataclass(frozen=True, slots=True)
class CacheEvent:
    """One event of a cache, in the order the changes happened on the server."""

    type: CacheEventType
    #: The node after the change (CREATED, CHANGED); None otherwise.
    node: CachedNode | None = None
    #: The node before it (CHANGED, DELETED); None otherwise.
    old: CachedNode | None = None
    #: The connection state change (CONNECTION only).
    state: StateChange | None = None
    #: INITIALIZED, RESYNCED: the requests the re-synchronisation sent.
    requests: int | None = None
    #: RESYNCED: True when it read only what the server said changed (a reconnect
    #: on the same session), False when it walked every node (a new session).
    incremental: bool = False

    @property
    def path(self) -> str | None:
        """The node's path, for node events."""
        if self.node is not None:
            return self.node.path
        return self.old.path if self.old is not None else None
