"""Threads of our own: a serial executor, a named daemon thread, and the log writer.

kazoo runs state listeners on its one connection thread and watch callbacks
on one worker thread, so anything slow there stalls the whole client (kazoo
#381, #355). Everything zk-recipes calls back into user code, or into a
recipe's own slow path, runs here instead.

**Decide first, talk later.** A log call can block for as long as its
handler's stream does (a full pipe to a stalled log shipper, a syslog socket,
a hung NFS mount), and such stalls come with the very network faults our
decisions are about. So the decision paths (the session watchdog, kazoo's
state hook) never log themselves: they hand the record to ``say()``, which
the log writer thread emits in order, and a stalled stream delays only the
writer. Applications whose handlers write to blocking streams should still
put them behind a ``logging.handlers.QueueHandler`` (docs/operations.md).

**A thread that cannot start is not lost work.** Under thread or memory
exhaustion ``Thread.start()`` raises; a listener's executor that swallowed
that would be deaf for good, and a watchdog that died of it would never
declare LOST again. ``start_or_defer`` keeps such a start and
``retry_deferred()`` tries it again: every client's session watchdog, a
thread that already runs, calls it on each turn.
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


_deferred: list[tuple[str, Callable[[], object]]] = []
_deferred_lock = threading.Lock()
#: Starts put off so far, and the last one's name and error (for the watchdog's report).
_failed_count = 0
_failed_last = ""
_failed_reported = 0


def start_or_defer(name: str, fn: Callable[[], object]) -> bool:
    """Start ``fn`` on a daemon thread; if none can be started now, keep it for later.

    True if it started. Never raises for a thread that cannot start (and never
    logs: it may run on a decision path): ``retry_deferred()`` starts it once
    the system can, and ``failed_starts()`` tells how many were put off.
    """
    global _failed_count, _failed_last
    try:
        run_in_thread(name, fn)
    except RuntimeError as exc:  # "can't start new thread": thread or memory exhaustion
        with _deferred_lock:
            _deferred.append((name, fn))
            _failed_count += 1
            _failed_last = f"{name}: {exc}"
        return False
    return True


def retry_deferred() -> int:
    """Start the threads ``start_or_defer`` put off, in order; how many still could not."""
    with _deferred_lock:
        todo = list(_deferred)
        _deferred.clear()
    left = 0
    for position, (name, fn) in enumerate(todo):
        try:
            run_in_thread(name, fn)
        except RuntimeError:
            with _deferred_lock:
                _deferred[:0] = todo[position:]  # keep their order, ahead of newer ones
            left = len(todo) - position
            break
    return left


def failed_starts_to_report() -> tuple[int, str] | None:
    """(starts put off so far, the last one's name and error) once per new failure, else None.

    Several clients' watchdogs ask; each failure is reported by one of them.
    """
    global _failed_reported
    with _deferred_lock:
        if _failed_count == _failed_reported:
            return None
        _failed_reported = _failed_count
        return _failed_count, _failed_last


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
        """Queue ``fn``; never blocks, and never raises when no thread can start now.

        ``running`` is set only with a drain on its way: started now, or put off
        by ``start_or_defer`` and started by ``retry_deferred()``.
        """
        with self._lock:
            self._queue.append(fn)
            if self._running:
                return
            self._running = True
            self._idle.clear()
        start_or_defer(self._name, self._drain)

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


#: Emits the log records that decision paths hand over (``say``), in order.
_LOG_WRITER = SerialExecutor("zk-recipes log writer")


def say(emit: Callable[[], object]) -> None:
    """Run ``emit`` (a logging call) on the log writer thread: the caller never waits for it."""
    _LOG_WRITER.submit(emit)


def said(timeout: float | None = None) -> bool:
    """Wait until every record handed to ``say`` so far has been emitted (tests, shutdown)."""
    return _LOG_WRITER.wait_idle(timeout)


def join_unless_current(thread: threading.Thread | None, timeout: float) -> bool:
    """Join ``thread`` (up to ``timeout``) unless it is the calling thread; True if it ended.

    A recipe's own callbacks may close the recipe from its worker thread:
    joining itself would raise (and would wait forever if it could).
    """
    if thread is None or thread is threading.current_thread():
        return thread is None
    thread.join(timeout)
    return not thread.is_alive()
