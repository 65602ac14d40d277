"""The queues under chaos: producers and lock-safe consumers in every worker, and the parent's end.

Every worker puts into two ``DistributedQueue`` objects and consumes from
them, with a lock path (claims under ``<path>-claims``), on its one client:

- the **fast** queue: items of 0-5 ms of work, single puts and ``put_multi``
  nodes of 2-4 items, and a few **poison** items (id ending ``-poison``)
  whose consumer always raises: each must end as one dead letter after
  ``max_attempts`` (small back-off);
- the **slow** queue: 0.5-4.5 s per item, so faults find consumers mid-item
  (the parent aims at a fresh claimant of it, as at the slow lock's holder).

A consumer records ``qstart`` (its delivery's id, the item's node, the
claim's fencing token, the attempt), works, writes to the queues' fenced
store (``store.QueueStore``: accepted only above the item's last accepted
token) **whatever it was told meanwhile**, on purpose, then adds
``create(<results>/<item id>, <delivery id>)`` to ``context.transaction()``:
committed with the item's delete, or not at all. Then ``qdone`` (the store's
answer, and whether ``context.lost`` was set). A poison item records
``qfail`` and raises.

**Loss reports.** The queue tells a consumer that its claim was lost (or may
have been, when the connection went as the commit was sent) with a warning on
the consumer's thread, right after the attempt. ``LossReports`` hears it
there and records ``qlost`` for each delivery of that node (definite or
maybe). ``context.lost`` alone cannot tell: SUSPENDED sets it too, and the
commit then goes through if the session survived.

Producers record each put after it returns: ``ok``, ``unknown`` (the put's
outcome could not be known: ``TransactionOutcomeUnknown``) or the error it
raised. They stop when the parent creates the ``stop-producing`` file; the
parent then waits for the queues to empty (``remaining``) before it stops the
workers, and reads the end state into the history (``final_rows``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from zk_recipes import (
    JSON,
    DistributedQueue,
    ItemContext,
    NodeExistsError,
    NoNodeError,
    TransactionOutcomeUnknown,
    ZkClient,
    ZkRecipesError,
)

from .config import claims_path
from .store import EventRecorder, QueueStore

#: Suffix of a poison item's id: its consumer always raises.
POISON = "-poison"


class PoisonError(Exception):
    """What a poison item's consumer raises (each time)."""


class _Current(threading.local):
    """The node a queue thread is on, and the (item, delivery) pairs delivered from it."""

    def __init__(self) -> None:
        self.context: ItemContext | None = None
        self.deliveries: list[tuple[str, str]] = []


class LossReports(logging.Handler):
    """Records the queue's "claim was lost" / "claim may be lost" warnings as ``qlost``.

    The warning is logged on the consumer's thread just after the attempt, so
    the node it names is that thread's current one (``_Current``).
    """

    def __init__(self, events: EventRecorder, current: _Current) -> None:
        super().__init__(logging.WARNING)
        self._events = events
        self._current = current

    def emit(self, record: logging.LogRecord) -> None:
        message = str(record.msg)
        if "claim was lost" in message:
            how = "definite"
        elif "claim may be lost" in message:
            how = "maybe"
        else:
            return
        node = record.args[0] if isinstance(record.args, tuple) and record.args else None
        current = self._current
        if current.context is None or current.context.path != node:
            self._events.record("qlost", path=str(node), detail=f"- {how}")
            return
        for item, delivery in current.deliveries:
            self._events.record("qlost", path=item, detail=f"{delivery} {how}")


class QueueWork:
    """One worker's producer thread and its two consumers (see the module note)."""

    def __init__(
        self,
        client: ZkClient,
        *,
        worker: str,
        pid: int,
        events: EventRecorder,
        db_path: str,
        queue_paths: tuple[str, str],
        results_path: str,
        put_every: tuple[float, float],
        slow_put_every: tuple[float, float],
        hold_max: float,
        slow_hold: tuple[float, float],
        poison: float,
        max_attempts: int,
        retry_backoff: float,
        seed: int,
        stop_producing: Callable[[], bool],
    ) -> None:
        self._worker = worker
        self._pid = pid
        self._events = events
        self._results = results_path
        self._put_every = put_every
        self._slow_put_every = slow_put_every
        self._hold_max = hold_max
        self._slow_hold = slow_hold
        self._poison = poison
        self._rng = random.Random(seed)
        self._stop_producing = stop_producing
        self._stop = threading.Event()
        self._deliveries = itertools.count(1)
        self._current = _Current()
        self._handler = LossReports(events, self._current)
        logging.getLogger("zk_recipes.queue").addHandler(self._handler)
        self._stores = [QueueStore(db_path) for _ in queue_paths]
        self.queues = [
            DistributedQueue(
                client,
                path,
                self._consumer(store),
                lock_path=claims_path(path),
                serializer=JSON,
                max_attempts=max_attempts,
                retry_backoff=retry_backoff,
                retry_backoff_max=retry_backoff * 4,
            )
            for path, store in zip(queue_paths, self._stores, strict=True)
        ]
        for queue in self.queues:
            queue.start()
        self._producer = threading.Thread(target=self._produce, name="chaos producer", daemon=True)
        self._producer.start()

    def close(self) -> None:
        self._stop.set()
        self._producer.join(60.0)
        for queue in self.queues:
            with contextlib.suppress(ZkRecipesError):
                queue.close()
        logging.getLogger("zk_recipes.queue").removeHandler(self._handler)
        for store in self._stores:
            store.close()

    # -- consuming -----------------------------------------------------------------------
    def _consumer(self, store: QueueStore) -> Callable[[Any, ItemContext], None]:
        def consume(value: Any, context: ItemContext) -> None:
            self._consume(store, value, context)

        return consume

    def _consume(self, store: QueueStore, value: Any, context: ItemContext) -> None:
        item, work = str(value["id"]), float(value["work"])
        current = self._current
        if current.context is not context:
            current.context, current.deliveries = context, []
        delivery = f"{self._worker}/{next(self._deliveries)}"
        current.deliveries.append((item, delivery))
        token = context.fencing_token
        assert token is not None  # a lock path: every delivery has its claim's token
        self._events.record(
            "qstart", path=item, token=token, detail=f"{delivery} {context.path} {context.attempt}"
        )
        if item.endswith(POISON):
            self._events.record("qfail", path=item, detail=delivery)
            raise PoisonError(f"{item} always fails")
        start_ns = time.monotonic_ns()
        time.sleep(work)
        accepted = store.write(
            item=item,
            delivery=delivery,
            worker=self._worker,
            pid=self._pid,
            token=token,
            start_ns=start_ns,
            told_lost=context.lost.is_set,
        )
        context.transaction().create(f"{self._results}/{item}", delivery.encode())
        self._events.record(
            "qdone",
            path=item,
            detail=f"{delivery} {int(accepted)} {int(context.lost.is_set())}",
        )

    # -- producing -----------------------------------------------------------------------
    def _produce(self) -> None:
        rng = self._rng
        numbers = itertools.count(1)
        fast, slow = self.queues
        now = time.monotonic()
        due = {"fast": now, "slow": now + rng.uniform(*self._slow_put_every)}
        while not self._stop.is_set() and not self._stop_producing():
            which = min(due, key=due.__getitem__)
            if self._stop.wait(max(0.0, due[which] - time.monotonic())):
                return
            if which == "slow":
                due["slow"] = time.monotonic() + rng.uniform(*self._slow_put_every)
                work = rng.uniform(*self._slow_hold)
                self._put(slow, [(f"{self._worker}-{next(numbers)}", work)])
                continue
            due["fast"] = time.monotonic() + rng.uniform(*self._put_every)
            if rng.random() < 0.3:
                size = rng.randint(2, 4)
                ids = [f"{self._worker}-{next(numbers)}" for _ in range(size)]
            else:
                poison = rng.random() < self._poison
                ids = [f"{self._worker}-{next(numbers)}{POISON if poison else ''}"]
            self._put(fast, [(item, rng.uniform(0.0, self._hold_max)) for item in ids])

    def _put(self, queue: DistributedQueue[Any], items: list[tuple[str, float]]) -> None:
        values = [{"id": item, "work": round(work, 4)} for item, work in items]
        ids = ",".join(item for item, _ in items)
        try:
            if len(values) > 1:
                queue.put_multi(values)
            else:
                queue.put(values[0])
            outcome = "ok"
        except TransactionOutcomeUnknown:
            outcome = "unknown"
        except ZkRecipesError as exc:
            outcome = f"error:{type(exc).__name__}@{_raised_at(exc)}"
            self._stop.wait(0.1)  # the connection is down: do not spin
        self._events.record("put", path=queue.path, detail=f"{outcome} {ids}")


def _raised_at(exc: BaseException) -> str:
    """Where in the library an error was raised (``module.py:line``): which step of a put."""
    where, frame = "?", exc.__traceback__
    while frame is not None:
        code = frame.tb_frame.f_code
        if "zk_recipes" in code.co_filename:
            where = f"{os.path.basename(code.co_filename)}:{frame.tb_lineno}"
        frame = frame.tb_next
    return where


# -- the parent's side ------------------------------------------------------------------
def make_dirs(admin: ZkClient, queue_paths: tuple[str, ...], results_path: str) -> None:
    """The directories the consumers' transactions write into (the queues make theirs)."""
    for path in (results_path, *queue_paths, *(claims_path(p) for p in queue_paths)):
        with contextlib.suppress(NodeExistsError):
            admin.create(path, parents=True)


def remaining(admin: ZkClient, queue_paths: tuple[str, ...]) -> int:
    """Item nodes and claims still in the queues."""
    left = 0
    for path in queue_paths:
        for directory in (path, claims_path(path)):
            with contextlib.suppress(NoNodeError):
                left += len(admin.get_children(directory))
    return left


def final_rows(
    admin: ZkClient, queue_paths: tuple[str, ...], results_path: str
) -> Iterator[tuple[str, str, str, str]]:
    """The queues' end state as ``queue_final`` rows (kind, node, item, detail)."""
    wait = admin.settings.connection_timeout
    names = _children(admin, results_path)
    for start in range(0, len(names), 500):
        chunk = [f"{results_path}/{name}" for name in names[start : start + 500]]
        replies = [(node, admin.get_async(node)) for node in chunk]
        for node, reply in replies:
            data, _stat = reply.result(wait)
            yield "result", node, node.rsplit("/", 1)[1], data.decode()
    for path in queue_paths:
        queue = DistributedQueue(admin, path, serializer=JSON)
        for letter in queue.dead_letters():
            for raw in letter.items:
                yield "dead", letter.path, str(JSON.deserialize(raw)["id"]), str(letter.attempts)
        for value in queue.items():
            yield "left", path, str(value["id"]), ""
        for kind, directory in (
            ("claim", claims_path(path)),
            ("marker", path + "-puts"),
            ("corrupted", path + "-corrupted"),
        ):
            for name in _children(admin, directory):
                yield kind, f"{directory}/{name}", "", ""


def _children(admin: ZkClient, path: str) -> list[str]:
    try:
        return sorted(admin.get_children(path))
    except NoNodeError:
        return []


def stop_file(run_dir: str) -> str:
    """The file whose existence tells producers to stop (the queues then drain)."""
    return os.path.join(run_dir, "stop-producing")
