"""Putting an item exactly once: the item and a marker of the producer in one multi.

An item is a sequential node: a create whose reply was lost cannot be sent
again blindly (a second node, the item twice: review 3, Q4), and its name
cannot carry Curator's protected ``_c_<uuid>-`` prefix either (a Curator
consumer takes only ``queue-``/``qn-`` names). So a put is one ``multi``:
the item, a protected *ephemeral* marker of this producer under
``<path>-puts``, and the delete of the producer's previous marker. A lost
reply is answered by the marker (the transaction's own recovery): found, the
item was put; not found, nothing was, and the multi is sent again once. One
request per put, and at most one marker per producer, which goes with its
session. When the session itself ended while the reply was awaited, the
marker went with it: ``TransactionOutcomeUnknown``, never a guess.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.creates import CreateResult
from zk_recipes._errors import (
    ConnectionLostError,
    NoNodeError,
    TransactionFailedError,
    ZkRecipesError,
)
from zk_recipes._types import CreateMode


class Putter:
    """One producer's puts into the directory ``path`` (see the module note)."""

    def __init__(self, client: ZkClient, path: str, make_dir: Callable[[], None]) -> None:
        self.client = client
        self.path = path
        self._make_dir = make_dir
        self._marker_dir = path + "-puts"
        self._marker: tuple[str, int] | None = None  # (path, session) of our last marker
        self._lock = threading.Lock()

    def put(self, data: bytes, prefix: str) -> str:
        """Put one node ``<path>/<prefix><seq10>`` holding ``data``; its path.

        After a lost reply resolved by the marker, the item is found by the
        zxid it shares with the marker; if it was consumed already, its name
        cannot be known and the queue's path is returned.
        """
        client = self.client
        with self._lock:
            # Each retry below fixes one missing thing (a directory reaped, a marker gone).
            for _attempt in range(5):
                tx = client.transaction()
                tx.create(
                    _paths.join(self.path, prefix), data, mode=CreateMode.PERSISTENT_SEQUENTIAL
                )
                tx.create(
                    _paths.join(self._marker_dir, "put"), mode=CreateMode.EPHEMERAL, protected=True
                )
                previous = self._marker
                if previous is not None and previous[1] == client.session_id:
                    tx.delete(previous[0])
                try:
                    results = tx.commit(stats=False)  # the paths are all a put needs
                except TransactionFailedError as exc:
                    if not isinstance(exc.cause, NoNodeError):
                        raise
                    if exc.index == 1:  # the markers' directory was reaped: made again
                        client.retry(lambda: client.ensure_path(self._marker_dir))
                    elif exc.index == 2:  # our last marker went with its session
                        self._marker = None
                    else:  # the queue's directory was deleted: made again
                        self._make_dir()
                    continue
                marker, item = _path_of(results[1]), _path_of(results[0])
                self._marker = (marker, client.session_id) if marker is not None else None
                if item is None and isinstance(results[1], CreateResult):
                    # Recovered after a lost reply: the marker's stat, not the item's name.
                    item = self._find(prefix, results[1].stat.czxid)
                return item if item is not None else self.path
        raise ConnectionLostError(f"could not put an item into {self.path}; try again")

    def _find(self, prefix: str, czxid: int) -> str | None:
        """The item a recovered put made: the one made with its marker, at the same zxid.

        Looked for newest first, a few at a time, down to the first item older
        than that zxid. None when it was consumed already (its name is then not
        known: the queue's path is returned instead).
        """
        client = self.client
        names = [n for n in client.get_children(self.path) if n.startswith(prefix)]
        names.sort(key=lambda name: name[-10:], reverse=True)
        for start in range(0, len(names), 16):
            chunk = [_paths.join(self.path, name) for name in names[start : start + 16]]
            stats = [(path, client.exists_async(path)) for path in chunk]
            older = False
            for path, pending in stats:
                stat = pending.result(client.settings.connection_timeout)
                if stat is not None and stat.czxid == czxid:
                    return path
                older = older or (stat is not None and stat.czxid < czxid)
            if older:
                return None
        return None

    def close(self) -> None:
        """Delete our marker (ephemeral: if this fails, it goes with the session)."""
        marker, self._marker = self._marker, None
        if marker is not None:
            with contextlib.suppress(ZkRecipesError):
                self.client.delete(marker[0])


def _path_of(result: object) -> str | None:
    """A create's path from a transaction's result (a str, or a CreateResult when recovered)."""
    if isinstance(result, str):
        return result
    if isinstance(result, CreateResult):
        return result.path
    return None
