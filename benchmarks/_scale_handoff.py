"""Lock hand-off as the queue grows: L waiters behind a holder, one release at a time.

The contenders are either threads of this process (spread over clients so that
consecutive contenders never share one: contender i uses client i % K) or
spawned worker processes with one contender and one client each. They queue one
by one, so their order is known; each step then runs:

1. the holder releases (the time is taken just before ``release()``);
2. the next waiter's ``acquire()`` returns (the time is taken at once): the
   difference is the hand-off;
3. after a short settle, the server's packets over the step (less the ``mntr``
   read and our clients' pings) are its requests, and the watch notifications
   all clients received (counted client-side) are its notifications;
4. the contender that released queues again at the tail, and the step ends
   once the server reports L watches set: every release finds L waiters.

kazoo's ``Lock`` and ours run the same steps on the same server, alternating
which goes first from one queue length to the next.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from _common import (
    Counter,
    Target,
    WorkerPool,
    count_pings,
    count_watch_events,
    latency_summary,
    median,
    progress,
    ratio,
)
from locks import acquire_bounded, kazoo_of, lock_location, make_lock, open_client

IMPLS = ("kazoo_lock", "ours")
#: Threads mode: at most this many clients; a client carries up to 50 contenders (as locks.py).
MAX_CLIENTS = 20
#: Long sessions ping rarely: a step's window should seldom hold a ping (see ``trial``).
SESSION_TIMEOUT_S = 30.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Contender:
    """One lock object, driven from outside: ``acquire`` (in its own thread) and ``release``."""

    def __init__(
        self,
        lock: Any,
        limit_s: float,
        on_acquired: Callable[[int], None],
        stopping: threading.Event,
    ) -> None:
        self.lock = lock
        self.limit_s = limit_s
        self.on_acquired = on_acquired
        self.stopping = stopping
        self.thread: threading.Thread | None = None

    def acquire(self) -> None:
        self.thread = threading.Thread(target=self._acquire, daemon=True)
        self.thread.start()

    def _acquire(self) -> None:
        try:
            got = acquire_bounded(self.lock, self.limit_s)
        except Exception:
            traceback.print_exc()
            got = False
        stamp = time.monotonic_ns()
        if self.stopping.is_set():  # the queue drains: pass the lock on, report nothing
            if got:
                self.lock.release()
            return
        self.on_acquired(stamp if got else -1)

    def release(self) -> int:
        stamp = time.monotonic_ns()
        self.lock.release()
        return stamp

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)


class Fleet(Protocol):
    def acquire(self, index: int) -> None: ...
    def release(self, index: int) -> int: ...
    def acquired(self, index: int, timeout: float) -> int: ...
    def ask_stats(self) -> None: ...
    def stats(self) -> tuple[int, int]: ...
    def close(self, holder: int) -> None: ...


class ThreadFleet:
    """``count`` contenders as threads of this process, on min(count, MAX_CLIENTS) clients."""

    def __init__(self, impl: str, target: Target, path: str, namespace: str, count: int) -> None:
        self.stack = contextlib.ExitStack()
        self.stopping = threading.Event()
        self.pings: list[Counter] = []
        self.events: list[Counter] = []
        clients = []
        for _ in range(min(count, MAX_CLIENTS)):
            client = self.stack.enter_context(
                open_client(impl, target.hosts, namespace, SESSION_TIMEOUT_S)
            )
            self.pings.append(count_pings(kazoo_of(client)))
            self.events.append(count_watch_events(kazoo_of(client)))
            clients.append(client)
        self.replies: list[queue.SimpleQueue[int]] = [queue.SimpleQueue() for _ in range(count)]
        limit = 120.0 + count * 0.1
        self.contenders = [
            Contender(
                make_lock(impl, clients[i % len(clients)], path),
                limit,
                self.replies[i].put,
                self.stopping,
            )
            for i in range(count)
        ]

    def acquire(self, index: int) -> None:
        self.contenders[index].acquire()

    def release(self, index: int) -> int:
        return self.contenders[index].release()

    def acquired(self, index: int, timeout: float) -> int:
        return self.replies[index].get(timeout=timeout)

    def stats(self) -> tuple[int, int]:
        return sum(c.value for c in self.pings), sum(c.value for c in self.events)

    def ask_stats(self) -> None:
        pass

    def close(self, holder: int) -> None:
        # Drain before any client closes: a waiter blocked in acquire() does not wake when
        # another thread closes its client. Each one passes the lock on as it gets it.
        self.stopping.set()
        self.contenders[holder].release()
        deadline = time.monotonic() + 60.0 + len(self.contenders) * 0.05
        for contender in self.contenders:
            contender.join(max(0.0, deadline - time.monotonic()))
        self.stack.close()


# -- processes --------------------------------------------------------------------------------


def handoff_worker(conn: Any) -> None:
    """A spawned process: one contender on one client per "open", until "exit" or EOF."""
    logging.basicConfig(level=logging.ERROR)
    sending = threading.Lock()

    def send(message: tuple[str, Any]) -> None:
        with sending:
            conn.send(message)

    stack = contextlib.ExitStack()
    stopping = threading.Event()
    contender: Contender | None = None
    pings = events = Counter()
    while True:
        try:
            tag, spec = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if tag == "exit":
                stack.close()
                return
            if tag == "open":
                stopping.clear()
                client = stack.enter_context(
                    open_client(spec["impl"], spec["hosts"], spec["namespace"], SESSION_TIMEOUT_S)
                )
                pings, events = count_pings(kazoo_of(client)), count_watch_events(kazoo_of(client))
                lock = make_lock(spec["impl"], client, spec["path"])
                contender = Contender(
                    lock, spec["limit_s"], lambda ns: send(("acquired", ns)), stopping
                )
                send(("opened", rss_bytes()))
            elif tag == "acquire" and contender is not None:
                contender.acquire()
            elif tag == "release" and contender is not None:
                send(("released", contender.release()))
            elif tag == "stats":
                send(("stats", (pings.value, events.value)))
            elif tag == "drain":
                stopping.set()
                send(("draining", None))
            elif tag == "close":
                if contender is not None:
                    contender.join(spec["limit_s"])
                stack.close()
                contender = None
                send(("closed", None))
        except Exception:
            send(("error", traceback.format_exc()))


class ProcessFleet:
    """``count`` contenders, each a worker process of ``pool`` with a client of its own."""

    def __init__(
        self, pool: WorkerPool, impl: str, target: Target, path: str, namespace: str, count: int
    ) -> None:
        self.pool = pool
        self.workers = list(range(count))
        self.limit_s = 120.0 + count * 0.1
        spec = {
            "impl": impl,
            "hosts": target.hosts,
            "namespace": namespace,
            "path": path,
            "limit_s": self.limit_s,
        }
        pool.send(self.workers, ("open", spec))
        self.worker_rss = pool.gather(self.workers, "opened", 60.0 + count)

    def acquire(self, index: int) -> None:
        self.pool.send([index], ("acquire", None))

    def release(self, index: int) -> int:
        self.pool.send([index], ("release", None))
        stamp: int = self.pool.gather([index], "released", 30.0)[0]
        return stamp

    def acquired(self, index: int, timeout: float) -> int:
        stamp: int = self.pool.gather([index], "acquired", timeout)[0]
        return stamp

    def ask_stats(self) -> None:
        """Ask every worker for its counts now (``stats`` collects the answers)."""
        self.pool.send(self.workers, ("stats", None))

    def stats(self) -> tuple[int, int]:
        pairs = self.pool.gather(self.workers, "stats", 30.0)
        return sum(p for p, _ in pairs), sum(e for _, e in pairs)

    def close(self, holder: int) -> None:
        self.pool.send(self.workers, ("drain", None))
        self.pool.gather(self.workers, "draining", 30.0)
        self.release(holder)
        self.pool.send(self.workers, ("close", {"limit_s": self.limit_s}))
        self.pool.gather(self.workers, "closed", self.limit_s + 30.0)


# -- one trial: L waiters, a number of steps ---------------------------------------------------


def _wait_until(condition: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout:g} s")
        time.sleep(0.002)


def _watches_at_least(target: Target, count: int) -> bool:
    return target.watch_count() >= count


def trial(
    fleet: Fleet,
    target: Target,
    waiters: int,
    steps: int,
    settle_s: float,
    admin_pings: Callable[[], int],
) -> dict[str, Any]:
    """Queue ``waiters`` behind contender 0, then ``steps`` measured hand-offs."""
    fleet.acquire(0)
    if fleet.acquired(0, 60.0) < 0:
        raise RuntimeError("the first holder could not take the lock")
    base = target.watch_count()
    began = time.monotonic()
    line: collections.deque[int] = collections.deque()
    for index in range(1, waiters + 1):
        fleet.acquire(index)
        _wait_until(functools.partial(_watches_at_least, target, base + index), "queued", 60.0)
        line.append(index)
    queue_build_s = time.monotonic() - began
    holder = 0
    handoffs: list[int] = []
    raw: list[int] = []
    upkeep: list[int] = []
    notifications: list[int] = []
    try:
        for _ in range(steps):
            following = line.popleft()
            # The counts are asked for while the server's packets are read, so that the two
            # windows nearly match (a worker answers in the meantime).
            fleet.ask_stats()
            own = admin_pings()
            before = target.packets()
            pings, events = fleet.stats()
            released = fleet.release(holder)
            acquired = fleet.acquired(following, 60.0)
            time.sleep(settle_s)
            fleet.ask_stats()
            after = target.packets()
            pings_after, events_after = fleet.stats()
            if acquired < 0:
                raise RuntimeError(f"waiter {following} timed out")
            handoffs.append(acquired - released)
            upkeep.append(pings_after - pings + admin_pings() - own)
            raw.append(after - before - target.mntr_overhead)
            notifications.append(events_after - events)
            fleet.acquire(holder)  # to the tail: the next release finds L waiters again
            _wait_until(lambda: target.watch_count() >= base + waiters, "the queue refilled", 60.0)
            line.append(holder)
            holder = following
    finally:
        fleet.close(holder)
    # A ping can fall between the packet reads and the count reads (or the other way round),
    # more often the more clients there are: the steps without any ping are exact.
    clean = [float(r) for r, u in zip(raw, upkeep, strict=True) if u == 0]
    corrected = [float(r - u) for r, u in zip(raw, upkeep, strict=True)]
    return {
        "waiters": waiters,
        "steps": len(handoffs),
        "handoff": latency_summary(handoffs),
        "requests_per_handoff": round(median(clean if len(clean) >= 3 else corrected), 2),
        "requests_per_handoff_steps_without_pings": len(clean),
        "requests_per_handoff_corrected_mean": round(sum(corrected) / len(corrected), 3),
        "notifications_per_release": round(sum(notifications) / len(notifications), 3),
        "notifications_per_release_min_max": [min(notifications), max(notifications)],
        "queue_build_s": round(queue_build_s, 2),
    }


def _summary(by_impl: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ours, kazoo = by_impl["ours"], by_impl["kazoo_lock"]
    return {
        **by_impl,
        "ratios": {
            "ours_over_kazoo_lock_p50": ratio(
                ours["handoff"]["p50_ms"], kazoo["handoff"]["p50_ms"]
            ),
            "ours_over_kazoo_lock_p90": ratio(
                ours["handoff"]["p90_ms"], kazoo["handoff"]["p90_ms"]
            ),
            "ours_over_kazoo_lock_requests": ratio(
                ours["requests_per_handoff"], kazoo["requests_per_handoff"]
            ),
        },
    }


def run_threads(
    target: Target,
    counts: Sequence[int],
    steps: int,
    settle_s: float,
    admin_pings: Callable[[], int],
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for index, waiters in enumerate(counts):
        by_impl: dict[str, dict[str, Any]] = {}
        for impl in IMPLS if index % 2 == 0 else IMPLS[::-1]:
            progress(f"handoff, threads: {waiters} waiters, {impl}")
            namespace, path = lock_location(target.root, impl, f"/handoff-threads/w{waiters}")
            fleet = ThreadFleet(impl, target, path, namespace, waiters + 1)
            by_impl[impl] = trial(fleet, target, waiters, steps, settle_s, admin_pings)
            by_impl[impl]["clients"] = min(waiters + 1, MAX_CLIENTS)
        results[str(waiters)] = _summary(by_impl)
    return {"contenders_are": "threads of one process", "waiters": results}


def run_processes(
    target: Target,
    counts: Sequence[int],
    steps: int,
    settle_s: float,
    admin_pings: Callable[[], int],
) -> dict[str, Any]:
    results: dict[str, Any] = {}
    workers = max(counts) + 1
    progress(f"handoff, processes: spawning {workers} worker processes")
    began = time.monotonic()
    worker_rss: list[int] = []
    with WorkerPool(workers, handoff_worker) as pool:
        everyone = list(range(workers))
        pool.send(everyone, ("stats", None))  # answered once each has started and imported
        pool.gather(everyone, "stats", 120.0 + workers)
        spawn_s = time.monotonic() - began
        for index, waiters in enumerate(counts):
            by_impl: dict[str, dict[str, Any]] = {}
            for impl in IMPLS if index % 2 == 0 else IMPLS[::-1]:
                progress(f"handoff, processes: {waiters} waiters, {impl}")
                namespace, path = lock_location(target.root, impl, f"/handoff-procs/w{waiters}")
                fleet = ProcessFleet(pool, impl, target, path, namespace, waiters + 1)
                worker_rss += fleet.worker_rss
                by_impl[impl] = trial(fleet, target, waiters, steps, settle_s, admin_pings)
                by_impl[impl]["processes"] = waiters + 1
            results[str(waiters)] = _summary(by_impl)
    return {
        "contenders_are": "spawned processes, one contender and one client each",
        "waiters": results,
        "workers_spawned": workers,
        "spawn_s": round(spawn_s, 1),
        "worker_rss_mb_median": round(median([float(r) for r in worker_rss]) / 2**20, 1),
    }
