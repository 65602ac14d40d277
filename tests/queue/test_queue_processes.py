"""Producers and consumer processes at once, consumers killed with -9 and cut off at random.

4 producer threads put 4 x 1,000 items into one lock-safe DistributedQueue; 4
consumer processes, each through a proxy of its own, take them. Meanwhile
consumers are killed with SIGKILL mid-item (and started again) and cut off
long enough for their session to end. Each consumer logs ``start`` and
``done`` around its work and ``lost`` for a claim its queue reported lost.

At the end every item was consumed, and an item consumed twice had a first
delivery that was killed mid-item or whose claim was reported lost: nothing
lost, nothing silently duplicated.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from zk_recipes import DistributedQueue, ZkClient
from zk_recipes.testing import TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

# 120 s: 4,000 lock-safe items and 8 faults took over 60 s on a loaded 2-core box
pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

PRODUCERS, CONSUMERS, ITEMS = 4, 4, 1000

_CONSUMER = textwrap.dedent(
    """
    import logging, random, re, sys, time
    from zk_recipes import DistributedQueue, ZkClient
    hosts, namespace, path, log_path = sys.argv[1:5]
    log = open(log_path, "a", buffering=1)

    class Lost(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            if "claim was lost" in message or "claim may be lost" in message:
                log.write("lost " + message.split()[2].rstrip(":") + "\\n")

    logging.getLogger("zk_recipes.queue").addHandler(Lost())
    client = ZkClient(hosts, namespace=namespace, session_timeout=3.0).start()

    def consume(value, context):
        log.write(f"start {value.decode()} {context.path}\\n")
        time.sleep(random.random() * 0.004)
        log.write(f"done {value.decode()} {context.path}\\n")

    DistributedQueue(client, path, consume, lock_path=path + "-locks").start()
    print("ready", flush=True)
    time.sleep(3600)
    """
)


class _Consumer:
    def __init__(self, index: int, server: ZooKeeperServer, namespace: str, logs: Path) -> None:
        self.proxy = TcpProxy(server.host, server.port)
        self.log = logs / f"c{index}.log"
        self.args = [self.proxy.connect_string, namespace, "/work", str(self.log)]
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", _CONSUMER, *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready"
        return process

    def kill_and_restart(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        with self.log.open("a") as log:  # its last item was cut short, done or not
            log.write("killed\n")
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = self._start()

    def cut(self, seconds: float) -> None:
        self.proxy.blackhole()
        time.sleep(seconds)
        self.proxy.heal()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.proxy.close()


def test_nothing_lost_and_no_silent_duplicate_under_kills_and_cuts(
    zk_server: ZooKeeperServer,
    zk_namespace: str,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    consumers = [_Consumer(i, zk_server, zk_namespace, tmp_path) for i in range(CONSUMERS)]
    try:
        producers = [
            threading.Thread(target=_produce, args=(zk_client_factory(), p))
            for p in range(PRODUCERS)
        ]
        for producer in producers:
            producer.start()
        for _round in range(4):  # faults while the items flow
            time.sleep(0.5)
            rng.choice(consumers).kill_and_restart()
            rng.choice(consumers).cut(2.5)  # past 66% of the 3 s session: it ends
        for producer in producers:
            producer.join(60)
        checker = zk_client_factory()
        wait_until(lambda: checker.get_children("/work") == [], "every item taken", timeout=60)
        wait_until(lambda: checker.get_children("/work-locks") == [], "claims gone", timeout=20)
    finally:
        for consumer in consumers:
            consumer.close()
    _check_logs(tmp_path)


def _produce(client: ZkClient, producer: int) -> None:
    with DistributedQueue(client, "/work") as queue:
        for number in range(ITEMS):
            queue.put(f"p{producer}-{number}".encode())


def _check_logs(logs: Path) -> None:
    # value -> its deliveries: (log, item path, finished: done and not killed right after)
    deliveries: dict[str, list[tuple[str, str, bool]]] = {}
    lost: set[tuple[str, str]] = set()  # (log, item path)
    for log in sorted(logs.glob("c*.log")):
        last: str | None = None
        for line in log.read_text().splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "start":
                value, path = rest.split()
                deliveries.setdefault(value, []).append((log.name, path, False))
                last = value
            elif kind == "done":
                value, path = rest.split()
                entries = deliveries[value]
                entries[-1] = (entries[-1][0], path, True)
            elif kind == "killed" and last is not None:
                entries = deliveries[last]
                entries[-1] = (entries[-1][0], entries[-1][1], False)  # before its commit?
            elif kind == "lost":
                lost.add((log.name, rest.strip()))
    expected = {f"p{p}-{n}" for p in range(PRODUCERS) for n in range(ITEMS)}
    assert set(deliveries) == expected, f"lost: {sorted(expected - set(deliveries))[:10]}"
    for value, entries in deliveries.items():
        # Deliveries are grouped by log, not in time order. Each one but the delivery that
        # committed was killed mid-item (not done) or had its claim lost: at most one
        # finished delivery is unexplained.
        unexplained = [
            (log_name, path)
            for log_name, path, done in entries
            if done
            and not any(
                name == log_name and path.endswith(lost_path.rsplit("/", 1)[-1])
                for name, lost_path in lost
            )
        ]
        assert len(unexplained) <= 1, (
            f"{value} delivered twice with no reason: {entries}, lost={lost}"
        )
