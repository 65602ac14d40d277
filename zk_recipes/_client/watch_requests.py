"""A ZkClient's watches beyond the one-shot ``watch=`` of a read: persistent, catch-up, taken back.

Persistent watches (``add_watch``, kept by _client/persistent.py across
reconnects), the server's diff after a reconnect for an incremental cache
resync (``resumed_since``/``changed_since``, ``setWatches2``), and taking
one-shot watches back (``remove_data_watch``, ``forget_changed_since``).
A one-shot watch is refused where a persistent one is on the same path
(``_watched``): ZooKeeper 3.6-3.8 keep one watch mode per path.
"""

from __future__ import annotations

import contextlib

from zk_recipes import _paths
from zk_recipes._client.persistent import Established, PersistentWatch, PersistentWatches
from zk_recipes._client.session_view import SessionView
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    RecipeUsageError,
    WrongTypeError,
)
from zk_recipes._types import WatchCallback


class WatchRequests(SessionView):
    """The watch requests of ``ZkClient``: persistent watches, catch-up after a reconnect."""

    _persistent: PersistentWatches

    def add_watch(
        self,
        path: str,
        callback: WatchCallback,
        *,
        recursive: bool = True,
        on_established: Established | None = None,
    ) -> PersistentWatch:
        """A persistent watch on ``path``: every change, until ``remove()``, across reconnects.

        ``recursive=True`` (the default): CREATED, CHANGED and DELETED of
        ``path`` and of every node below it, at any depth (never CHILD).
        ``recursive=False``: ``path`` alone, CHILD (its children changed)
        included. The path need not exist yet. ``callback(WatchEvent)`` runs
        on kazoo's watch thread in the server's order and must be quick.

        The server drops watches with each connection and puts nothing back
        for what changed meanwhile: the client sends the watch again on every
        connection that comes up, then calls ``on_established(watch)``; from
        then on nothing is missed, and what changed before may have been, so
        re-read what you rely on there. ``UnsupportedFeatureError`` when the
        server has no persistent watches (older than 3.6, or running
        ``WatchManagerOptimized``). A one-shot ``watch=`` on exactly this path
        is refused while the watch lives (``RecipeUsageError``): ZooKeeper
        3.6-3.8 keep one watch mode per path and would turn this one into a
        one-shot watch, silently. Persistent watches of both modes on one path
        are fine: they share one server watch in the strongest mode needed
        (``zk_recipes._client.kazoo.watches``).
        """
        _paths.validate_path(path)
        if not callable(callback):
            raise WrongTypeError(f"add_watch(callback=) must be callable, got {callback!r}")
        return self._persistent.add(
            path, self._abs(path), callback, bool(recursive), on_established
        )

    @property
    def connection_generation(self) -> int:
        """How many connections came up so far (each reconnect adds one); 0 before the first."""
        conn = self._conn
        return conn.generation if conn is not None else 0

    def resumed_since(self, generation: int) -> int | None:
        """The newest zxid seen when connection ``generation`` ended, if its session lives on.

        For a cache's incremental resync (``changed_since``): every change up
        to that zxid reached this client on that connection. None when the
        session ended since, or ``generation`` is not the connection before
        one still remembered (the last 16).
        """
        conn = self._conn
        return conn.resumed_since(generation) if conn is not None else None

    def changed_since(
        self,
        zxid: int,
        data_paths: list[str],
        child_paths: list[str],
        on_child: WatchCallback,
    ) -> tuple[int, list[str]]:
        """Ask the server which of these nodes changed after ``zxid`` (``setWatches2``).

        For recipe authors keeping a cache under a persistent recursive watch
        that was put back on this connection before the call: the server
        answers each path whose node changed after ``zxid`` with a catch-up
        event (CHANGED or DELETED for ``data_paths``, reaching the persistent
        watch; CHILD for ``child_paths``, given to ``on_child``), all handed
        to their callbacks before this returns (run by then if marked inline,
        else on kazoo's watch thread soon after), and keeps a one-shot watch
        on the others, which fires
        once at their next change. Paths with a persistent watch of this
        client are left out (a one-shot watch there would replace it on
        ZooKeeper 3.6-3.8) and returned: read them yourself. Returns
        (requests sent, paths left out).
        """
        conn = self._usable()
        watched = self._persistent.server_paths()
        data: list[str] = []
        child: list[str] = []
        left_out: list[str] = []
        for paths, into in ((data_paths, data), (child_paths, child)):
            for path in paths:
                full = self._abs(path)
                if full in watched:
                    if path not in left_out:
                        left_out.append(path)
                else:
                    into.append(full)
        sent = conn.catch_up(zxid, data, child, on_child, self.settings.connection_timeout)
        return sent, left_out

    def forget_changed_since(self, data_paths: list[str], child_paths: list[str]) -> int:
        """Take back the one-shot watches ``changed_since`` left on nodes that did not change.

        Sent without waiting, where no other watcher of this client is on the
        path (a removal takes the server's one watch of the path); returns the
        requests sent. The connection they were left on must still be up.
        """
        return self._persistent.forget_one_shot(
            [self._abs(p) for p in data_paths], [self._abs(p) for p in child_paths]
        )

    def remove_data_watch(self, path: str, watch: WatchCallback) -> None:
        """Take back the one-shot watch ``get``/``exists(path, watch=watch)`` set: it will not fire.

        For code that stopped waiting (a lock waiter that timed out or was
        cancelled): the server would keep the watch until the node changes.
        Sent without waiting for the reply. The server keeps one data watch
        per path and connection, so other data watches of this client on
        ``path`` get a NONE event, as after a reconnect, and read again.
        Nothing is sent while a persistent watch is on ``path``.
        """
        full = self._abs(path)
        # Not connected: the server dropped the watch with the connection.
        with contextlib.suppress(ClientStateError, ConnectionLostError):
            self._usable().forget_data_watch(full, watch)

    def _watched(self, path: str, watch: WatchCallback | None) -> str:
        """``path`` made absolute, refused for a one-shot watch where a persistent one is."""
        full = self._abs(path)
        if watch is not None and self._persistent.on_path(full):
            raise RecipeUsageError(
                f"a one-shot watch on {path}, which has a persistent watch on this client: "
                "ZooKeeper 3.6-3.8 keep one watch mode per path and would turn the "
                "persistent watch into a one-shot one. Read without watch= and take the "
                "events from the persistent watch, or watch from another client"
            )
        return full
