"""holders() on queues: each queue's length, and the claims of the items consumers hold now."""

from __future__ import annotations

import os
import threading

from zk_recipes import DistributedQueue, ItemContext, SimpleQueue, ZkClient, holders, holders_table
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_a_queue_reports_its_length_and_the_claim_of_the_item_in_hand(
    zk_client_factory: ClientFactory,
) -> None:
    reader, producer, consumer_client = (zk_client_factory() for _ in range(3))
    started, release = threading.Event(), threading.Event()
    seen: list[ItemContext] = []

    def consume(value: bytes, context: ItemContext) -> None:
        seen.append(context)
        started.set()
        release.wait(30)

    with DistributedQueue(producer, "/jobs") as queue:
        first = queue.put(b"one")
        queue.put_multi([b"two", b"three"])
        queue.put(b"four")
    simple = SimpleQueue(producer, "/simple")
    simple.offer(b"a")
    simple.offer(b"b")
    consumer = DistributedQueue(consumer_client, "/jobs", consume, lock_path="/claims/jobs")
    with consumer:
        assert started.wait(30)
        report = {r.path: r for r in holders(reader)}
        release.set()

    assert set(report) == {"/jobs", "/simple"}  # neither the claims nor the put markers
    jobs = report["/jobs"]
    assert (jobs.kind, jobs.items, jobs.waiting) == ("queue", 3, ())
    [claim] = jobs.holders
    assert claim.node == "/claims/jobs/" + first.rsplit("/", 1)[1]
    assert claim.identifier == first.rsplit("/", 1)[1]
    assert claim.fencing_token == seen[0].fencing_token
    assert claim.session_id == consumer_client.session_id
    assert (claim.owner.pid, claim.holding, claim.position) == (os.getpid(), True, 0)
    assert report["/simple"].items == 2
    assert report["/simple"].holders == ()
    assert report["/jobs"].as_dict()["items"] == 3

    table = holders_table(sorted(report.values(), key=lambda r: r.path)).splitlines()
    assert table[1].split()[:4] == ["/jobs", "queue", "3", "items"]
    assert table[2].split()[:3] == ["/jobs", "queue", "claim"]
    assert claim.identifier in table[2]
    assert table[3].split()[:4] == ["/simple", "queue", "2", "items"]


def test_claims_outside_the_walked_path_leave_the_queue_without_holders(
    zk_client_factory: ClientFactory,
) -> None:
    reader, client = zk_client_factory(), zk_client_factory()
    started, release = threading.Event(), threading.Event()

    def consume(value: bytes, context: ItemContext) -> None:
        started.set()
        release.wait(30)

    with DistributedQueue(client, "/q", consume, lock_path="/q-locks") as queue:
        queue.put(b"x")
        assert started.wait(30)
        [only] = holders(reader, "/q")
        [whole] = [r for r in holders(reader) if r.path == "/q"]
        release.set()
    assert (only.kind, only.items, only.holders) == ("queue", 1, ())
    assert len(whole.holders) == 1


def test_a_queue_emptied_by_its_consumers_reports_zero_items(
    zk_client: ZkClient,
) -> None:
    done = threading.Event()
    with DistributedQueue(zk_client, "/q", lambda v, c: done.set()) as queue:
        queue.put(b"x")
        assert done.wait(30)
        wait_until(lambda: zk_client.get_children("/q") == [], "the item deleted")
    # An empty directory has no item to recognise it by: it is no recipe to report.
    assert [r.path for r in holders(zk_client)] == []


def test_a_queue_reports_its_dead_letters_and_the_attempt_of_the_item_in_hand(
    zk_client_factory: ClientFactory,
) -> None:
    reader, client = zk_client_factory(), zk_client_factory()
    third = threading.Event()

    def consume(value: bytes, context: ItemContext) -> None:
        if value == b"poison":
            raise ValueError("never")
        if context.attempt < 3:
            raise ValueError("not yet")
        third.set()
        third.wait(30)

    with DistributedQueue(
        client, "/dl", consume, lock_path="/dl-locks", max_attempts=2, retry_backoff=0.01
    ) as queue:
        queue.put(b"poison")
        wait_until(lambda: len(queue.dead_letters()) == 1, "a dead letter")
        [report] = [r for r in holders(reader) if r.path == "/dl"]
        assert (report.items, report.dead, report.holders) == (0, 1, ())
        assert report.as_dict()["dead"] == 1
        assert "/dl-dead" not in [r.path for r in holders(reader)]  # counted, not a queue
        table = holders_table([report])
        assert "0 items, 1 dead" in table
