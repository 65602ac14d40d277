"""What a cache holds and tells: immutable nodes, and the events between two states of it."""

from __future__ import annotations

import dataclasses
import enum

from zk_recipes._client.states import StateChange
from zk_recipes._errors import ZkRecipesError
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
    """What a ``CacheEvent`` says: a node's change, the cache's state, or the connection's."""

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
    #: A node this client may not read (NoAuth): not cached, nor anything below it,
    #: as if it did not exist (``path`` names it; whatever was cached of it went
    #: first, with DELETED events). The cache's ``unreadable`` lists such nodes;
    #: each is read again at every resync and at its next event.
    UNREADABLE = "UNREADABLE"
    #: The cache stopped (``error`` says why: CacheOverflowError past ``max_nodes``);
    #: the last event. Its reads and waits raise ``error`` from then on.
    FAILED = "FAILED"


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
    #: UNREADABLE: the path of the node the client may not read.
    unreadable: str | None = None
    #: FAILED: why the cache stopped.
    error: ZkRecipesError | None = None

    @property
    def path(self) -> str | None:
        """The node's path, for node events (and UNREADABLE)."""
        if self.node is not None:
            return self.node.path
        return self.old.path if self.old is not None else self.unreadable
