"""Queue throughput as consumers are added: a fixed set of producers, 1 to 16 consumers.

Producers and consumers are threads of this process, each with a client of its
own (as queues.py's 4 x 4). The clients connect and the consumers start on an
empty queue first; then the producers put their share of the items at once,
and the run ends when the consumers have taken them all. Items/s is items over
the time from the first put to the last take; requests per item are the
server's packets over that time (less the ``mntr`` read and our clients'
pings) per item. ``producers_done_s`` says when the last put returned: a run
whose last take comes long after it was limited by its consumers.

- ``ours``: our DistributedQueue without a lock path (at-most-once);
- ``ours_locked``: ours with a lock path (lock-safe);
- ``kazoo``: kazoo's ``Queue``; its consumer polls ``get()`` every 5 ms when empty;
- ``kazoo_locking``: kazoo's ``LockingQueue``, ``get(0.2)`` + ``consume()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from _common import Counter, Target, count_pings, progress, ratio
from kazoo.client import KazooClient

from zk_recipes import DistributedQueue, ItemContext, ZkClient

IMPLS = ("ours", "ours_locked", "kazoo", "kazoo_locking")
ITEM = b"0123456789abcdef"
#: A run that has not taken every item by then stops and says how many it took.
CAP_S = 240.0


class _Tally:
    def __init__(self, items: int) -> None:
        self.items = items
        self.taken = 0
        self.lock = threading.Lock()
        self.done = threading.Event()

    def take(self) -> None:
        with self.lock:
            self.taken += 1
            if self.taken >= self.items:
                self.done.set()

    def finished(self) -> bool:
        with self.lock:
            return self.taken >= self.items


def _produce(put: Callable[[bytes], object], count: int) -> threading.Thread:
    def work() -> None:
        for _ in range(count):
            put(ITEM)

    return threading.Thread(target=work)


def _measure(
    target: Target,
    pings: list[Counter],
    producers: list[threading.Thread],
    tally: _Tally,
) -> dict[str, Any]:
    own = sum(c.value for c in pings)
    before, started = target.packets(), time.perf_counter()
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(CAP_S)
    producers_done = time.perf_counter() - started
    tally.done.wait(max(1.0, CAP_S - producers_done))
    elapsed = time.perf_counter() - started
    requests = target.packets() - before - target.mntr_overhead
    requests -= sum(c.value for c in pings) - own
    return {
        "items_per_s": round(tally.taken / elapsed, 1),
        "requests_per_item": round(requests / max(1, tally.taken), 3),
        "seconds": round(elapsed, 3),
        "producers_done_s": round(producers_done, 3),
        "taken": tally.taken,
    }


def _ours(
    target: Target, path: str, items: int, producers: int, consumers: int, locked: bool
) -> dict[str, Any]:
    clients = [
        ZkClient(target.hosts, session_timeout=30.0).start() for _ in range(producers + consumers)
    ]
    pings = [count_pings(c.kazoo_client) for c in clients]
    tally = _Tally(items)

    def consume(value: bytes, context: ItemContext) -> None:
        tally.take()

    lock_path = path + "-locks" if locked else None
    queues: list[DistributedQueue[bytes]] = [
        DistributedQueue(c, path, consume, lock_path=lock_path).start() for c in clients[producers:]
    ]
    putters = [DistributedQueue(c, path).start() for c in clients[:producers]]
    queues += putters
    try:
        return _measure(
            target, pings, [_produce(q.put, items // producers) for q in putters], tally
        )
    finally:
        for q in queues:
            q.close()
        for client in clients:
            client.close()


def _kazoo(
    target: Target, path: str, items: int, producers: int, consumers: int, locked: bool
) -> dict[str, Any]:
    clients = []
    for _ in range(producers + consumers):
        kz = KazooClient(target.hosts, timeout=30.0)
        kz.start(timeout=30)
        clients.append(kz)
    pings = [count_pings(kz) for kz in clients]
    tally = _Tally(items)
    deadline = time.monotonic() + CAP_S + 30.0

    def make(kz: Any) -> Any:
        return kz.LockingQueue(path) if locked else kz.Queue(path)

    def consume(kz: Any) -> None:
        queue = make(kz)
        while not tally.finished() and time.monotonic() < deadline:
            got = queue.get(0.2) if locked else queue.get()
            if got is None:
                if not locked:
                    time.sleep(0.005)
                continue
            if locked:
                queue.consume()
            tally.take()

    readers = [threading.Thread(target=consume, args=(kz,)) for kz in clients[producers:]]
    for thread in readers:
        thread.start()
    try:
        putters = [_produce(make(kz).put, items // producers) for kz in clients[:producers]]
        return _measure(target, pings, putters, tally)
    finally:
        tally.done.set()
        with tally.lock:
            tally.taken = max(tally.taken, items)  # stops the readers
        for thread in readers:
            thread.join(30)
        for kz in clients:
            kz.stop()
            kz.close()


def run(target: Target, counts: Sequence[int], items: int, producers: int) -> dict[str, Any]:
    items -= items % producers
    results: dict[str, Any] = {}
    for index, consumers in enumerate(counts):
        by_impl: dict[str, Any] = {}
        order = IMPLS[index % len(IMPLS) :] + IMPLS[: index % len(IMPLS)]
        for impl in order:
            path = f"{target.root}/queue/{impl}-c{consumers}"
            runner = _ours if impl.startswith("ours") else _kazoo
            locked = impl in ("ours_locked", "kazoo_locking")
            by_impl[impl] = runner(target, path, items, producers, consumers, locked)
            got = by_impl[impl]
            progress(
                f"queue: {consumers} consumers, {impl}: {got['items_per_s']:.0f} items/s, "
                f"{got['requests_per_item']:.2f} requests/item"
            )
        by_impl = {impl: by_impl[impl] for impl in IMPLS}
        by_impl["ours_over_kazoo"] = {
            "plain_throughput": ratio(
                by_impl["ours"]["items_per_s"], by_impl["kazoo"]["items_per_s"]
            ),
            "locked_throughput": ratio(
                by_impl["ours_locked"]["items_per_s"], by_impl["kazoo_locking"]["items_per_s"]
            ),
        }
        results[str(consumers)] = by_impl
    return {
        "items": items,
        "producers": producers,
        "consumers_are": "threads of one process, one client each (producers too)",
        "consumers": results,
    }
