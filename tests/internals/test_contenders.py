"""The contender queue and the create protocol under it: no orphan, no wrap, no spin.

Sequence wrap, an orphan contender after a failed read, a protected create
reusing its id after a dead session's node, and a re-read that spins: each a
way to two holders or a stuck queue, against a real server.
"""

from __future__ import annotations

import logging
import time

import pytest

from tests.containers import children_of
from zk_recipes import (
    Acl,
    CreateMode,
    Lock,
    NoAuthError,
    Perms,
    SequenceOverflowError,
    SessionLost,
    ZkClient,
    digest_acl,
)
from zk_recipes._internals.contenders import NEAR_WRAP, ContenderQueue, Entry, sequence_of
from zk_recipes._internals.patience import Expired, patient
from zk_recipes._paths import protected_prefix
from zk_recipes.testing.pytest_plugin import ClientFactory


def _entry(client: ZkClient, path: str) -> Entry:
    stat = client.exists(path)
    assert stat is not None
    return Entry(
        path,
        path.rsplit("/", 1)[1],
        stat.czxid,
        stat.ephemeral_owner,
        client.session_epoch(stat.ephemeral_owner),
    )


def test_sequence_numbers_are_read_like_curator_sorts_them() -> None:
    tokens = ("lock-",)
    assert sequence_of("_c_0e5c1f9a-4f2b-4d7b-9a51-6f1f2c3d4e5f-lock-0000000042", tokens) == 42
    assert sequence_of("_c_x-lock--2147483648", tokens) == -2147483648
    assert sequence_of("foreign-node", tokens) is None
    assert sequence_of("_c_x-lock-notanumber", tokens) is None


def test_a_wrapped_sequence_is_refused_and_its_node_deleted(
    zk_client: ZkClient, caplog: pytest.LogCaptureFixture
) -> None:
    # ZooKeeper's counter cannot be driven past 2**31 in a test; a node named as
    # the first one after the wrap is what entering would have created.
    queue = ContenderQueue(zk_client, "/wrapped", "lock-")
    name = protected_prefix("0e5c1f9a-4f2b-4d7b-9a51-6f1f2c3d4e5f") + "lock--2147483648"
    zk_client.create(f"/wrapped/{name}", mode=CreateMode.EPHEMERAL, parents=True)
    with pytest.raises(SequenceOverflowError, match=r"wrapped around.*deleteall"):
        queue._check_sequence(_entry(zk_client, f"/wrapped/{name}"))
    assert children_of(zk_client, "/wrapped") == []
    # Near the wrap: a loud warning, once per queue, and the node stays.
    near = protected_prefix("1e5c1f9a-4f2b-4d7b-9a51-6f1f2c3d4e5f") + f"lock-{NEAR_WRAP + 5:010d}"
    zk_client.create(f"/wrapped/{near}", mode=CreateMode.EPHEMERAL)
    with caplog.at_level(logging.WARNING, logger="zk_recipes.contenders"):
        queue._check_sequence(_entry(zk_client, f"/wrapped/{near}"))
        queue._check_sequence(_entry(zk_client, f"/wrapped/{near}"))
    warnings = [r for r in caplog.records if "near the 32-bit wrap" in r.getMessage()]
    assert len(warnings) == 1
    assert zk_client.get_children("/wrapped") == [near]


def test_a_queue_that_cannot_be_read_leaves_no_node_behind(
    zk_client_factory: ClientFactory,
) -> None:
    # The directory lets anyone create and delete in it, but only the admin read it:
    # the create pipelined with the read succeeds, the read fails with NoAuth.
    admin = zk_client_factory(auth=(("digest", "admin:secret"),))
    admin.create(
        "/write-only",
        acl=(
            Acl(Perms.CREATE | Perms.DELETE, "world", "anyone"),
            digest_acl("admin", "secret"),
        ),
    )
    client = zk_client_factory()
    lock = Lock(client, "/write-only")
    with pytest.raises(NoAuthError):
        lock.acquire(timeout=3)
    client.wait_for_deletes(5)
    assert children_of(admin, "/write-only") == [], "a contender of our live session was left"


def test_a_protected_retry_never_reuses_an_id_after_a_dead_sessions_node(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()
    elsewhere = zk_client_factory()
    client.ensure_path("/protected")
    prefix = protected_prefix("2e5c1f9a-4f2b-4d7b-9a51-6f1f2c3d4e5f")
    # A node with our prefix, owned by a session that is not this client's live one:
    # what an attempt of ours leaves when its reply was lost with the session.
    elsewhere.create(f"/protected/{prefix}lock-", mode=CreateMode.EPHEMERAL)
    creator = client._creator
    prefixes = [prefix]
    parent = client._abs("/protected")
    assert creator._ours(parent, prefixes, CreateMode.EPHEMERAL_SEQUENTIAL) is None
    assert len(prefixes) == 2, "the next create must use a fresh protected id"
    assert prefixes[1] != prefix
    client.wait_for_deletes(5)
    assert children_of(client, "/protected") == []
    # A match of our own live session is ours: nothing is created twice.
    mine = client.create(f"/protected/{prefixes[1]}lock-", mode=CreateMode.EPHEMERAL)
    found = creator._ours(parent, prefixes, CreateMode.EPHEMERAL_SEQUENTIAL)
    assert found is not None
    assert found.path == mine.path


def test_riding_out_failures_never_spins(zk_client: ZkClient) -> None:
    calls = 0

    def send(limit: float) -> None:
        nonlocal calls
        calls += 1
        raise SessionLost("kazoo between two sessions")

    started = time.monotonic()
    with pytest.raises(Expired):
        patient(zk_client, time.monotonic() + 1.0, send)
    assert time.monotonic() - started < 2.0
    assert calls < 15, f"{calls} tries in 1 s: the loop spins"
