"""ZkClient against a real ZooKeeper: lifecycle, requests, helpers, bad input."""

from __future__ import annotations

import os
import threading
import time
import warnings

import pytest

from zk_recipes import (
    CREATOR_ALL_ACL,
    READ_ACL_UNSAFE,
    BadVersionError,
    ClientStateError,
    ConfigurationError,
    ConnectionState,
    ConnectTimeoutError,
    CreateMode,
    DataTooLargeError,
    InvalidPathError,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    WatchEvent,
    WatchEventType,
    ZkClient,
)
from zk_recipes._paths import is_protected_name, strip_protection
from zk_recipes.testing import (
    StateRecorder,
    ZooKeeperServer,
    expire_session_locally,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory


def test_start_close_idempotent_and_context_manager(zk_hosts: str) -> None:
    client = ZkClient(zk_hosts, session_timeout=3.0)
    assert "not started" in repr(client)
    with pytest.raises(ClientStateError, match="not started"):
        client.exists("/")
    assert client.start() is client
    assert client.start() is client  # idempotent
    assert client.state is ConnectionState.CONNECTED
    assert client.session_id != 0
    assert client.negotiated_session_timeout == pytest.approx(3.0)
    assert "CONNECTED" in repr(client)
    client.close()
    client.close()  # idempotent
    assert "closed" in repr(client)
    with pytest.raises(ClientStateError, match="closed"):
        client.exists("/")
    reopened = ZkClient(settings=client.settings)
    reopened.close()  # closing a never-started client is fine, and final
    with pytest.raises(ClientStateError, match="closed"):
        reopened.start()


def test_namespace_is_created_lazily_and_paths_are_relative(
    zk_client_factory: ClientFactory, zk_hosts: str, zk_namespace: str
) -> None:
    namespace = zk_namespace + "/lazy"
    client = zk_client_factory(namespace=namespace)
    assert client.exists("/") is None  # nothing made before the first write
    created = client.create("/a", b"data")
    assert created.path == "/a"
    assert created.stat.czxid > 0
    assert client.get("/a")[0] == b"data"
    assert client.get_children("/") == ["a"]
    with ZkClient(zk_hosts) as raw:
        assert raw.get(namespace + "/a")[0] == b"data"
        assert raw.exists(namespace).ephemeral_owner == 0  # type: ignore[union-attr]


def test_basic_requests_and_errors(zk_client: ZkClient) -> None:
    with pytest.raises(NoNodeError, match="parents=True") as no_parent:
        zk_client.create("/missing/child")
    assert no_parent.value.path == "/missing/child"
    zk_client.create("/n", b"1", parents=True)
    with pytest.raises(NodeExistsError):
        zk_client.create("/n")
    stat = zk_client.set("/n", b"2")
    assert stat.version == 1
    with pytest.raises(BadVersionError, match=r"changed since"):
        zk_client.set("/n", b"3", version=0)
    zk_client.delete("/n")
    zk_client.delete("/n")  # a missing node is not an error
    assert zk_client.exists("/n") is None
    zk_client.create("/tree/a/b", parents=True)
    zk_client.delete("/tree", recursive=True)
    assert zk_client.exists("/tree") is None


def test_default_data_is_empty_never_the_host_ip(zk_client: ZkClient) -> None:
    zk_client.create("/empty", parents=True)
    zk_client.ensure_path("/dir/sub")
    assert zk_client.get("/empty")[0] == b""
    assert zk_client.get("/dir")[0] == b""


def test_sequential_and_ephemeral_modes(zk_client: ZkClient) -> None:
    first = zk_client.create("/q/item-", mode=CreateMode.PERSISTENT_SEQUENTIAL, parents=True)
    second = zk_client.create("/q/item-", mode=CreateMode.EPHEMERAL_SEQUENTIAL)
    assert first.path == "/q/item-0000000000"
    assert second.path == "/q/item-0000000001"
    assert second.stat.ephemeral_owner == zk_client.session_id
    assert second.stat.czxid > first.stat.czxid  # czxid: the fencing token


def test_close_deletes_our_ephemeral_nodes_at_once(
    zk_client_factory: ClientFactory,
) -> None:
    owner = zk_client_factory(session_timeout=10.0)
    observer = zk_client_factory()
    owner.create("/e/node", mode=CreateMode.EPHEMERAL, parents=True)
    gone = threading.Event()

    def watch(event: WatchEvent) -> None:
        if event.type is WatchEventType.DELETED:
            gone.set()

    assert observer.exists("/e/node", watch=watch) is not None
    started = time.monotonic()
    owner.close()
    assert gone.wait(1.0), "ephemeral node outlived close() by more than 1 s"
    assert time.monotonic() - started < 1.0
    assert observer.exists("/e/node") is None


def test_watch_paths_are_relative_to_the_namespace(zk_client: ZkClient) -> None:
    zk_client.create("/w", parents=True)
    events: list[WatchEvent] = []
    fired = threading.Event()

    def watch(event: WatchEvent) -> None:
        events.append(event)
        fired.set()

    zk_client.get("/w", watch=watch)
    zk_client.set("/w", b"x")
    assert fired.wait(5)
    assert events == [WatchEvent(WatchEventType.CHANGED, "/w")]


def test_container_parents_are_reaped_once_empty(zk_client: ZkClient) -> None:
    created = zk_client.create("/c1/c2/leaf", mode=CreateMode.EPHEMERAL, parents=True)
    assert zk_client.exists("/c1/c2") is not None
    zk_client.delete(created.path)
    # The harness checks containers every 100 ms.
    wait_until(lambda: zk_client.exists("/c1") is None, "container reaped")


def test_ttl_nodes_expire(zk_client: ZkClient) -> None:
    zk_client.create("/ttl", mode=CreateMode.PERSISTENT_WITH_TTL, ttl=0.3, parents=True)
    seq = zk_client.create("/ttl-seq-", mode=CreateMode.PERSISTENT_SEQUENTIAL_WITH_TTL, ttl=0.3)
    assert seq.path.startswith("/ttl-seq-")
    assert zk_client.exists("/ttl") is not None
    wait_until(  # the server reaps on its own schedule, later on a busy machine
        lambda: zk_client.exists("/ttl") is None and zk_client.exists(seq.path) is None,
        "TTL nodes reaped",
        timeout=30,
    )
    with pytest.raises(ValueError, match="ttl"):
        zk_client.create("/ttl2", mode=CreateMode.PERSISTENT_WITH_TTL)
    with pytest.raises(ValueError, match="ttl"):
        zk_client.create("/ttl3", ttl=1.0)


def test_protected_create_uses_curator_names(zk_client: ZkClient) -> None:
    created = zk_client.create(
        "/locks/x/lock-", mode=CreateMode.EPHEMERAL_SEQUENTIAL, parents=True, protected=True
    )
    name = created.path.rsplit("/", 1)[1]
    assert is_protected_name(name)
    assert strip_protection(name) == "lock-0000000000"
    assert zk_client.get_children("/locks/x") == [name]


def test_replace_stale_ephemeral_from_our_previous_session(zk_client: ZkClient) -> None:
    recorder = StateRecorder()
    zk_client.add_listener(recorder)
    zk_client.create("/member", b"old", mode=CreateMode.EPHEMERAL, parents=True)
    old_session = zk_client.session_id
    # Client-side expiry: we get a new session, the server still holds the old one.
    expire_session_locally(zk_client)
    recorder.wait_for(ConnectionState.LOST)
    recorder.wait_for(ConnectionState.RECONNECTED)
    assert zk_client.session_id != old_session
    stat = zk_client.exists("/member")
    assert stat is not None
    assert stat.ephemeral_owner == old_session
    with pytest.raises(NodeExistsError):
        zk_client.create("/member", b"new", mode=CreateMode.EPHEMERAL)
    created = zk_client.create("/member", b"new", mode=CreateMode.EPHEMERAL, replace_stale=True)
    assert created.stat.ephemeral_owner == zk_client.session_id
    assert zk_client.get("/member")[0] == b"new"


def test_guaranteed_delete_of_unreachable_node_is_a_no_op_when_gone(zk_client: ZkClient) -> None:
    zk_client.delete("/never-existed", guaranteed=True)
    assert zk_client.pending_deletes() == []


# ---------------------------------------------------------------- bad input


def test_unreachable_ensemble_fails_in_about_the_timeout() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nobody listens here once closed
    client = ZkClient(f"127.0.0.1:{port}")
    started = time.monotonic()
    with pytest.raises(ConnectTimeoutError, match=r"127\.0\.0\.1:\d+ within 2 s"):
        client.start(timeout=2)
    elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 4.0
    client.close()


def test_concurrent_starts_all_return_connected(zk_hosts: str) -> None:
    client = ZkClient(zk_hosts)
    barrier = threading.Barrier(4)
    outcomes: list[object] = []

    def start() -> None:
        barrier.wait()
        client.start(timeout=10)
        outcomes.append(client.state)  # a start that returned early would see None/CONNECTING

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    client.close()
    assert outcomes == [ConnectionState.CONNECTED] * 4


def test_close_during_start_leaves_no_session(zk_server: ZooKeeperServer, zk_hosts: str) -> None:
    """A close() racing a start() (a process client shut down while it connects) wins."""
    baseline = zk_server.connected_session_ids()
    outcomes: list[str] = []
    for delay in [0.0] * 12 + [0.001, 0.002, 0.005, 0.01, 0.02, 0.05]:
        client = ZkClient(zk_hosts, connection_timeout=10.0)

        def start(client: ZkClient = client) -> None:
            try:
                client.start()
                outcomes.append("started")
            except ClientStateError:
                outcomes.append("closed while starting")

        starter = threading.Thread(target=start)
        starter.start()
        time.sleep(delay)
        client.close()
        starter.join(15)
        assert not starter.is_alive()
        assert client.is_closed
    print(sorted(set(outcomes)))
    assert len(outcomes) == 18
    deadline = time.monotonic() + 5.0
    while zk_server.connected_session_ids() - baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert zk_server.connected_session_ids() - baseline == set(), "a session outlived close()"


def test_concurrent_starts_against_an_unreachable_ensemble_all_time_out() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ZkClient(f"127.0.0.1:{port}")
    errors: list[BaseException] = []

    def start() -> None:
        try:
            client.start(timeout=1.5)
        except ConnectTimeoutError as exc:
            errors.append(exc)

    started = time.monotonic()
    threads = [threading.Thread(target=start) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    elapsed = time.monotonic() - started
    client.close()
    assert len(errors) == 3
    assert elapsed < 6.0, "a waiting start must stay within its own timeout"


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), "3"])
def test_bad_start_timeouts(timeout: object) -> None:
    with pytest.raises(ValueError, match="positive number"):
        ZkClient("127.0.0.1:1").start(timeout=timeout)  # type: ignore[arg-type]


def test_bad_requests_fail_before_sending(zk_client: ZkClient) -> None:
    with pytest.raises(InvalidPathError):
        zk_client.create("no-slash")
    with pytest.raises(InvalidPathError):
        zk_client.get("/a/")
    with pytest.raises(InvalidPathError, match="reserved"):
        zk_client.create("/zookeeper/mine")
    with pytest.raises(DataTooLargeError, match=r"jute\.maxbuffer"):
        zk_client.create("/big", b"x" * (1024 * 1024 + 1), parents=True)
    with pytest.raises(TypeError, match="bytes"):
        zk_client.create("/text", "text", parents=True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="replace_stale"):
        zk_client.create("/p", replace_stale=True)
    assert zk_client.exists("/big") is None


def test_missing_hosts_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match="needs hosts"):
        ZkClient()


# ---------------------------------------------------------------- fork


def test_use_after_fork_raises_and_close_in_child_spares_the_parent(
    zk_client: ZkClient,
) -> None:
    zk_client.create("/forked", mode=CreateMode.EPHEMERAL, parents=True)
    session = zk_client.session_id
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12: fork with threads
        pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            zk_client.exists("/forked")
        except ClientStateError as exc:
            code = 0 if "fork()" in str(exc) else 2
        zk_client.close()  # must not close the parent's session
        os.write(write, bytes([code]))
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"\x00"
    os.close(read)
    assert status == 0
    assert zk_client.session_id == session
    assert zk_client.exists("/forked") is not None


# ---------------------------------------------------------------- listeners


def test_a_slow_listener_delays_neither_other_listeners_nor_watches(
    zk_client: ZkClient,
) -> None:
    release = threading.Event()
    slow_calls: list[ConnectionState] = []

    def slow(change: object) -> None:
        slow_calls.append(change.state)  # type: ignore[attr-defined]
        release.wait(5)  # "a listener that sleeps 5 s"

    fast = StateRecorder()
    zk_client.add_listener(slow)
    zk_client.add_listener(fast)
    zk_client.create("/watched", parents=True)
    try:
        expire_session_locally(zk_client)  # SUSPENDED, LOST, RECONNECTED
        lost = fast.wait_for(ConnectionState.LOST, timeout=5)
        reconnected = fast.wait_for(ConnectionState.RECONNECTED, timeout=5)
        assert reconnected.at >= lost.at
        wait_until(lambda: slow_calls, "the slow listener called", 5)
        assert slow_calls == [ConnectionState.SUSPENDED]  # still stuck in its first call
        # A data watch fires while the slow listener is still blocked.
        fired = threading.Event()
        zk_client.get("/watched", watch=lambda e: fired.set())
        zk_client.set("/watched", b"x")
        assert fired.wait(1.0)
        assert not release.is_set()
    finally:
        release.set()
    expected = [ConnectionState.SUSPENDED, ConnectionState.LOST, ConnectionState.RECONNECTED]
    wait_until(lambda: slow_calls == expected, "every change delivered", 5)


def test_listener_order_is_preserved(zk_client: ZkClient) -> None:
    recorder = StateRecorder()
    zk_client.add_listener(recorder)
    for _ in range(3):
        mark = recorder.mark()
        expire_session_locally(zk_client)
        recorder.wait_for(ConnectionState.RECONNECTED, after=mark)
    assert (
        recorder.states
        == [
            ConnectionState.SUSPENDED,
            ConnectionState.LOST,
            ConnectionState.RECONNECTED,
        ]
        * 3
    )
    sessions = [c.session_id for c in recorder.changes if c.state is ConnectionState.RECONNECTED]
    assert len(set(sessions)) == 3


def test_start_against_a_server_that_is_down_then_up(tmp_path: object) -> None:
    with ZooKeeperServer() as server:
        hosts = server.connect_string
        server.stop()
        with pytest.raises(ConnectTimeoutError):
            ZkClient(hosts).start(timeout=1)
        server.start()
        with ZkClient(hosts) as client:
            assert client.state is ConnectionState.CONNECTED


# ---------------------------------------------------------------- auth and ACLs


def test_digest_auth_with_a_creator_only_default_acl(zk_client_factory: ClientFactory) -> None:
    owner = zk_client_factory(auth=[("digest", "app:secret")], default_acl=CREATOR_ALL_ACL)
    stranger = zk_client_factory()
    owner.create("/private/lock", b"mine", parents=True)
    assert stranger.exists("/private/lock") is not None  # stat is not protected
    with pytest.raises(NoAuthError):
        stranger.get("/private/lock")
    with pytest.raises(NoAuthError):
        stranger.set("/private/lock", b"theirs")
    with pytest.raises(NoAuthError):
        stranger.delete("/private/lock/child-that-is-not-there")  # parent's ACL applies
    assert owner.get("/private/lock")[0] == b"mine"
    friend = zk_client_factory(auth=[("digest", "app:secret")])
    assert friend.get("/private/lock")[0] == b"mine"


def test_explicit_acl_on_create(zk_client_factory: ClientFactory) -> None:
    owner = zk_client_factory()
    reader = zk_client_factory()
    owner.create("/ro", b"x", parents=True, acl=READ_ACL_UNSAFE)
    assert reader.get("/ro")[0] == b"x"
    with pytest.raises(NoAuthError):
        reader.set("/ro", b"y")
    with pytest.raises(NoAuthError):
        owner.set("/ro", b"y")
