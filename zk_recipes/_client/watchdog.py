"""One session watchdog thread for every client of the process.

Each client's ``SessionTracker`` must look at its session's silence on time:
when a sync is due to prove an idle session, and when the silence reaches
the simulated expiry (``session.py``). A thread per client that woke four
times a second did that at a cost that grew with the clients: at 1,000
idle clients in one process the wake-ups alone took more than a core, the
syncs' replies waited for the CPU, and 80 % of the sessions were declared
LOST (benchmarks/README.md, "Sessions"). Here one thread keeps every
tracker's next look in a heap, on the session clock, and wakes when the
earliest falls due, so a look costs the same with one client or a thousand
and an idle client is looked at only when something can be decided.

The thread never sleeps longer than ``LONGEST_SLEEP``: its sleep runs on
``time.monotonic()``, which a suspended machine's sleep stops, while the
looks fall due on the session clock (``CLOCK_BOOTTIME``), so a short sleep
bounds how late the looks come after a resume. A look is one tracker's turn
under its own lock; this module's lock is never held while a tracker's is
taken, so a tracker may ``poke`` (look at me now) from under its own. The
thread ends when no tracker is left and starts again with the next one; a
forked child starts afresh (the parent's thread does not exist there).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import logging
import math
import os
import threading
from typing import Protocol

from zk_recipes._deadline import session_clock
from zk_recipes._threads import failed_starts_to_report, retry_deferred, run_in_thread, say

log = logging.getLogger("zk_recipes.client")

#: The name of the watchdog's thread.
THREAD_NAME = "zk-recipes session watchdog"

#: The longest the watchdog thread sleeps (seconds): see the module note.
LONGEST_SLEEP = 0.25
#: How soon threads that could not start are tried again.
_RETRY_STARTS = 0.1
#: A step back of the session clock beyond this (seconds) makes every look due now.
_CLOCK_BACK = 0.5


class Watched(Protocol):
    """What the watchdog looks at: a client's ``SessionTracker``."""

    def look(self) -> float | None:
        """One turn: seconds until the next look, or None to be followed no more."""


class Watchdog:
    """The process's session watchdog: one thread, every tracker's next look in a heap."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        #: Each tracker's next look (session clock); math.inf while it is being looked at.
        self._due: dict[Watched, float] = {}
        self._heap: list[tuple[float, int, Watched]] = []
        self._order = itertools.count()  # ties in the heap: never compare trackers
        self._thread: threading.Thread | None = None
        self._retry_soon = False
        self._last_now = 0.0  # the session clock at the last look for due trackers

    def follow(self, tracker: Watched) -> None:
        """Look at ``tracker`` now and from now on (until its look says None or ``forget``).

        Raises ``RuntimeError`` if the thread is needed and cannot start.
        """
        with self._lock:
            self._schedule(tracker, 0.0)
            if self._thread is None:
                try:
                    self._thread = run_in_thread(THREAD_NAME, self._run)
                except RuntimeError:
                    self._due.pop(tracker, None)
                    raise
            self._wake.notify()

    def poke(self, tracker: Watched) -> None:
        """Look at ``tracker`` at once (its state changed); nothing if it is not followed."""
        with self._lock:
            if tracker in self._due:
                self._schedule(tracker, 0.0)
                self._wake.notify()

    def forget(self, tracker: Watched) -> threading.Thread | None:
        """Follow ``tracker`` no more; the thread to join if it ends for want of trackers."""
        with self._lock:
            self._due.pop(tracker, None)
            self._wake.notify()
            return self._thread if not self._due else None

    def _schedule(self, tracker: Watched, at: float) -> None:
        # Called with self._lock held. Entries left in the heap for an older time are skipped.
        self._due[tracker] = at
        heapq.heappush(self._heap, (at, next(self._order), tracker))

    def _due_now(self) -> list[Watched] | None:
        """The trackers whose look is due, after a sleep if none is; None: none left to follow."""
        with self._lock:
            if not self._due:
                self._thread = None  # the next follow() starts another
                self._heap.clear()
                return None
            due = self._pop_due()
            if due:
                return due
            sleep = LONGEST_SLEEP
            if self._heap:
                sleep = min(sleep, self._heap[0][0] - session_clock())
            if self._retry_soon:
                sleep = min(sleep, _RETRY_STARTS)
            self._wake.wait(max(sleep, 0.0))
            return self._pop_due()

    def _pop_due(self) -> list[Watched]:
        # Called with self._lock held.
        now = session_clock()
        if now < self._last_now - _CLOCK_BACK:
            # The clock went back (it never does on a real machine; a test that fakes a
            # suspend ends its fake): looks set by the old reading would come late.
            for tracker in self._due:
                if self._due[tracker] != math.inf:
                    self._schedule(tracker, now)
        self._last_now = now
        due: list[Watched] = []
        while self._heap and self._heap[0][0] <= now:
            at, _, tracker = heapq.heappop(self._heap)
            if self._due.get(tracker) == at:
                self._due[tracker] = math.inf  # being looked at: a poke moves it to 0
                due.append(tracker)
        return due

    def _run(self) -> None:
        while True:
            due = self._due_now()
            if due is None:
                return
            for tracker in due:
                try:
                    wait = tracker.look()
                except Exception as exc:  # a tracker's bug must not stop every client's watchdog
                    say(functools.partial(log.error, "the session watchdog's turn failed: %r", exc))
                    wait = 0.05
                with self._lock:
                    if self._due.get(tracker) != math.inf:
                        continue  # forgotten, or poked meanwhile (already due again)
                    if wait is None:
                        del self._due[tracker]
                    else:
                        self._schedule(tracker, session_clock() + wait)
            # Process-wide: threads that could not start (every client's listeners, ...).
            self._retry_soon = bool(retry_deferred())
            report = failed_starts_to_report()
            if report is not None:
                say(functools.partial(_report_failed_starts, *report))


def _report_failed_starts(count: int, last: str) -> None:
    log.error(
        "zk-recipes could not start threads (%d so far; last: %s): they are started again "
        "as soon as the system can; meanwhile listeners hear of no state change, but holds "
        "are judged from the session epoch, so a loss shows in check() and is_held() at once",
        count,
        last,
    )


#: The process's one watchdog (a forked child gets a new one: see ``_after_fork_in_child``).
watchdog = Watchdog()


def _after_fork_in_child() -> None:
    # The parent's thread does not exist here, and its lock may have been held at the fork.
    global watchdog
    watchdog = Watchdog()


os.register_at_fork(after_in_child=_after_fork_in_child)


def current() -> Watchdog:
    """The process's watchdog (read it each time: a fork replaces it)."""
    return watchdog
