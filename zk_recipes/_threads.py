"""Threads of our own: a serial executor and a named daemon thread.

kazoo runs state listeners on its one connection thread and watch callbacks
on one worker thread, so anything slow there stalls the whole client (kazoo
#381, #355). Everything zk-recipes calls back into user code, or into a
recipe's own slow path, runs here instead.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

log = logging.getLogger("zk_recipes.client")


def run_in_thread(name: str, fn: Callable[[], object]) -> threading.Thread:
    """Start ``fn`` on a daemon thread called ``name`` (daemon: it never holds up exit)."""
    thread = threading.Thread(target=fn, name=name, daemon=True)
    thread.start()
    return thread


class SerialExecutor:
    """Runs calls one at a time, in order, on a worker thread that exists only while busy.

    A call that raises is logged and the next one runs: one failing listener
    must not silence the others.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: collections.deque[Callable[[], object]] = collections.deque()
        self._lock = threading.Lock()
        self._running = False
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, fn: Callable[[], object]) -> None:
        with self._lock:
            self._queue.append(fn)
            if self._running:
                return
            self._running = True
            self._idle.clear()
        threading.Thread(target=self._drain, name=self._name, daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    self._idle.set()
                    return
                fn = self._queue.popleft()
            try:
                fn()
            except Exception:
                log.exception("error in %s", self._name)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far has run."""
        return self._idle.wait(timeout)


def join_unless_current(thread: threading.Thread | None, timeout: float) -> bool:
    """Join ``thread`` (up to ``timeout``) unless it is the calling thread; True if it ended.

    A recipe's own callbacks may close the recipe from its worker thread:
    joining itself would raise (and would wait forever if it could).
    """
    if thread is None or thread is threading.current_thread():
        return thread is None
    thread.join(timeout)
    return not thread.is_alive()
