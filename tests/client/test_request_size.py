"""Requests over the server's limit are refused before they are sent (issue 23, item 4).

A request packet longer than the server's ``jute.maxbuffer`` (0xfffff bytes by
default, counted from the xid on: xid, type and body) makes the server close
the connection without an answer. Sent anyway, a 2 MB lock name flapped the
process's one session SUSPENDED on every try, a ``timeout=5`` acquire ended as
a misleading LockTimeout and a ``timeout=None`` one never ended. Every
request passes the adapter's one send path, which checks its size: these
tests show the refusal is at once, names the path and the limit, and leaves
the session alone; and that the client counts as the server does (a request
of exactly the limit is served, one byte more is dropped).
"""

from __future__ import annotations

import threading

import pytest

from zk_recipes import (
    Acl,
    ConnectionLostError,
    ConnectionState,
    CreateMode,
    DataTooLargeError,
    Lock,
    NoNodeError,
    Perms,
    Semaphore,
    ZkClient,
    ZkTimeoutError,
)
from zk_recipes._paths import DEFAULT_MAX_DATA_BYTES, max_request_bytes
from zk_recipes.testing import StateRecorder
from zk_recipes.testing.pytest_plugin import ClientFactory

NAME_2MB = "n" * (2 << 20)
#: ZooKeeper's default jute.maxbuffer: the longest request the test server reads.
JUTE_MAXBUFFER = 0xFFFFF


def _refused_at_once(call: object) -> DataTooLargeError:
    """Run ``call`` on a thread; it must raise DataTooLargeError (a generous bound: no hang)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()  # type: ignore[operator]
        except BaseException as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10.0)
    assert not thread.is_alive(), "the oversized request hung instead of being refused"
    assert isinstance(outcome[0], DataTooLargeError), outcome[0]
    return outcome[0]


def _create_packet_size(path: str, data: int, acl_bytes: int = 27) -> int:
    """A create's length as the server reads it: xid, type, path, data, ACL vector, flags.

    ``acl_bytes`` is the ACL vector's: 27 for world:anyone alone (count, perms, two strings).
    """
    return 4 + 4 + (4 + len(path.encode())) + (4 + data) + acl_bytes + 4


def test_the_default_limit_is_the_servers_default_jute_maxbuffer() -> None:
    assert max_request_bytes(DEFAULT_MAX_DATA_BYTES) == JUTE_MAXBUFFER


def test_a_2mb_lock_name_is_refused_at_once_and_the_session_never_flaps(
    zk_client: ZkClient,
) -> None:
    recorder = StateRecorder()
    zk_client.add_listener(recorder)
    session = zk_client.session_id
    lock = Lock(zk_client, "/locks/" + NAME_2MB)

    error = _refused_at_once(lambda: lock.acquire(timeout=None))

    message = str(error)
    assert "/locks/nnnn" in message  # the path, shortened
    assert "characters)" in message
    assert len(message) < 600
    assert f"{JUTE_MAXBUFFER:,} bytes" in message
    assert "jute.maxbuffer" in message
    assert "max_data_bytes" in message  # how to raise it with the servers'
    assert not lock.is_held()
    # Nothing was sent: the connection never dropped, the session is the same one.
    zk_client.sync()
    assert recorder.states == []
    assert zk_client.state is ConnectionState.CONNECTED
    assert zk_client.session_id == session
    assert zk_client.get_children("/") == []


def test_with_a_timeout_it_is_the_size_error_not_a_lock_timeout(zk_client: ZkClient) -> None:
    error = _refused_at_once(lambda: Lock(zk_client, "/locks/" + NAME_2MB).acquire(timeout=5))
    assert not isinstance(error, ZkTimeoutError)


def test_every_recipe_gets_the_check(zk_client: ZkClient) -> None:
    recorder = StateRecorder()
    zk_client.add_listener(recorder)
    _refused_at_once(lambda: Semaphore(zk_client, "/leases/" + NAME_2MB, 2).acquire())
    _refused_at_once(lambda: zk_client.exists("/" + NAME_2MB))
    zk_client.sync()
    assert recorder.states == []


def test_a_multi_over_the_limit_is_refused_though_its_data_fits(zk_client: ZkClient) -> None:
    # The data alone passes max_data_bytes; with the two paths the multi is over.
    data = b"x" * zk_client.settings.max_data_bytes
    zk_client.create("/check")
    error = _refused_at_once(
        lambda: zk_client.check_and_create(
            "/check", "/" + "p" * 1100, data, mode=CreateMode.PERSISTENT
        )
    )
    assert "multi request" in str(error)
    assert zk_client.get_children("/") == ["check"]


def test_a_create_whose_acl_list_makes_it_too_large_is_refused(zk_client: ZkClient) -> None:
    data = b"x" * zk_client.settings.max_data_bytes
    acl = (
        Acl(Perms.ALL, "world", "anyone"),
        *(Acl(Perms.READ, "ip", f"10.0.{n // 250}.{n % 250}") for n in range(60)),
    )
    error = _refused_at_once(lambda: zk_client.create("/n", data, acl=acl))
    assert "create request for" in str(error)
    with pytest.raises(NoNodeError):
        zk_client.get("/n")


def test_the_client_counts_as_the_server_does(zk_client_factory: ClientFactory) -> None:
    """Exactly the limit is served; one byte more is refused here, and dropped by the server."""
    client = zk_client_factory()
    data = client.settings.max_data_bytes
    prefix = client.namespace + "/"
    room = JUTE_MAXBUFFER - _create_packet_size(prefix, data)
    at_limit = "/" + "a" * room
    assert _create_packet_size(client.namespace + at_limit, data) == JUTE_MAXBUFFER
    client.create(at_limit, b"x" * data)
    assert client.exists(at_limit) is not None

    over = "/" + "b" * (room + 1)
    error = _refused_at_once(lambda: client.create(over, b"x" * data))
    assert f"is {JUTE_MAXBUFFER + 1:,} bytes" in str(error)

    # A client told the servers take one byte more sends it: the server drops it.
    lax = zk_client_factory(max_data_bytes=DEFAULT_MAX_DATA_BYTES + 1)
    recorder = StateRecorder()
    lax.add_listener(recorder)
    with pytest.raises(ConnectionLostError):
        lax.create(over, b"x" * data, retry=False)
    recorder.wait_for(ConnectionState.SUSPENDED)
