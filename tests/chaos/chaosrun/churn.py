"""Watch churn: the parent rewrites nodes that every worker watches, all run long.

Why: a client that still hears the ensemble but is no longer heard by it (a
``drop_requests`` partition) keeps receiving watch notifications until the
server expires its session. A client that counts those notifications as signs
of life declares its simulated expiry late, after the server has handed its
lock to someone else. Without something to notify, that fault stays invisible,
so the run always has watches firing.

``ChurnWriter`` (parent) sets the churn nodes one after the other, one every
interval, from its own client and thread. ``ChurnWatch`` (worker) keeps a
one-shot data watch armed on each of them, re-arming it from a thread of its
own after every notification (and after kazoo drops all watches on a
disconnect), and records each CHANGED notification (event ``notified``) so
the checker can show that partitioned workers heard them.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Sequence

from zk_recipes import (
    NodeExistsError,
    Pending,
    WatchEvent,
    WatchEventType,
    ZkClient,
    ZkRecipesError,
    ZnodeStat,
)

#: How long the watch thread waits before re-arming a watch whose request failed.
_RETRY_PAUSE = 0.1


def create_churn_nodes(client: ZkClient, paths: Sequence[str]) -> None:
    for path in paths:
        with contextlib.suppress(NodeExistsError):
            client.create(path, b"0", parents=True)


class ChurnWriter:
    """Rewrites ``paths`` in turn, one every ``interval`` seconds, until ``stop()``.

    Writes that fail (the ensemble has no leader, the client reconnects) are
    counted and skipped: the next one is due at the next interval anyway.
    """

    def __init__(self, client: ZkClient, paths: Sequence[str], interval: float) -> None:
        self._client = client
        self._paths = tuple(paths)
        self._interval = interval
        self._stop = threading.Event()
        self.writes = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="chaos churn writer", daemon=True)

    def start(self) -> ChurnWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30.0)

    def _run(self) -> None:
        turn = 0
        next_due = time.monotonic()
        while True:
            next_due += self._interval
            # On schedule, not "interval after the last write": a write that hangs in a
            # leader election must not stretch the gaps the workers see afterwards.
            if self._stop.wait(max(0.0, next_due - time.monotonic())):
                return
            path = self._paths[turn % len(self._paths)]
            turn += 1
            try:
                self._client.set(path, str(turn).encode())
                self.writes += 1
            except ZkRecipesError:
                self.failures += 1
            next_due = max(next_due, time.monotonic() - self._interval)


class ChurnWatch:
    """Keeps a data watch armed on every churn node; ``on_notified(path)`` per notification.

    Watch callbacks run on kazoo's event thread, so they only record and hand
    the path to this object's thread, which sends the re-arming read without
    waiting for it. kazoo keeps one callback per path (each path has its own
    callable here), so a path armed twice still fires once.
    """

    def __init__(
        self, client: ZkClient, paths: Sequence[str], on_notified: Callable[[str], object]
    ) -> None:
        self._client = client
        self._on_notified = on_notified
        self._callbacks = {path: functools.partial(self._fired, path) for path in paths}
        self._todo: queue.SimpleQueue[tuple[str, float] | None] = queue.SimpleQueue()
        for path in paths:
            self._todo.put((path, 0.0))
        self._thread = threading.Thread(target=self._run, name="chaos churn watch", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._todo.put(None)
        self._thread.join(5.0)

    def _fired(self, path: str, event: WatchEvent) -> None:
        if event.type is WatchEventType.CHANGED:
            self._on_notified(path)
        # CHANGED, or NONE (kazoo dropped every watch on a disconnect): arm again.
        self._todo.put((path, 0.0))

    def _run(self) -> None:
        while (item := self._todo.get()) is not None:
            path, pause = item
            if pause:
                time.sleep(pause)
            try:
                pending = self._client.get_async(path, watch=self._callbacks[path])
            except ZkRecipesError:  # closed, or between sessions: try again shortly
                self._todo.put((path, _RETRY_PAUSE))
                continue
            pending.add_done_callback(functools.partial(self._armed, path))

    def _armed(self, path: str, pending: Pending[tuple[bytes, ZnodeStat]]) -> None:
        try:
            pending.result(0)
        except ZkRecipesError:  # the read failed, so no watch was set
            self._todo.put((path, _RETRY_PAUSE))
