"""Every sequential create survives a lost reply, or says its outcome is unknown (review 3, Q4/D2).

A sequential node's name is the server's to choose, so after a lost reply
only a protected name (``_c_<uuid>-``) or a marker in the same multi can
find it. A sequential create with neither is sent once: a lost reply raises
``OutcomeUnknown``, which no retry policy sends again (a blind resend made
a second node). The recipes that make sequential nodes each use one of the
two: contenders and leases (protected), queue puts and SimpleQueue offers
(a marker), dead letters put back (the letter's delete), discovery's
DYNAMIC_SEQUENTIAL (found by its JSON), PersistentNode (protected).
"""

from __future__ import annotations

import threading

import pytest

from zk_recipes import (
    ConfigurationError,
    CreateMode,
    OutcomeUnknown,
    PersistentNode,
    TransactionOutcomeUnknown,
    ZkClient,
)
from zk_recipes._retry import is_retryable
from zk_recipes.testing import TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_an_unprotected_sequential_create_whose_reply_was_lost_is_not_sent_again(
    zk_client_factory: ClientFactory, zk_proxy: TcpProxy, zk_private_server: ZooKeeperServer
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=6.0)
    checker = zk_client_factory(hosts=zk_private_server.connect_string)
    client.create("/seq", b"")
    outcome: list[BaseException] = []

    def create() -> None:
        try:
            client.create("/seq/job-", b"x", mode=CreateMode.PERSISTENT_SEQUENTIAL)
        except BaseException as exc:
            outcome.append(exc)

    zk_proxy.drop_replies()  # the create reaches the server; its reply does not come back
    creating = threading.Thread(target=create)
    creating.start()
    wait_until(lambda: len(checker.get_children("/seq")) == 1, "made on the server")
    zk_proxy.heal()
    creating.join(30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], OutcomeUnknown)
    assert "protected=True" in str(outcome[0])
    assert len(checker.get_children("/seq")) == 1  # not two


def test_an_outcome_unknown_is_not_retried() -> None:
    assert not is_retryable(OutcomeUnknown("x"))
    assert not is_retryable(TransactionOutcomeUnknown("x"))


def test_a_sequential_persistent_node_is_protected(zk_client: ZkClient) -> None:
    with pytest.raises(ConfigurationError, match="must be protected"):
        PersistentNode(zk_client, "/pn/m-", mode=CreateMode.EPHEMERAL_SEQUENTIAL, protected=False)
    node = PersistentNode(zk_client, "/pn/m-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)
    assert node.protected is True
    assert PersistentNode(zk_client, "/pn/fixed").protected is False
