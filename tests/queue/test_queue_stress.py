"""A randomized stress of lock-safe queues with a fixed seed: faults at random, each item once.

Two producers put single items and ``put_multi`` nodes (one of them through
a proxy that now and then drops the server's replies: a put whose reply was
lost is settled by its marker). Four consumers, each on a client of its own
through a proxy of its own, take them with a lock path; each item's consumer
writes ``/results/<item>`` in the transaction that deletes the item. Faults
drawn from ``random.Random(SEED)`` hit them meanwhile:

- **kill**: the consumer is stopped mid-item (its consumer blocks) and cut
  off for good: its session expires, its claim goes, another consumer takes
  the item. A new consumer takes its place. At the end the stopped one is
  let go: it must commit nothing (review 3's Q1: its claim's path may hold
  the next claimant's claim, at the same version);
- **cut**: black-holed longer than the session, then healed (a new session);
- **expire**: its session expired on the server (``expire_session``);
- **drop replies**: its (or the faulty producer's) replies dropped for a
  moment, shorter than the session: a commit whose reply was lost.

At the end every item whose put returned was consumed (its result node
exists); every delivery but the one that committed was told by its queue
that its claim was, or may have been, lost; no commit came from a delivery
told its claim *was* lost; no dead letter, no claim, no producer marker,
nothing left in the queue.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from zk_recipes import (
    JSON,
    DistributedQueue,
    ItemContext,
    NoNodeError,
    TransactionOutcomeUnknown,
    ZkClient,
    ZkRecipesError,
)
from zk_recipes.testing import TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.slow

SEED = 20261129
FAULTS = 24
SESSION = 2.0
CONSUMERS = 4


@dataclasses.dataclass
class Delivery:
    id: str
    item: str
    context: ItemContext
    #: What the queue said of the claim afterwards: "" (nothing), "was", "may be".
    told: str = ""


class _Log:
    """Every delivery, and the queue's word on its claim (a warning, on the consumer's thread)."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.current = threading.local()
        self._lock = threading.Lock()

    def delivered(self, delivery: Delivery) -> None:
        with self._lock:
            self.deliveries.append(delivery)
        if getattr(self.current, "context", None) is not delivery.context:
            self.current.context, self.current.of_node = delivery.context, []
        self.current.of_node.append(delivery)


class _LossReports(logging.Handler):
    def __init__(self, log: _Log) -> None:
        super().__init__(logging.WARNING)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        message = str(record.msg)
        told = (
            "was" if "claim was lost" in message else "may be" if "may be lost" in message else ""
        )
        context = getattr(self._log.current, "context", None)
        node = record.args[0] if isinstance(record.args, tuple) and record.args else None
        if told and context is not None and node == context.path:
            for delivery in self._log.current.of_node:
                delivery.told = told


class _Consumer:
    """A consumer on a client of its own, through a proxy of its own."""

    def __init__(
        self, name: str, server: ZooKeeperServer, factory: ClientFactory, log: _Log
    ) -> None:
        self.name = name
        self.proxy = TcpProxy(server.host, server.port)
        self.client = factory(hosts=self.proxy.connect_string, session_timeout=SESSION)
        self.log = log
        self.numbers = itertools.count(1)
        self.stopped = threading.Event()  # killed: the next moment of its consumer blocks
        self.thaw = threading.Event()
        self.busy_until = 0.0
        self.queue = DistributedQueue(
            self.client, "/q", self.consume, lock_path="/q-claims", serializer=JSON
        ).start()

    def consume(self, value: Any, context: ItemContext) -> None:
        delivery = Delivery(f"{self.name}/{next(self.numbers)}", value["id"], context)
        self.log.delivered(delivery)
        began = time.monotonic()
        while time.monotonic() - began < value["work"]:
            if self.stopped.is_set():
                self.thaw.wait(120)
                break
            time.sleep(0.01)
        context.transaction().create(f"/results/{value['id']}", delivery.id.encode())

    def close(self) -> None:
        self.thaw.set()
        self.proxy.heal()
        self.queue.close(30)
        self.client.close()
        self.proxy.close()


class _Producer:
    """Puts single items and put_multi nodes, as the seeded draw says; each outcome kept."""

    def __init__(self, name: str, client: ZkClient, seed: int, stop: threading.Event) -> None:
        self.name = name
        self.queue = DistributedQueue(client, "/q", serializer=JSON).start()
        self.rng = random.Random(seed)
        self.stop = stop
        self.outcomes: dict[str, str] = {}
        self.thread = threading.Thread(target=self._run, name=f"producer {name}")
        self.thread.start()

    def _run(self) -> None:
        numbers = itertools.count(1)
        while not self.stop.wait(self.rng.uniform(0.04, 0.15)):
            size = 1 if self.rng.random() < 0.6 else self.rng.randint(2, 4)
            values: list[dict[str, Any]] = [
                {
                    "id": f"{self.name}-{next(numbers)}",
                    # Mostly short; a few long enough for a fault to find them mid-item.
                    "work": self.rng.uniform(0.4, 1.2) if self.rng.random() < 0.06 else 0.0,
                }
                for _ in range(size)
            ]
            try:
                self.queue.put_multi(values)
                outcome = "ok"
            except TransactionOutcomeUnknown:
                outcome = "unknown"
            except ZkRecipesError as exc:
                outcome = type(exc).__name__
                time.sleep(0.05)
            for value in values:
                self.outcomes[value["id"]] = outcome


@pytest.fixture
def loss_reports() -> Iterator[_Log]:
    log = _Log()
    handler = _LossReports(log)
    logger = logging.getLogger("zk_recipes.queue")
    logger.addHandler(handler)
    yield log
    logger.removeHandler(handler)


@pytest.mark.timeout(240)
def test_each_item_consumed_once_unless_a_loss_was_reported(
    zk_server: ZooKeeperServer,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    loss_reports: _Log,
) -> None:
    rng = random.Random(SEED)
    names = (f"c{index}" for index in itertools.count())
    admin = zk_client_factory()
    admin.create("/results")
    consumers = [
        _Consumer(next(names), zk_server, zk_client_factory, loss_reports) for _ in range(CONSUMERS)
    ]
    stopped: list[_Consumer] = []
    producer_proxy = TcpProxy(zk_server.host, zk_server.port)
    stop = threading.Event()
    producers = [
        _Producer("p0", zk_client_factory(), rng.getrandbits(32), stop),
        _Producer(
            "p1",
            zk_client_factory(hosts=producer_proxy.connect_string, session_timeout=6.0),
            rng.getrandbits(32),
            stop,
        ),
    ]
    heals: list[threading.Timer] = []
    applied: list[str] = []
    try:
        for _fault in range(FAULTS):
            time.sleep(rng.uniform(0.3, 0.8))
            kind = rng.choice(["kill", "cut", "expire", "drop", "drop", "drop_producer"])
            if kind == "drop_producer":
                producer_proxy.drop_replies()
                heals.append(_later(rng.uniform(0.2, 1.0), producer_proxy.heal))
                applied.append(kind)
                continue
            idle = [c for c in consumers if c.busy_until < time.monotonic()]
            if not idle:
                continue
            victim = rng.choice(idle)
            applied.append(kind)
            if kind == "kill":
                victim.stopped.set()
                victim.proxy.blackhole()
                consumers.remove(victim)
                stopped.append(victim)
                consumers.append(_Consumer(next(names), zk_server, zk_client_factory, loss_reports))
            elif kind == "cut":
                victim.proxy.blackhole()
                victim.busy_until = time.monotonic() + SESSION * 1.5
                heals.append(_later(SESSION * 1.4, victim.proxy.heal))
            elif kind == "expire":
                with contextlib.suppress(ZkRecipesError):  # between sessions already
                    expire_session(victim.client, hosts=zk_hosts)
            else:
                victim.proxy.drop_replies()
                victim.busy_until = time.monotonic() + 1.0
                heals.append(_later(rng.uniform(0.2, SESSION * 0.4), victim.proxy.heal))
        stop.set()
        for producer in producers:
            producer.thread.join(30)
        for timer in heals:
            timer.join()
        producer_proxy.heal()
        wait_until(lambda: admin.get_children("/q") == [], "every item consumed", timeout=60)
        wait_until(lambda: admin.get_children("/q-claims") == [], "every claim gone", timeout=30)
        for consumer in stopped:  # let the stopped ones go: they must commit nothing
            consumer.close()
    finally:
        stop.set()
        for consumer in stopped + consumers:
            with contextlib.suppress(Exception):
                consumer.close()
        for producer in producers:
            producer.queue.close()
        producer_proxy.close()
    assert set(applied) >= {"kill", "cut", "expire", "drop", "drop_producer"}, applied
    _check(admin, producers, loss_reports)


def _later(seconds: float, action: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def _check(admin: ZkClient, producers: list[_Producer], log: _Log) -> None:
    results = {
        name: admin.get(f"/results/{name}")[0].decode() for name in admin.get_children("/results")
    }
    outcomes = {item: o for producer in producers for item, o in producer.outcomes.items()}
    put = {item for item, outcome in outcomes.items() if outcome == "ok"}
    assert put, outcomes
    assert sorted(put - results.keys()) == [], "items put, never consumed"
    assert all(outcomes.get(item) in ("ok", "unknown") for item in results), (
        "an item consumed whose put raised: it said nothing was put"
    )
    by_id = {d.id: d for d in log.deliveries}
    committed_told_lost = [i for i, d in results.items() if by_id[d].told == "was"]
    assert committed_told_lost == [], "commits from consumers told their claim was lost"
    others = [d for d in log.deliveries if results.get(d.item) != d.id]
    assert [d for d in others if not d.told] == [], "a second delivery with no loss reported"
    assert len(log.deliveries) == len(results) + len(others)
    for directory in ("/q", "/q-claims", "/q-puts", "/q-dead", "/q-corrupted"):
        with contextlib.suppress(NoNodeError):
            assert admin.get_children(directory) == [], directory
    # The faults did their work: some items were delivered twice, each after a loss report.
    assert others, "no delivery was lost: the faults found no consumer mid-item"
