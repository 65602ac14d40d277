"""ZkClient.transaction(): all or nothing, results per operation, and a lost reply answered right.

The lost-reply tests go through a proxy: ``drop_replies`` lets the multi
reach the server and drops its answer (applied, reply lost);
``blackhole`` drops the request itself (not applied). A protected create
tells the two apart; without one the outcome is reported unknown.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from zk_recipes import (
    BadVersionError,
    ConfigurationError,
    CreateMode,
    CreateResult,
    NodeExistsError,
    RecipeUsageError,
    TransactionFailedError,
    TransactionOutcomeUnknown,
    ZkClient,
)
from zk_recipes.testing import TcpProxy, ZooKeeperServer, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_every_operation_applies_and_each_has_its_result(zk_client: ZkClient) -> None:
    zk_client.create("/tx/config", b"v1", parents=True)
    zk_client.create("/tx/old")
    with zk_client.transaction() as tx:
        tx.check("/tx/config", version=0)
        tx.create("/tx/job-", b"j", mode=CreateMode.PERSISTENT_SEQUENTIAL)
        tx.create("/tx/eph", b"e", mode=CreateMode.EPHEMERAL)
        tx.set("/tx/config", b"v2", version=0)
        tx.delete("/tx/old")
    assert tx.results is not None
    check, job, eph, stat, deleted = tx.results
    assert check is None
    assert deleted is None
    assert isinstance(job, CreateResult)
    assert job.path == "/tx/job-0000000002"  # in the namespace; 2 children came before
    assert job.stat.data_length == 1  # create2: the stat comes back (kazoo's reads none)
    assert isinstance(eph, CreateResult)
    assert eph.stat.ephemeral_owner == zk_client.session_id
    assert stat is not None
    assert stat.version == 1  # type: ignore[union-attr]
    assert zk_client.get("/tx/config")[0] == b"v2"
    assert zk_client.exists("/tx/old") is None


def test_a_failing_operation_applies_nothing_and_is_named(zk_client: ZkClient) -> None:
    zk_client.create("/tx2/a", parents=True)
    tx = zk_client.transaction().create("/tx2/new").check("/tx2/a", version=5).delete("/tx2/a")
    with pytest.raises(TransactionFailedError) as failed:
        tx.commit()
    assert failed.value.index == 1
    assert failed.value.operation == "check /tx2/a"
    assert isinstance(failed.value.cause, BadVersionError)
    assert "operation 2 of 3 (check /tx2/a) failed, so none was applied" in str(failed.value)
    assert zk_client.exists("/tx2/new") is None  # rolled back
    assert zk_client.exists("/tx2/a") is not None
    with pytest.raises(TransactionFailedError) as exists:
        zk_client.transaction().create("/tx2/a").commit()
    assert isinstance(exists.value.cause, NodeExistsError)


def test_a_with_block_that_raises_sends_nothing_and_misuse_is_refused(zk_client: ZkClient) -> None:
    def failing_block() -> None:
        with zk_client.transaction() as tx:
            tx.create("/never")
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        failing_block()
    assert zk_client.exists("/never") is None
    assert zk_client.transaction().commit() == []
    done = zk_client.transaction().create("/once")
    done.commit()
    with pytest.raises(RecipeUsageError, match="committed already"):
        done.commit()
    with pytest.raises(RecipeUsageError, match="committed already"):
        done.delete("/once")
    with pytest.raises(ConfigurationError, match="version must be"):
        zk_client.transaction().check("/once", version=-5)


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def _commit_in_background(tx: object) -> tuple[threading.Thread, list[object]]:
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(tx.commit())  # type: ignore[attr-defined]
        except Exception as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@pytest.mark.parametrize("protected", [True, False])
def test_a_lost_reply_is_recovered_with_a_protected_create_else_reported_unknown(
    protected: bool, zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=3.0)
    checker = zk_client_factory()
    client.create("/tx3")
    tx = client.transaction().create("/tx3/marker", protected=protected).create("/tx3/data")
    proxied.drop_replies()  # the multi reaches the server; its reply does not come back
    thread, outcome = _commit_in_background(tx)
    wait_until(lambda: checker.exists("/tx3/data") is not None, "applied on the server")
    wait_until(lambda: not client.state or not client.state.is_connected, "the client noticed")
    proxied.heal()
    thread.join(30)
    if protected:
        results = outcome[0]
        assert isinstance(results, list), outcome
        assert tx.recovered
        assert isinstance(results[0], CreateResult)
        assert results[0].path.startswith("/tx3/_c_")
        assert results[1] is None  # not readable back: said so, not guessed
        assert checker.get_children("/tx3").count("data") == 1  # not applied twice
    else:
        assert isinstance(outcome[0], TransactionOutcomeUnknown), outcome


def test_a_request_lost_on_the_way_is_sent_again_once(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=3.0)
    checker = zk_client_factory()
    client.create("/tx4")
    tx = client.transaction().create("/tx4/marker", protected=True).create("/tx4/data")
    proxied.blackhole()  # nothing reaches the server
    thread, outcome = _commit_in_background(tx)
    wait_until(lambda: not client.state or not client.state.is_connected, "the client noticed")
    assert checker.exists("/tx4/data") is None
    proxied.heal()
    thread.join(30)
    results = outcome[0]
    assert isinstance(results, list), outcome
    assert not tx.recovered  # applied by the second send, with its own results
    assert isinstance(results[1], CreateResult)
    assert checker.exists("/tx4/data") is not None
