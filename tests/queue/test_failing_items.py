"""A consumer that fails: back-off, attempts counted in the node, dead letters (retrying.py).

Review 3's new-user report: a raising consumer got its item back at once,
for ever (1,843 retries in 5 s, over a thousand writes a second). Now a
failed attempt is counted in the item's node, the item is tried again after
a back-off while other items flow, and after ``max_attempts`` it is set
aside in ``<path>-dead`` with the last error, where it can be listed, put
back or dropped.
"""

from __future__ import annotations

import threading

import pytest

from zk_recipes import (
    ConfigurationError,
    DistributedQueue,
    ItemContext,
    PriorityQueue,
    WrongTypeError,
    ZkClient,
)
from zk_recipes._queue.items import split
from zk_recipes.testing import Recorder, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


class Poison(Exception):
    pass


def test_a_poison_item_is_tried_max_attempts_times_then_becomes_a_dead_letter(
    zk_client: ZkClient,
) -> None:
    attempts = Recorder[tuple[bytes, int]]()

    def consume(value: bytes, context: ItemContext) -> None:
        attempts((value, context.attempt))
        if value == b"poison":
            raise Poison(f"cannot handle {value!r}")

    with DistributedQueue(
        zk_client,
        "/fi",
        consume,
        lock_path="/fi-locks",
        max_attempts=3,
        retry_backoff=0.05,
        retry_backoff_max=0.1,
    ) as queue:
        queue.put(b"poison")
        queue.put(b"fine")
        attempts.wait_for(lambda got: got == (b"poison", 3))
        wait_until(lambda: zk_client.get_children("/fi") == [], "both gone from the queue")
        [letter] = queue.dead_letters()
    tries = [got for got in attempts.snapshot() if got[0] == b"poison"]
    assert tries == [(b"poison", 1), (b"poison", 2), (b"poison", 3)]  # then no more
    assert (b"fine", 1) in attempts.snapshot()  # other items flowed meanwhile
    assert letter.items == (b"poison",)
    assert letter.attempts == 3
    assert letter.last_error == "Poison: cannot handle b'poison'"
    assert letter.path == f"/fi-dead/{letter.name}"
    assert zk_client.get_children("/fi-locks") == []


def test_attempts_are_counted_in_the_node_and_survive_the_consumer(
    zk_client_factory: ClientFactory,
) -> None:
    first, second, reader = zk_client_factory(), zk_client_factory(), zk_client_factory()
    failed_once = threading.Event()
    seen = Recorder[int]()

    def fails(value: bytes, context: ItemContext) -> None:
        failed_once.set()
        raise Poison("first consumer fails")

    with DistributedQueue(reader, "/fs", lock_path="/fs-locks") as producer:
        name = producer.put(b"job").rsplit("/", 1)[1]
    queue = DistributedQueue(
        first, "/fs", fails, lock_path="/fs-locks", retry_backoff=30, retry_backoff_max=30
    ).start()
    assert failed_once.wait(10)
    wait_until(lambda: split(reader.get(f"/fs/{name}")[0])[1] == 1, "the attempt counted")
    queue.close(10)  # lets the item go: its claim is deleted, the count stays
    _body, count, error = split(reader.get(f"/fs/{name}")[0])
    assert (count, error) == (1, "Poison: first consumer fails")
    with DistributedQueue(second, "/fs", lambda v, c: seen(c.attempt), lock_path="/fs-locks"):
        assert seen.wait_for(lambda attempt: True) == 2  # goes on from the node's count
        wait_until(lambda: reader.get_children("/fs") == [], "consumed")


def test_dead_letters_are_put_back_or_dropped(zk_client: ZkClient) -> None:
    broken = threading.Event()
    good = Recorder[bytes]()

    def consume(value: bytes, context: ItemContext) -> None:
        if not broken.is_set():
            raise Poison("not yet")
        good(value)

    with PriorityQueue(
        zk_client, "/fd", consume, lock_path="/fd-locks", max_attempts=1, retry_backoff=0.01
    ) as queue:
        queue.put(b"a", priority=5)
        queue.put(b"b", priority=5)
        queue.put(b"c", priority=5)
        wait_until(lambda: len(queue.dead_letters()) == 3, "three dead letters")
        letters = queue.dead_letters()
        assert [letter.items for letter in letters] == [(b"a",), (b"b",), (b"c",)]
        assert all(letter.name.startswith("queue-100000005") for letter in letters)
        assert queue.purge_dead([letters[2].name]) == 1
        broken.set()
        assert queue.requeue_dead() == 2
        good.wait_for(lambda value: value == b"b")
        assert sorted(good.snapshot()) == [b"a", b"b"]
        assert queue.dead_letters() == []


def test_without_max_attempts_a_failing_item_is_tried_on_with_back_off(
    zk_client: ZkClient,
) -> None:
    tries = Recorder[int]()

    def consume(value: bytes, context: ItemContext) -> None:
        tries(context.attempt)
        if context.attempt < 6:
            raise Poison("again")

    with DistributedQueue(
        zk_client, "/fa", consume, lock_path="/fa-locks", max_attempts=None, retry_backoff=0.01
    ) as queue:
        queue.put(b"x")
        tries.wait_for(lambda attempt: attempt == 6)
        wait_until(lambda: zk_client.get_children("/fa") == [], "consumed at last")
        assert queue.dead_letters() == []


def test_a_consumer_that_cannot_take_an_item_and_its_context_is_refused(
    zk_client: ZkClient,
) -> None:
    def one_argument(value: bytes) -> None: ...

    with pytest.raises(WrongTypeError, match=r"consumer\(value, context\)"):
        DistributedQueue(zk_client, "/fw", one_argument)  # type: ignore[arg-type]
    DistributedQueue(zk_client, "/fw", lambda value, context, *rest: None)  # fine
    DistributedQueue(zk_client, "/fw", print)  # a builtin: not checked


def test_options_are_checked(zk_client: ZkClient) -> None:
    with pytest.raises(ConfigurationError, match="max_attempts"):
        DistributedQueue(zk_client, "/fo", lock_path="/fo-l", max_attempts=0)
    with pytest.raises(ConfigurationError, match="retry_backoff_max"):
        DistributedQueue(zk_client, "/fo", retry_backoff=5, retry_backoff_max=1)
    with pytest.raises(ConfigurationError, match="batch= is for a queue without a lock path"):
        DistributedQueue(zk_client, "/fo", lock_path="/fo-l", batch=8)
    with pytest.raises(ConfigurationError, match="batch must be"):
        DistributedQueue(zk_client, "/fo", batch=0)


def test_a_timeout_or_priority_given_by_position_is_a_type_error(zk_client: ZkClient) -> None:
    """kazoo's ``Queue.put(value, priority)`` and Curator's ``put(item, priority)`` take the
    priority second; here a second positional argument is refused, never read as a timeout."""
    with PriorityQueue(zk_client, "/fp") as queue:
        with pytest.raises(TypeError):
            queue.put(b"x", 5)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            queue.put_multi([b"x"], 5)  # type: ignore[call-arg]
        queue.put(b"x", priority=5, timeout=1.0)
    with DistributedQueue(zk_client, "/fp2") as plain:
        with pytest.raises(TypeError):
            plain.put(b"x", 5)  # type: ignore[call-arg]
        with pytest.raises(WrongTypeError, match="sequence of items"):
            plain.put_multi(b"not a list")  # type: ignore[arg-type]
