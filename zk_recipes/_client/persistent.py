"""A client's persistent watches: on the server across reconnects and session expiry, until removed.

The server keeps a watch on one TCP connection, not on the session: a
reconnect, even to a resumed session, starts with none, and the server
re-adds persistent watches with no catch-up of what changed while we were
away (caches-queues-discovery note, section 2.4). So the registry here puts
each watch back with ``addWatch`` on every connection that comes up
(CONNECTED, RECONNECTED, READ_ONLY), as Curator's ``PersistentWatcher`` does,
and then calls its ``on_established``: from that moment every change reaches
the watch, and whatever happened before may have been missed, so a cache
re-reads what it holds then.

Watches of both modes on one path share one server watch, in the
strongest mode any of them needs (``zk_recipes._client.kazoo.watches``):
ZooKeeper 3.6-3.8 keep one mode per path and connection, and a plain
``addWatch`` would silently narrow a recursive one. Each ``addWatch`` and
``removeWatches`` is decided and sent under the registry's lock, so the
server takes them in the order they were decided: two threads adding and
removing watches of one path cannot leave it in a mode nobody chose.

A server without persistent watches (older than 3.6, or running
``WatchManagerOptimized``) refuses ``addWatch``: ``add()`` raises
``UnsupportedFeatureError`` and keeps nothing, and a cache falls back to
one-shot watches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol, final

from zk_recipes._client.kazoo import KazooConnection
from zk_recipes._client.kazoo.watches import Fire
from zk_recipes._client.states import ConnectionState, StateChange, StateListener
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    SessionLost,
    UnsupportedFeatureError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._settings import ClientSettings
from zk_recipes._types import WatchCallback

log = logging.getLogger("zk_recipes.client")

#: What a watch calls once it is on the server of a new connection.
Established = Callable[["PersistentWatch"], object]


@final
class PersistentWatch:
    """One persistent watch of a ``ZkClient`` (``ZkClient.add_watch``); ``remove()`` ends it.

    ``recursive``: the whole subtree (CREATED, CHANGED, DELETED of ``path``
    and of every node below it, never CHILD) or ``path`` alone (its CREATED,
    CHANGED, DELETED and CHILD). Events come on kazoo's watch thread, in the
    order the server sent them; a callback must be quick (hand the event to
    a queue of your own).
    """

    def __init__(
        self,
        registry: PersistentWatches,
        path: str,
        server_path: str,
        callback: WatchCallback,
        recursive: bool,
        on_established: Established | None,
    ) -> None:
        self.path = path
        self.recursive = recursive
        self._registry = registry
        self._server_path = server_path
        self._callback = callback
        self._on_established = on_established
        #: The connection it is routed on, and its watcher there.
        self._routed: tuple[KazooConnection, Fire] | None = None
        #: How many times the server took it (once per connection that came up).
        self.establishments = 0
        #: The client's state seq when it was last sent to the server.
        self._seq = -1
        #: The connection (``ZkClient.connection_generation``) it was last sent on, or
        #: an earlier one: read before the send.
        self.generation = 0
        #: Set once the first addWatch was answered (taken or refused), or the watch removed.
        self._settled = threading.Event()
        self._removed = False

    @property
    def removed(self) -> bool:
        return self._removed

    def remove(self) -> None:
        """Stop the watch: no event after this returns, and the server forgets it. Idempotent."""
        self._registry.remove(self)

    def __repr__(self) -> str:
        mode = "recursive" if self.recursive else "persistent"
        state = "removed" if self._removed else f"established {self.establishments}x"
        return f"<PersistentWatch {self.path} {mode}, {state}>"


class _Client(Protocol):
    """What the registry needs of its ``ZkClient``."""

    settings: ClientSettings

    def _usable(self) -> KazooConnection: ...

    def add_listener(self, listener: StateListener) -> None: ...

    def state_snapshot(self) -> tuple[int, ConnectionState | None]: ...


class PersistentWatches:
    """The registry of one ``ZkClient``: every watch, put back on each new connection."""

    def __init__(self, client: _Client) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._watches: list[PersistentWatch] = []
        client.add_listener(self._on_state)

    def add(
        self,
        path: str,
        server_path: str,
        callback: WatchCallback,
        recursive: bool,
        on_established: Established | None,
    ) -> PersistentWatch:
        watch = PersistentWatch(self, path, server_path, callback, recursive, on_established)
        conn = self._client._usable()
        with self._lock:
            self._watches.append(watch)
        try:
            self._establish(watch, conn)
        except UnsupportedFeatureError:
            self._unroute(watch)
            raise
        except (ConnectionLostError, ZkTimeoutError, SessionLost):
            # Kept: the next connection that comes up puts it on the server.
            log.debug("persistent watch on %s: not on the server yet", path, exc_info=True)
        finally:
            watch._settled.set()
        return watch

    def remove(self, watch: PersistentWatch) -> None:
        routed = self._forget(watch)
        if routed is None:
            return
        conn, fire = routed
        try:
            with self._lock:  # decided and sent in order with the adds (the module note)
                if not conn.unroute_watch(watch._server_path, fire, watch.recursive):
                    return  # another watch of ours has the same path and mode: the server's stays
                conn.remove_persistent(watch._server_path)
        except ZkRecipesError as exc:
            # Not connected, say: the server dropped it with the connection. Not
            # waited for: the reply changes nothing here, and close() must not
            # wait on a connection that is down.
            log.debug("removing the persistent watch on %s: %s", watch.path, exc)

    def forget_one_shot(self, data_paths: list[str], child_paths: list[str]) -> int:
        """Take back one-shot watches no watcher of this client holds.

        (``KazooConnection.forget_one_shot`` says which.) Decided and sent
        under the lock, so that no persistent watch added meanwhile on one of
        the paths is taken with it. Not waited for. Returns the requests sent.
        """
        sent = 0
        try:
            conn = self._client._usable()
            with self._lock:
                for paths, children in ((data_paths, False), (child_paths, True)):
                    for path in paths:
                        if conn.forget_one_shot(path, children) is not None:
                            sent += 1
        except ZkRecipesError as exc:  # the connection went, and its watches with it
            log.debug("taking back one-shot watches: %s", exc)
        return sent

    def on_path(self, server_path: str) -> bool:
        """Whether a watch of ours is on exactly ``server_path`` (of either mode).

        A watch whose first ``addWatch`` is still unanswered is waited for
        (up to the connection timeout): a server that refuses it (no persistent
        watches) leaves the path free for one-shot watches.
        """
        if not self._watches:  # every get/exists with a watch asks: the usual answer, at once
            return False
        with self._lock:
            found = [w for w in self._watches if w._server_path == server_path]
        for watch in found:
            watch._settled.wait(self._client.settings.connection_timeout)
        return any(not w._removed for w in found)

    def server_paths(self) -> set[str]:
        """The server paths of every watch kept."""
        with self._lock:
            return {w._server_path for w in self._watches}

    def _forget(self, watch: PersistentWatch) -> tuple[KazooConnection, Fire] | None:
        with self._lock:
            if watch._removed:
                return None
            watch._removed = True
            watch._settled.set()
            self._watches = [w for w in self._watches if w is not watch]
            routed, watch._routed = watch._routed, None
        return routed

    def _unroute(self, watch: PersistentWatch) -> None:
        """Forget a watch the server refused: nothing to take off the server."""
        routed = self._forget(watch)
        if routed is not None:
            with self._lock:
                routed[0].unroute_watch(watch._server_path, routed[1], watch.recursive)

    def _establish(self, watch: PersistentWatch, conn: KazooConnection) -> None:
        """Route ``watch`` on ``conn`` and have the server take it; then ``on_established``."""
        with self._lock:
            if watch._removed:
                return
            routed = watch._routed
            if routed is None or routed[0] is not conn:
                fire = conn.route_watch(watch._server_path, watch._callback, watch.recursive)
                watch._routed = (conn, fire)
            watch._seq = self._client.state_snapshot()[0]
            watch.generation = conn.generation
            # Sent under the lock, in the mode the path needs now (the module note).
            pending = conn.add_watch_async(watch._server_path, watch.recursive)
        pending.result(self._client.settings.connection_timeout)
        watch.establishments += 1
        if watch._on_established is not None and not watch._removed:
            try:
                watch._on_established(watch)
            except Exception:
                log.exception("error in on_established of %r", watch)

    def _on_state(self, change: StateChange) -> None:
        # On the client's listener thread: a connection came up with no watches of ours.
        if not change.state.is_connected:  # a connection that takes requests came up
            return
        with self._lock:
            watches = list(self._watches)
        if not watches:
            return
        try:
            conn = self._client._usable()
        except ClientStateError:
            return
        for watch in watches:
            routed = watch._routed
            if routed is not None and routed[0] is conn and watch._seq >= change.seq:
                continue  # sent while this connection was up already (add() raced us here)
            try:
                self._establish(watch, conn)
            except UnsupportedFeatureError as exc:
                # The ensemble changed under us (a server without them): say so once per watch.
                log.error("persistent watch on %s refused by the server: %s", watch.path, exc)
                self._unroute(watch)
            except ZkRecipesError as exc:
                log.debug(
                    "persistent watch on %s: the next connection retries (%s)", watch.path, exc
                )
