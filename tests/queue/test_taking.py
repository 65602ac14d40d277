"""The taker (the queue consumer's steps) under a lost reply: a claim whose create reply was lost.

Curator's consumer treats the NodeExists its retry meets as "another
consumer has it" and leaves the item stuck for the session's life. Ours
sees its own session on the node and goes on. The proxy lets the create
reach the server and drops its reply; the test drives the taker directly,
so that the claim's create is exactly the request whose reply is lost.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from zk_recipes import BYTES, DistributedQueue, ItemContext
from zk_recipes._queue.taking import Outcome, Taker
from zk_recipes.testing import TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_a_claim_whose_create_reply_was_lost_is_ours_and_the_item_is_consumed(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    checker = zk_client_factory()
    with DistributedQueue(checker, "/tq", lock_path="/tq-locks") as producer:
        name = producer.put(b"x").rsplit("/", 1)[1]
    got: list[tuple[bytes, int | None]] = []

    def consume(value: bytes, context: ItemContext) -> None:
        got.append((value, context.fencing_token))

    taker = Taker(client, "/tq", "/tq-locks", consume, BYTES)
    taken: list[Outcome] = []
    proxied.drop_replies()
    thread = threading.Thread(target=lambda: taken.append(taker.take_claimed(name)))
    thread.start()
    claim = "/tq-locks/" + name
    wait_until(lambda: checker.exists(claim) is not None, "the claim made on the server")
    stat = checker.exists(claim)
    assert stat is not None
    assert stat.ephemeral_owner == client.session_id
    proxied.heal()  # the connection is reset: the client comes back on the same session
    thread.join(30)
    assert taken == [Outcome.TAKEN]  # ours, not "another consumer's"
    assert got == [(b"x", stat.czxid)]  # consumed once, under the claim the server made
    assert checker.get_children("/tq") == []
    wait_until(lambda: checker.get_children("/tq-locks") == [], "the claim deleted")
