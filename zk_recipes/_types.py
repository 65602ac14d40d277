"""Value types of the public API, with no kazoo in them.

Recipes and users speak in these; only the kazoo adapter
(``_client/kazoo/``) converts them to and from kazoo's objects, so a recipe
never needs to import the adapter to create a node, read a stat or handle a
watch event.

- ``CreateMode``: the wire flags of a create, and the one check of its ``ttl``.
- ``ZnodeStat``: a node's metadata; ``czxid`` is the fencing token recipes hand out.
- ``WatchEvent`` / ``WatchEventType``: what a one-shot watch delivers (``NONE``
  when kazoo dropped the watch on a disconnect: re-read and re-arm).
- ``Acl`` / ``Perms`` and the usual ACL lists.
- ``Owner``: the small JSON zk-recipes writes into lock, lease and semaphore
  nodes so that people (and ``contenders()``) can see who holds what.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from zk_recipes._errors import ConfigurationError, WrongTypeError


class CreateMode(enum.Enum):
    """ZooKeeper create modes (the wire flag is the value)."""

    PERSISTENT = 0
    EPHEMERAL = 1
    PERSISTENT_SEQUENTIAL = 2
    EPHEMERAL_SEQUENTIAL = 3
    CONTAINER = 4
    PERSISTENT_WITH_TTL = 5
    PERSISTENT_SEQUENTIAL_WITH_TTL = 6

    @property
    def is_ephemeral(self) -> bool:
        return self in (CreateMode.EPHEMERAL, CreateMode.EPHEMERAL_SEQUENTIAL)

    @property
    def is_sequential(self) -> bool:
        return self in (
            CreateMode.PERSISTENT_SEQUENTIAL,
            CreateMode.EPHEMERAL_SEQUENTIAL,
            CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL,
        )

    @property
    def is_ttl(self) -> bool:
        return self in (CreateMode.PERSISTENT_WITH_TTL, CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL)

    @classmethod
    def checked(cls, mode: object) -> CreateMode:
        """``mode`` if it is a CreateMode, else WrongTypeError."""
        if not isinstance(mode, CreateMode):
            raise WrongTypeError(f"mode must be a CreateMode, got {mode!r}")
        return mode

    def check_ttl(self, ttl: object) -> float | None:
        """The ``ttl=`` a create in this mode needs: seconds for the TTL modes, None otherwise."""
        if not self.is_ttl:
            if ttl is not None:
                raise ConfigurationError(f"ttl= only applies to the TTL modes, not {self.name}")
            return None
        if (
            isinstance(ttl, bool)
            or not isinstance(ttl, (int, float))
            or not math.isfinite(ttl)
            or ttl <= 0
        ):
            raise ConfigurationError(f"{self.name} needs a positive ttl= in seconds, got {ttl!r}")
        return float(ttl)


class ZnodeStat(NamedTuple):
    """A node's metadata. ``czxid`` is the fencing token recipes hand out."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


class WatchEventType(enum.Enum):
    """What a watch was told about its node (kazoo's ``EventType``)."""

    CREATED = "CREATED"
    DELETED = "DELETED"
    CHANGED = "CHANGED"
    CHILD = "CHILD"
    #: kazoo fires this once for every pending watch when the connection drops;
    #: the watch is gone and must be re-armed ("re-list and re-arm").
    NONE = "NONE"


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """What a watch callback receives: what happened, and to which node."""

    type: WatchEventType
    path: str | None


WatchCallback = Callable[[WatchEvent], object]


class Wakeable(Protocol):
    """What a wait sleeps on and a close or a cancel sets: a ``threading.Event``, or the
    asyncio API's wake that completes a future on its loop (zk_recipes.aio)."""

    def set(self) -> None: ...


#: The attribute that marks a watch callback as one of our internal wake-ups.
_INLINE_ATTRIBUTE = "_zk_recipes_inline"


def mark_inline(callback: object) -> None:
    """Let the client run ``callback`` (a watch callback, or its class) on its connection thread.

    Why: a watch normally passes from kazoo's connection thread to its
    watch-worker thread, then to the thread that waits; for a callback that
    only sets an event the middle hop is pure latency, on every lock
    hand-off. Internal use only, for callbacks that set an event and return:
    one that blocked would stall the connection's reads, and with them the
    proof that the server hears us (a false simulated LOST). User callbacks
    are never marked.
    """
    setattr(callback, _INLINE_ATTRIBUTE, True)


def is_inline(callback: object) -> bool:
    """Whether ``callback`` was marked with ``mark_inline`` (itself or its class)."""
    return getattr(callback, _INLINE_ATTRIBUTE, False) is True


# -- ACLs ----------------------------------------------------------------------------------


class Perms(enum.IntFlag):
    """ZooKeeper permission bits."""

    READ = 1
    WRITE = 2
    CREATE = 4
    DELETE = 8
    ADMIN = 16
    ALL = 31


class Acl(NamedTuple):
    """One ACL entry: ``Acl(Perms.ALL, "world", "anyone")``.

    Recipes create nodes with the client's ``default_acl`` unless told
    otherwise; creator-only ACLs (``CREATOR_ALL_ACL``) need an authenticated
    client (digest or SASL).
    """

    perms: Perms
    scheme: str
    id: str


OPEN_ACL_UNSAFE: tuple[Acl, ...] = (Acl(Perms.ALL, "world", "anyone"),)
CREATOR_ALL_ACL: tuple[Acl, ...] = (Acl(Perms.ALL, "auth", ""),)
READ_ACL_UNSAFE: tuple[Acl, ...] = (Acl(Perms.READ, "world", "anyone"),)


def digest_acl(username: str, password: str, perms: Perms = Perms.ALL) -> Acl:
    """An ACL entry for the digest user ``username`` (as ``addauth digest user:pass``)."""
    digest = base64.b64encode(hashlib.sha1(f"{username}:{password}".encode()).digest()).decode()
    return Acl(perms, "digest", f"{username}:{digest}")


# -- owner metadata ------------------------------------------------------------------------

_HOST = socket.gethostname()
_compact = json.JSONEncoder(separators=(",", ":")).encode
#: Owner.here_bytes's JSON around the time, by (pid, thread name, id); cleared when full.
_owner_parts: dict[tuple[int, str, str | None], tuple[bytes, bytes]] = {}
_OWNER_PARTS_KEPT = 1024


@dataclasses.dataclass(frozen=True)
class Owner:
    """Who queued a node: the JSON zk-recipes writes into lock, lease and semaphore nodes.

    Every field is optional: a node written by another client (Curator, a
    script) carries no such JSON and reads back as an empty ``Owner``, and
    data written before a field existed reads back with that field None
    (unknown keys are ignored, so older readers read newer data too).
    Curator ignores node data on these paths, so the JSON costs nothing in
    interop.
    """

    #: Host name of the process (``socket.gethostname()``).
    host: str | None = None
    #: Its process id.
    pid: int | None = None
    #: Name of the thread that queued the node.
    thread: str | None = None
    #: ``time.time()`` when the node was queued.
    since: float | None = None
    #: The recipe's ``identifier=`` (Celery: the task id), if one was given.
    id: str | None = None
    #: ``time.time()`` when the hold began, where the holder records it (``zk-recipes
    #: lock`` does, once it holds); ``since`` is when the node was queued.
    held_since: float | None = None
    #: The pid of the command a supervisor (``zk-recipes lock``/``leader``) runs for the hold.
    command_pid: int | None = None
    #: That command's process group: ``kill -- -<command_pgid>`` reaches all of it.
    command_pgid: int | None = None

    @classmethod
    def here(cls, identifier: str | None = None) -> Owner:
        """This process and thread, now."""
        return cls(
            host=_HOST,
            pid=os.getpid(),
            thread=threading.current_thread().name,
            since=round(time.time(), 3),
            id=identifier,
        )

    @classmethod
    def here_bytes(cls, identifier: str | None = None) -> bytes:
        """``Owner.here(identifier).to_bytes()``, byte for byte, at the cost of formatting the time.

        Why: every acquire writes it. The host, pid, thread and id rarely
        change, so their JSON is made once per (pid, thread, id) and kept.
        """
        pid = os.getpid()
        thread = threading.current_thread().name
        key = (pid, thread, identifier)
        parts = _owner_parts.get(key)
        if parts is None:
            if len(_owner_parts) >= _OWNER_PARTS_KEPT:
                _owner_parts.clear()
            head = _compact({"host": _HOST, "pid": pid, "thread": thread})[:-1] + ',"since":'
            tail = "}" if identifier is None else "," + _compact({"id": identifier})[1:]
            parts = _owner_parts[key] = (head.encode(), tail.encode())
        # json writes a float as repr() does.
        return parts[0] + repr(round(time.time(), 3)).encode() + parts[1]

    def to_bytes(self) -> bytes:
        """Compact JSON, fields that are None left out (on every acquire: kept cheap)."""
        fields = {
            name: value
            for name, value in (
                ("host", self.host),
                ("pid", self.pid),
                ("thread", self.thread),
                ("since", self.since),
                ("id", self.id),
                ("held_since", self.held_since),
                ("command_pid", self.command_pid),
                ("command_pgid", self.command_pgid),
            )
            if value is not None
        }
        return _compact(fields).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Owner:
        """The owner in a node's data; an empty Owner for data that is not ours."""
        try:
            parsed: Any = json.loads(data) if data[:1] == b"{" else None
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return cls()

        def pick(name: str, kind: type) -> Any:
            value = parsed.get(name)
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            return value if isinstance(value, kind) and not isinstance(value, bool) else None

        return cls(
            host=pick("host", str),
            pid=pick("pid", int),
            thread=pick("thread", str),
            since=pick("since", float),
            id=pick("id", str),
            held_since=pick("held_since", float),
            command_pid=pick("command_pid", int),
            command_pgid=pick("command_pgid", int),
        )

    def __bool__(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))

    def __str__(self) -> str:
        """``host:pid (id)``, the parts known: ``web-1:4242 (task 7f3c...)``."""
        if not self:
            return "another process (no zk-recipes owner data)"
        if self.host is not None and self.pid is not None:
            where = f"{self.host}:{self.pid}"
        elif self.pid is not None:
            where = f"pid {self.pid}"
        else:
            where = self.host or ""
        if self.id is not None:
            return f"{where} ({self.id})" if where else f"id {self.id}"
        if where:
            return where
        return f"thread {self.thread!r}" if self.thread is not None else "another process"


@dataclasses.dataclass(frozen=True)
class Contender:
    """One node in a lock-like recipe's queue, as ``contenders()`` reports it."""

    #: The node's path, relative to the client's namespace.
    path: str
    #: Who queued it (empty for nodes of other clients, e.g. Curator's).
    owner: Owner
    #: True for the node(s) holding the lock now.
    is_holder: bool


__all__ = [
    "CREATOR_ALL_ACL",
    "OPEN_ACL_UNSAFE",
    "READ_ACL_UNSAFE",
    "Acl",
    "Contender",
    "CreateMode",
    "Owner",
    "Perms",
    "WatchCallback",
    "WatchEvent",
    "WatchEventType",
    "ZnodeStat",
    "digest_acl",
]
