"""The contender queue: sequential-ephemeral nodes, first in line wins.

Shared by every lock-like recipe (Lock, RLock, both halves of ReadWriteLock,
the semaphores' internal mutex) and by leader election. Curator's
LockInternals + StandardLockInternalsDriver, same wire layout, so Java and
Python contenders queue in one directory:

1. **Enter**: a protected EPHEMERAL_SEQUENTIAL node ``<dir>/_c_<uuid>-<token><seq>``
   under CONTAINER parents, *pipelined* with the read of the directory's
   children (one round trip; the list already holds our node).
2. **Sort** every child by the text after the last occurrence of a queue
   token (the whole name if there is none). Foreign children take part, as
   in Curator (a foreign child that sorts first blocks the queue: CURATOR-43).
3. **Decide** with the recipe's rule: ``rule(sorted_names, our_index)``
   returns None when it is our turn, else the name of the node to wait for
   (a mutex waits for its immediate predecessor: no herd).
4. **Wait** with a getData watch on that node (getData, not exists, so no
   watch is left behind when it is already gone). When it is deleted and it
   was the head of the queue we saw while we were second, it is our turn
   without a re-read: sequence numbers only grow, so nobody can have queued
   ahead of us. Any other wake-up — another deletion, kazoo's NONE event
   after a disconnect (kazoo drops every watch then), a timeout of a request
   — re-lists and re-decides.
5. **Trust** a node only while its ``ephemeralOwner`` is our current session.
   If our node is missing from the list, or the session changed, the session
   was lost: enter again with a new node (Curator does the same).

SUSPENDED: the wait goes on (requests queue until the connection is back).
LOST: our node is gone; the next re-list notices and re-enters. A wait that
times out, is cancelled (``Cancellation``, for recipes that can be closed
while they wait, such as LeaderSelector) or fails deletes its own node
(guaranteed delete) so nobody is blocked by it (kazoo #732).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Sequence

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.kazoo import CreateMode, WatchEvent, WatchEventType
from zk_recipes._deadline import expired, remaining, request_timeout
from zk_recipes._errors import (
    ConnectionLostError,
    NoNodeError,
    SessionLost,
    ZkTimeoutError,
)

log = logging.getLogger("zk_recipes.contenders")

#: ``rule(sorted_names, our_index) -> name to wait for, or None when it is our turn``.
Rule = Callable[[list[str], int], "str | None"]


def sort_key(name: str, tokens: Sequence[str]) -> str:
    """Curator's fixForSorting: the text after the last occurrence of a token."""
    for token in tokens:
        index = name.rfind(token)
        if index >= 0:
            return name[index + len(token) :]
    return name


def first_in_line(max_leases: int = 1) -> Rule:
    """The mutex rule: our turn while fewer than ``max_leases`` are ahead of us."""

    def rule(names: list[str], index: int) -> str | None:
        return None if index < max_leases else names[index - max_leases]

    return rule


@dataclasses.dataclass(frozen=True)
class Entry:
    """Our node in the queue."""

    #: Path of our node, relative to the client's namespace.
    path: str
    name: str
    #: The node's creation zxid: strictly increasing across the ensemble (fencing token).
    czxid: int
    #: The session that owns the node.
    session_id: int


@dataclasses.dataclass
class _Wake:
    event: threading.Event = dataclasses.field(default_factory=threading.Event)
    deleted: bool = False

    def __call__(self, watch_event: WatchEvent) -> None:
        self.deleted = watch_event.type is WatchEventType.DELETED
        self.event.set()


class Cancellation:
    """A flag that ends a queued wait at once: ``acquire`` then returns None.

    Like ``client.wake_on_close``, it sets the event a wait sleeps on, so a
    waiter gives up without polling (and keeps its place until it does).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._set = False
        self._events: set[threading.Event] = set()

    def set(self) -> None:
        with self._guard:
            self._set = True
            events = list(self._events)
        for event in events:
            event.set()

    def clear(self) -> None:
        with self._guard:
            self._set = False

    def is_set(self) -> bool:
        return self._set

    @contextlib.contextmanager
    def wakes(self, event: threading.Event) -> Iterator[None]:
        """Set ``event`` if this is (or becomes) set while the block runs."""
        with self._guard:
            if self._set:
                event.set()
            else:
                self._events.add(event)
        try:
            yield
        finally:
            with self._guard:
                self._events.discard(event)


class ContenderQueue:
    """Contenders in one directory, ordered by sequence number."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        token: str,
        *,
        sort_tokens: Sequence[str] | None = None,
    ) -> None:
        self.client = client
        self.path = _paths.validate_writable_path(path)
        self.token = token
        self.sort_tokens = tuple(sort_tokens) if sort_tokens else (token,)

    def sort(self, children: Sequence[str]) -> list[str]:
        return sorted(children, key=lambda name: sort_key(name, self.sort_tokens))

    def node_path(self, name: str) -> str:
        return _paths.join(self.path, name)

    def participants(self) -> list[str]:
        """Names of all children, in queue order."""
        try:
            return self.sort(self.client.get_children(self.path))
        except NoNodeError:
            return []

    def enter(self, data: bytes, token: str | None = None) -> tuple[Entry, list[str]]:
        """Create our node and read the queue in one round trip; the queue comes sorted."""
        created, children = self.client.create_and_list(
            _paths.join(self.path, token or self.token),
            data,
            mode=CreateMode.EPHEMERAL_SEQUENTIAL,
            protected=True,
            parents=True,
        )
        entry = Entry(
            created.path,
            _paths.name_of(created.path),
            created.stat.czxid,
            created.stat.ephemeral_owner,
        )
        return entry, self.sort(children)

    def leave(self, entry: Entry) -> None:
        """Delete our node; if the connection fails, keep trying in the background."""
        self.client.delete(entry.path, guaranteed=True)

    def acquire(
        self,
        data: bytes,
        deadline: float | None,
        rule: Rule,
        *,
        token: str | None = None,
        head_shortcut: bool = True,
        on_enter: Callable[[Entry], None] | None = None,
        cancel: Cancellation | None = None,
    ) -> Entry | None:
        """Queue up and wait for our turn; None if ``deadline`` (monotonic) passed first.

        On timeout, cancellation or error our node is deleted. ``head_shortcut``:
        the rule is plain FIFO, so the head's deletion alone makes the second
        in line first (no re-read). ``cancel``: when set, give up as on a timeout.
        """
        entry: Entry | None = None
        try:
            entry, names = self.enter(data, token)
            if on_enter is not None:
                on_enter(entry)
            while True:
                if entry.session_id != self.client.session_id or entry.name not in names:
                    # Our session was lost while we waited: our node is gone.
                    self._forget(entry)
                    if _expired(deadline, cancel):
                        return None
                    log.info("node %s was lost with its session; queueing again", entry.path)
                    entry, names = self.enter(data, token)
                    if on_enter is not None:
                        on_enter(entry)
                    continue
                index = names.index(entry.name)
                waiting_for = rule(names, index)
                if waiting_for is None:
                    return entry
                if _expired(deadline, cancel):
                    self._forget(entry)
                    return None
                shortcut = head_shortcut and index == 1 and waiting_for == names[0]
                deleted = self._wait_for_delete(self.node_path(waiting_for), deadline, cancel)
                if deleted and shortcut and entry.session_id == self.client.session_id:
                    return entry
                names = self._relist(deadline, cancel)
        except BaseException:
            if entry is not None:
                self._forget(entry)
            raise

    def _wait_for_delete(
        self, path: str, deadline: float | None, cancel: Cancellation | None = None
    ) -> bool:
        """Wait until ``path`` is deleted (True) or something else happens (False)."""
        wake = _Wake()
        try:
            self.client.get_async(path, watch=wake).result(
                request_timeout(self.client.settings.connection_timeout, deadline)
            )
        except NoNodeError:
            return True
        except (ConnectionLostError, ZkTimeoutError):
            return False
        with (
            self.client.wake_on_close(wake.event),
            cancel.wakes(wake.event) if cancel is not None else contextlib.nullcontext(),
        ):
            wake.event.wait(remaining(deadline))
        return wake.deleted

    def _relist(self, deadline: float | None, cancel: Cancellation | None = None) -> list[str]:
        while True:
            try:
                return self.sort(
                    self.client.get_children_async(self.path).result(
                        request_timeout(self.client.settings.connection_timeout, deadline)
                    )
                )
            except NoNodeError:
                return []  # the container went with our node: our session was lost
            except SessionLost:
                continue
            except (ConnectionLostError, ZkTimeoutError):
                left = remaining(deadline)
                if (left is not None and left <= 0) or (cancel and cancel.is_set()):
                    return []  # the caller sees the deadline (or the cancellation) and gives up
                self.client.wait_connected(min(1.0, left) if left else 1.0)

    def _forget(self, entry: Entry) -> None:
        try:
            self.leave(entry)
        except Exception:
            log.warning("could not delete contender node %s", entry.path, exc_info=True)


def _expired(deadline: float | None, cancel: Cancellation | None = None) -> bool:
    return (cancel is not None and cancel.is_set()) or expired(deadline)
