"""PriorityQueue, DelayQueue and IdQueue: Curator's names, their order, and remove(id)."""

from __future__ import annotations

import time

import pytest

from zk_recipes import (
    ConfigurationError,
    DelayQueue,
    IdQueue,
    ItemContext,
    PriorityQueue,
    ZkClient,
)
from zk_recipes.testing import Recorder


def test_priority_names_and_order_smaller_first_fifo_within(zk_client: ZkClient) -> None:
    with PriorityQueue(zk_client, "/pq") as queue:
        assert queue.put(b"p5", priority=5) == "/pq/queue-1000000050000000000"
        assert queue.put(b"m1", priority=-1) == "/pq/queue-0FFFFFFFF0000000001"
        queue.put(b"p5-second", priority=5)
        queue.put(b"p0", priority=0)
        assert queue.items() == [b"m1", b"p0", b"p5", b"p5-second"]
        with pytest.raises(ConfigurationError, match="32 bits"):
            queue.put(b"x", priority=2**31)
    got = Recorder[bytes]()
    with PriorityQueue(zk_client, "/pq", lambda v, ctx: got(v)):
        got.wait_for(lambda v: v == b"p5-second")
    assert got.snapshot() == [b"m1", b"p0", b"p5", b"p5-second"]


def test_delay_names_and_no_early_delivery(zk_client: ZkClient) -> None:
    with DelayQueue(zk_client, "/dlq") as queue:
        name = queue.put(b"old", delay_until_ms=1700000000000)
        assert name == "/dlq/queue-|18BCFE56800|0000000000"
    got: list[tuple[bytes, float]] = []
    seen = Recorder[bytes]()

    def consume(value: bytes, context: ItemContext) -> None:
        got.append((value, time.time()))
        seen(value)

    now_ms = int(time.time() * 1000)
    with DelayQueue(zk_client, "/dlq", consume) as queue:
        queue.put(b"later", delay_until_ms=now_ms + 1500)
        queue.put(b"sooner", delay_until_ms=now_ms + 700)  # arrives after, due first
        seen.wait_for(lambda v: v == b"later", timeout=10)
    assert [value for value, _ in got] == [b"old", b"sooner", b"later"]
    due = {b"sooner": now_ms + 700, b"later": now_ms + 1500}
    for value, at in got[1:]:
        assert at * 1000 >= due[value]  # never before its time


def test_id_names_fifo_and_remove_with_odd_ids(zk_client: ZkClient) -> None:
    with IdQueue(zk_client, "/iq") as queue:
        assert queue.put(b"a", item_id="a/b|c") == "/iq/queue-|a_b_c|0000000000"
        queue.put(b"b", item_id="other")
        queue.put(b"c", item_id="a/b|c")
        assert queue.items() == [b"a", b"b", b"c"]
        assert queue.remove("a/b|c") == 2  # Curator compares the unreplaced id: 0
        assert queue.items() == [b"b"]
        assert queue.remove("nobody") == 0
