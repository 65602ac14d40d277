"""The queue metrics: puts, consumed and retried nodes, consumer time, and the length gauge."""

from __future__ import annotations

import threading
from typing import Any

from zk_recipes import DistributedQueue, ItemContext, ZkClient
from zk_recipes.testing import wait_until


def _value(registry: Any, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return float(found) if found is not None else 0.0


def test_puts_consumption_retries_consumer_time_and_length(
    registry: Any, zk_client: ZkClient
) -> None:
    raised = threading.Event()
    gate = threading.Event()
    seen: list[bytes] = []

    def consume(value: bytes, context: ItemContext) -> None:
        gate.wait(30)
        if value == b"bad" and not raised.is_set():
            raised.set()
            raise RuntimeError("once")
        seen.append(value)

    with DistributedQueue(zk_client, "/m") as producer:
        producer.put(b"a")
        producer.put_multi([b"b", b"c"])
        producer.put(b"bad")
    with DistributedQueue(zk_client, "/m", consume, lock_path="/m-locks", retry_backoff=0.01):
        # The consumer holds the first node; its listing saw all three.
        wait_until(lambda: _value(registry, "zk_recipes_queue_items", queue="/m") == 3, "listed")
        gate.set()
        wait_until(lambda: sorted(seen) == [b"a", b"b", b"bad", b"c"], "every item consumed")
        wait_until(lambda: _value(registry, "zk_recipes_queue_items", queue="/m") == 0, "empty")
    put = _value(registry, "zk_recipes_queue_items_put_total", queue="/m")
    consumed = _value(registry, "zk_recipes_queue_items_consumed_total", queue="/m")
    retried = _value(registry, "zk_recipes_queue_items_retried_total", queue="/m")
    timed = _value(registry, "zk_recipes_queue_consumer_seconds_count", queue="/m")
    assert (put, consumed, retried) == (3, 3, 1)
    assert timed == 4  # three nodes returned from, one raised (and tried again)
    assert _value(registry, "zk_recipes_queue_items_dead_total", queue="/m") == 0
    assert _value(registry, "zk_recipes_queue_consumer_seconds_sum", queue="/m") > 0
    # A closed queue leaves the gauge.
    assert registry.get_sample_value("zk_recipes_queue_items", {"queue": "/m"}) is None
