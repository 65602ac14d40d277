"""A connection's watches beyond a read's one-shot watch: persistent, catch-up, taken back.

Persistent watches are routed to their watchers by the connection's
``PersistentRouter`` (watches.py), which also says what the server must
hold per path (``addWatch`` in the strongest mode any watcher needs,
narrowed or removed as watchers leave). ``catch_up`` asks the server what
changed since a zxid (``setWatches2``) for a cache's resync after a
reconnect; ``forget_one_shot`` and ``forget_data_watch`` take one-shot
watches back off the server and out of kazoo's tables.
"""

from __future__ import annotations

import logging

from kazoo.protocol.states import Callback, EventType, WatchedEvent

from zk_recipes._client.kazoo.pending import Pending
from zk_recipes._client.kazoo.records import HEADER_BYTES
from zk_recipes._client.kazoo.requests import TypedRequests
from zk_recipes._client.kazoo.watches import (
    CHILDREN,
    DATA,
    Fire,
    ForgetDataWatch,
    PersistentRouter,
    RemoveWatches,
    set_watches_batches,
)
from zk_recipes._types import WatchCallback

log = logging.getLogger("zk_recipes.client")

#: Paths per setWatches2 request, as the Java client batches them (ClientCnxn).
_SET_WATCHES_BYTES = 128 * 1024


class WatchOps(TypedRequests):
    """Persistent watches, the catch-up after a reconnect, one-shot watches taken back."""

    #: The persistent watchers of this connection; the client's registry puts them
    #: here, and back on the server after every reconnect.
    _router: PersistentRouter

    def route_watch(self, path: str, watch: WatchCallback, recursive: bool) -> Fire:
        """Route events on ``path`` to ``watch`` (``add_watch_async`` then tells the server)."""
        fire = self._watcher(watch)
        assert fire is not None
        self._router.add(path, fire, recursive)
        return fire

    def unroute_watch(self, path: str, fire: Fire, recursive: bool) -> bool:
        """Stop routing to ``fire``; True when no watcher of that mode is left on ``path``."""
        return self._router.remove(path, fire, recursive)

    def add_watch_async(self, path: str, recursive: bool) -> Pending[None]:
        """Send ``addWatch``: the server keeps the watch on this TCP connection.

        In the strongest mode any watcher of ``path`` needs (``watches.py``).
        """
        return self._call(self._router.adding(path, recursive), path, lambda r: None)

    def catch_up(
        self,
        relative_zxid: int,
        data: list[str],
        child: list[str],
        on_child: WatchCallback,
        timeout: float,
    ) -> int:
        """Have the server flag what changed since ``relative_zxid`` (``setWatches2``).

        Catch-up events for ``data`` (NodeDataChanged, NodeDeleted) reach the
        persistent watchers as any event does; those for ``child``
        (NodeChildrenChanged) go to ``on_child`` too while this runs. Every
        one has arrived when this returns: the server sends them before its
        reply. Returns the requests sent (128 KiB of paths each, as Java).
        """
        fire = self._watcher(on_child)
        assert fire is not None
        limit = min(_SET_WATCHES_BYTES, self._max_request - HEADER_BYTES - 64)
        batches = set_watches_batches(relative_zxid, data, child, limit)
        self._router.hear_children(fire, True)
        try:
            sent = [self._call(batch, "/", lambda r: None) for batch in batches]
            for pending in sent:
                pending.result(timeout)
        finally:
            self._router.hear_children(fire, False)
        return len(batches)

    def remove_persistent(self, path: str) -> Pending[None] | None:
        """The server's watch on ``path`` once a mode's last watcher left it (``unroute_watch``).

        Kept while recursive watchers stay; narrowed to PERSISTENT when only
        exact ones stay (``PersistentRouter.release``); else removed, sent as
        ``removeWatches`` of type ANY: the persistent types (4, 5) exist only
        from ZooKeeper 3.9, and a 3.6-3.8 server answers them with
        MarshallingError after logging an ERROR with a stack trace, once per
        connection. ANY also takes the path's one-shot watches, so it is not
        sent while kazoo holds one there; then the server keeps the watch and
        its events go to nobody until the connection ends. None when nothing
        is sent; NOWATCHER (already gone) is success.
        """
        request = self._router.release(path)
        kz = self._kz
        if isinstance(request, RemoveWatches) and (
            kz._data_watchers.get(path) or kz._child_watchers.get(path)
        ):
            log.debug("persistent watch on %s left on the server: other watches share it", path)
            return None
        if request is None:
            return None
        return self._call(request, path, lambda r: None)

    def forget_one_shot(self, path: str, children: bool) -> Pending[None] | None:
        """Take back a one-shot watch on ``path`` that no watcher of this client holds.

        For the watches a cache's catch-up (``catch_up``) left on nodes that did
        not change. Not sent where a persistent watch is on the path, or kazoo
        holds a one-shot watcher there (the server keeps one per path and
        connection); one kazoo registers meanwhile hears NONE, as on a
        reconnect, and reads again. None when nothing is sent.
        """
        kz = self._kz
        table = kz._child_watchers if children else kz._data_watchers
        if self._router.watches(path) or table.get(path):
            return None

        def then() -> None:  # on kazoo's connection thread (ForgetDataWatch)
            event = WatchedEvent(EventType.NONE, kz._state, path)
            for other in table.pop(path, None) or ():
                kz.handler.dispatch_callback(Callback("watch", other, (event,)))

        request = ForgetDataWatch(path, CHILDREN if children else DATA, then)
        return self._call(request, path, lambda r: None)

    def forget_data_watch(self, path: str, watch: WatchCallback) -> Pending[None] | None:
        """Take ``watch``'s one-shot data watch on ``path`` back: off the server and out of kazoo.

        For a waiter that stopped waiting (timed out, cancelled): its watch
        would otherwise stay on the server until the node changes, and its
        callback in kazoo's table until then. The server keeps one data watch
        per (connection, path), so other watchers kazoo holds for the path
        lose theirs too: they get a NONE event, as on a reconnect, and read
        again. Not sent where a persistent watch is on the path (a data
        removal would take half of it on 3.6-3.8). None when nothing is sent.
        """
        if self._router.watches(path):
            return None
        kz = self._kz

        def then() -> None:  # on kazoo's connection thread (ForgetDataWatch)
            watchers = kz._data_watchers.pop(path, None)
            others = [w for w in watchers or () if getattr(w, "__wrapped__", None) is not watch]
            if others:
                event = WatchedEvent(EventType.NONE, kz._state, path)
                for other in others:
                    kz.handler.dispatch_callback(Callback("watch", other, (event,)))

        return self._call(ForgetDataWatch(path, DATA, then), path, lambda r: None)
