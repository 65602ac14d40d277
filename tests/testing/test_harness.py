"""The test harness itself, against real ZooKeeper JVMs, with raw kazoo clients.

One single server and one 3-node ensemble serve the whole module; every
test that breaks a server leaves it running again (the ``server``/``cluster``
fixtures check that after each test). Waits are on events with deadlines.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.retry import KazooRetry
from mirakuru.base import ENV_UUID
from mirakuru.base_env import processes_with_env

from zk_recipes import ConfigurationError
from zk_recipes.testing import (
    ClusterMember,
    HarnessError,
    JavaNotFoundError,
    TcpProxy,
    ZooKeeperCluster,
    ZooKeeperNotFoundError,
    ZooKeeperServer,
    expire_session,
    expire_session_locally,
    find_installation,
    four_letter_word,
    free_ports,
    proxied_connect_string,
)
from zk_recipes.testing._install import DEBIAN_ZOOKEEPER_JAR

# -- helpers ---------------------------------------------------------------------------------


class StateLog:
    """Every KazooState a client went through; ``wait_for`` blocks until one shows up."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.states: list[str] = []

    def __call__(self, state: str) -> None:  # runs on kazoo's connection thread: no blocking
        with self._cond:
            self.states.append(state)
            self._cond.notify_all()

    def mark(self) -> int:
        with self._cond:
            return len(self.states)

    def wait_for(self, state: str, timeout: float, *, after: int = 0) -> float:
        """Seconds until ``state`` appeared at an index >= ``after``."""
        start = time.monotonic()
        with self._cond:
            if not self._cond.wait_for(lambda: state in self.states[after:], timeout):
                raise AssertionError(f"no {state} within {timeout} s; saw {self.states}")
        return time.monotonic() - start

    def wait_for_new_session(self, timeout: float, *, after: int) -> None:
        """LOST at an index >= ``after``, then CONNECTED after that."""
        self.wait_for(KazooState.LOST, timeout, after=after)
        with self._cond:
            lost_at = self.states.index(KazooState.LOST, after)
        self.wait_for(KazooState.CONNECTED, timeout, after=lost_at)


@dataclass
class Client:
    kz: Any
    states: StateLog

    @property
    def session_id(self) -> int:
        client_id = self.kz.client_id
        assert client_id is not None, "not connected"
        return int(client_id[0])

    def wait_connected(self, timeout: float, *, after: int = 0) -> float:
        return self.states.wait_for(KazooState.CONNECTED, timeout, after=after)


@dataclass
class WrappedClient:
    """Shaped like zk-recipes' ZkClient as far as the fault helpers care."""

    kazoo_client: Any
    connect_string: str

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        client_id: tuple[int, bytes] | None = self.kazoo_client.client_id
        return client_id


ClientFactory = Callable[..., Client]


@pytest.fixture
def make_client() -> Iterator[ClientFactory]:
    made: list[Any] = []

    def make(hosts: str, session_timeout: float = 10.0) -> Client:
        kz = KazooClient(
            hosts=hosts,
            timeout=session_timeout,
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=1.5, max_delay=0.3),
        )
        made.append(kz)
        states = StateLog()
        kz.add_listener(states)
        kz.start(timeout=15)
        return Client(kz, states)

    yield make
    for kz in made:
        kz.stop()
        kz.close()


def negotiated_timeout_ms(server: ZooKeeperServer, session_id: int) -> int:
    for line in server.four_letter("cons").splitlines():
        if f"sid=0x{session_id:x}," in line:
            match = re.search(r"\bto=(\d+)", line)
            assert match is not None, line
            return int(match.group(1))
    raise AssertionError(f"session 0x{session_id:x} not connected to {server!r}")


def eventually(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.02)


# -- single server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as server:
        yield server
    assert not server.directory.exists(), "close() must remove the temp dir"


@pytest.fixture
def server(shared_server: ZooKeeperServer) -> Iterator[ZooKeeperServer]:
    yield shared_server
    shared_server.start()  # resumes or restarts it if a test left it down


def test_single_server_serves_with_short_sessions(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    assert server.connect_string == f"127.0.0.1:{server.port}"
    assert server.host == "127.0.0.1"
    assert server.four_letter("ruok") == "imok"
    assert server.mode() == "leader"  # a quorum of one, see ZooKeeperServer
    assert server.is_running
    assert not server.is_paused
    assert server.log_path.parent == server.directory
    if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        assert server.directory.parent == Path("/dev/shm")

    client = make_client(server.connect_string, session_timeout=2.0)
    assert negotiated_timeout_ms(server, client.session_id) == 2000
    assert client.session_id in server.session_ids()
    assert client.session_id in server.connected_session_ids()
    client.kz.create("/basics", b"hello")
    assert client.kz.get("/basics")[0] == b"hello"

    tiny = make_client(server.connect_string, session_timeout=0.1)
    assert negotiated_timeout_ms(server, tiny.session_id) == 400  # minSessionTimeout


def test_restart_keeps_data_and_sessions(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    client = make_client(server.connect_string, session_timeout=10.0)
    session_id, port = client.session_id, server.port
    client.kz.create("/restart-data", b"kept")
    client.kz.create("/restart-ephemeral", ephemeral=True)
    mark = client.states.mark()

    server.restart()

    assert server.port == port
    client.states.wait_for(KazooState.SUSPENDED, 5.0, after=mark)
    client.wait_connected(15.0, after=mark)
    assert KazooState.LOST not in client.states.states[mark:]
    assert client.session_id == session_id
    assert client.kz.get("/restart-data")[0] == b"kept"
    assert client.kz.exists("/restart-ephemeral") is not None


def test_kill_suspends_the_client(server: ZooKeeperServer, make_client: ClientFactory) -> None:
    client = make_client(server.connect_string, session_timeout=10.0)
    mark = client.states.mark()

    server.kill()

    assert not server.is_running
    assert client.states.wait_for(KazooState.SUSPENDED, 2.0, after=mark) < 2.0
    server.start()
    client.wait_connected(15.0, after=mark)


@pytest.mark.slow
def test_clients_reconnecting_during_restarts_never_hang(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    # ZooKeeper 3.8.0's standalone mode leaves a request that arrives while it boots
    # unanswered; the default quorum-of-one does not (see ZooKeeperServer).
    client = make_client(server.connect_string, session_timeout=10.0)
    session_id = client.session_id
    for _ in range(4):
        mark = client.states.mark()
        server.kill()
        client.states.wait_for(KazooState.SUSPENDED, 2.0, after=mark)
        server.start()
        assert client.wait_connected(3.0, after=mark) < 3.0
    assert client.session_id == session_id


def test_pause_times_the_client_out_and_resume_lets_it_back(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    client = make_client(server.connect_string, session_timeout=2.0)
    mark = client.states.mark()

    server.pause()
    assert server.is_paused
    assert server.is_running
    assert not server.is_serving()
    # kazoo's read timeout is 2/3 of the session timeout, plus up to one ping interval
    assert client.states.wait_for(KazooState.SUSPENDED, 4.0, after=mark) < 4.0

    server.resume()
    server.wait_serving(5.0)
    client.wait_connected(15.0, after=mark)  # possibly on a new session: the old one timed out
    assert client.kz.exists("/") is not None


def test_stop_works_on_a_paused_server(server: ZooKeeperServer) -> None:
    server.pause()
    server.stop(timeout=5.0)
    assert not server.is_running
    assert not server.is_paused
    server.start()
    assert server.is_serving()


def test_no_exiting_process_that_imported_mirakuru_can_kill_the_server(
    server: ZooKeeperServer,
) -> None:
    """mirakuru's atexit SIGKILLs every process whose mark CONTAINS the exiting pid.

    With pids wrapping at 32768, a test subprocess whose pid appeared in the
    JVM's ``<pid>:<uuid4>`` mark killed the shared server silently mid-run.
    """
    assert server.pid is not None
    environ = Path(f"/proc/{server.pid}/environ").read_bytes().split(b"\0")
    assert not [v for v in environ if v.startswith(f"{ENV_UUID}=".encode())]
    mine = str(os.getpid())
    for exiting_pid in (mine, mine[1:], mine[:-1], "1", "2", "3"):
        assert server.pid not in processes_with_env(ENV_UUID, exiting_pid)


@pytest.mark.parametrize("listening", [False, True], ids=["bound", "listening"])
def test_start_moves_to_another_port_when_its_port_is_taken(listening: bool) -> None:
    server = ZooKeeperServer()
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", server.port))
            if listening:
                squatter.listen()
            taken = server.port
            server.start()
            assert server.port != taken
            assert server.mode() == "leader"
    finally:
        server.close()


def test_start_failures_carry_the_log_tail() -> None:
    with pytest.raises(HarnessError, match=r"(?s)exited with code \d+.*NumberFormatException"):
        ZooKeeperServer(extra_config={"tickTime": "soon"}).start()
    slow = ZooKeeperServer(start_timeout=0.05)
    with pytest.raises(HarnessError, match=r"did not serve within 0\.05 s"):
        slow.start()
    assert not slow.is_running
    slow.close()
    slow.close()
    with pytest.raises(HarnessError, match="closed"):
        slow.start()


def test_bad_options_fail_at_once() -> None:
    with pytest.raises(ConfigurationError, match="log_level"):
        ZooKeeperServer(log_level="LOUD")
    with pytest.raises(ConfigurationError, match="min_session_timeout"):
        ZooKeeperServer(min_session_timeout=10.0, max_session_timeout=5.0)
    with pytest.raises(ConfigurationError, match="ZooKeeperServer"):
        ZooKeeperCluster(size=1)


def test_given_data_dir_is_kept_and_reused(tmp_path: Path, make_client: ClientFactory) -> None:
    with ZooKeeperServer(data_dir=tmp_path) as first:
        make_client(first.connect_string).kz.create("/kept", b"on disk")
    assert (tmp_path / "data" / "version-2").is_dir()
    with ZooKeeperServer(data_dir=tmp_path) as second:
        assert make_client(second.connect_string).kz.get("/kept")[0] == b"on disk"
    assert "zookeeper.log" in os.listdir(tmp_path)


# -- installation lookup -------------------------------------------------------------------------


def test_missing_zookeeper_home_says_what_to_install(tmp_path: Path) -> None:
    environ = {"ZOOKEEPER_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    with pytest.raises(ZooKeeperNotFoundError) as info:
        find_installation(environ=environ, debian_jar=None)
    message = str(info.value)
    assert f"ZOOKEEPER_HOME={tmp_path}" in message
    assert "apt-get install -y zookeeper" in message
    assert "apache-zookeeper-3.8.x-bin" in message


def test_missing_debian_jar_says_what_to_install(tmp_path: Path) -> None:
    environ = {"PATH": os.environ.get("PATH", "")}
    with pytest.raises(ZooKeeperNotFoundError) as info:
        find_installation(environ=environ, debian_jar=tmp_path / "zookeeper.jar")
    assert "apt-get install -y zookeeper" in str(info.value)
    assert "ZOOKEEPER_HOME" in str(info.value)


def test_missing_java_says_what_to_install(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "zookeeper-3.8.4.jar").touch()
    environ = {"ZOOKEEPER_HOME": str(tmp_path), "PATH": str(tmp_path / "bin")}
    with pytest.raises(JavaNotFoundError) as info:
        find_installation(environ=environ)
    assert "apt-get install -y default-jre-headless" in str(info.value)
    assert "JAVA_HOME" in str(info.value)


def test_upstream_layout_with_logback(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("zookeeper-3.8.4.jar", "zookeeper-jute-3.8.4.jar", "logback-classic-1.2.13.jar"):
        (lib / name).touch()
    found = find_installation(environ={"ZOOKEEPER_HOME": str(tmp_path), "PATH": os.defpath})
    assert found.source == "ZOOKEEPER_HOME"
    assert found.zookeeper_jar == lib / "zookeeper-3.8.4.jar"
    assert found.uses_logback
    assert all(path.parent == lib for path in found.classpath)  # no slf4j-simple added


@pytest.mark.skipif(not DEBIAN_ZOOKEEPER_JAR.is_file(), reason="needs Debian's zookeeper jar")
def test_server_runs_from_a_zookeeper_home(tmp_path: Path) -> None:
    lib = tmp_path / "apache-zookeeper-3.8.0-bin" / "lib"
    lib.mkdir(parents=True)
    (lib / "zookeeper-3.8.0.jar").symlink_to(DEBIAN_ZOOKEEPER_JAR)
    installation = find_installation(
        environ={"ZOOKEEPER_HOME": str(lib.parent), "PATH": os.environ.get("PATH", "")}
    )
    assert installation.source == "ZOOKEEPER_HOME"
    assert any(path.name.startswith("slf4j-simple") for path in installation.classpath)
    server = ZooKeeperServer(installation=installation, log_level="INFO", standalone_mode=True)
    with server:
        assert server.mode() == "standalone"
        assert "INFO" in server.log_tail()  # slf4j-simple writes into the log file


# -- session faults ------------------------------------------------------------------------------


def test_expire_session_deletes_ephemerals_at_once(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    victim = make_client(server.connect_string, session_timeout=10.0)
    observer = make_client(server.connect_string)
    old_session = victim.session_id
    victim.kz.create("/expire-me", ephemeral=True)
    gone = threading.Event()
    assert observer.kz.exists("/expire-me", watch=lambda event: gone.set()) is not None
    mark = victim.states.mark()

    wrapped = WrappedClient(victim.kz, f"{server.connect_string}/some/namespace")
    started = time.monotonic()
    assert expire_session(wrapped) == old_session
    assert gone.wait(1.0)
    assert observer.kz.exists("/expire-me") is None
    assert time.monotonic() - started < 1.0
    # The tracker, not `cons`: the victim may already be reconnecting with the old id.
    assert old_session not in server.tracked_session_ids()

    victim.states.wait_for_new_session(10.0, after=mark)
    assert victim.session_id != old_session


def test_expire_session_locally_leaves_the_server_session(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    victim = make_client(server.connect_string, session_timeout=4.0)
    observer = make_client(server.connect_string)
    victim.kz.create("/local-expiry", ephemeral=True)
    old_id = victim.kz.client_id
    mark = victim.states.mark()

    old_session = expire_session_locally(WrappedClient(victim.kz, server.connect_string))

    assert old_session == old_id[0]
    assert victim.session_id != old_session
    assert victim.states.states[mark:][:2] == [KazooState.LOST, KazooState.CONNECTED]
    assert old_session in server.session_ids()  # the server has not heard of it
    assert observer.kz.exists("/local-expiry") is not None  # nor have other clients

    # The old session can still be expired on the server with its credentials.
    stale = SimpleNamespace(client_id=old_id, hosts=[(server.host, server.port)])
    expire_session(stale)
    assert observer.kz.exists("/local-expiry") is None


def test_expire_session_rejects_a_disconnected_client() -> None:
    kz = KazooClient(hosts="127.0.0.1:1")
    try:
        with pytest.raises(HarnessError, match="no session"):
            expire_session(kz)
    finally:
        kz.close()


# -- proxy ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_proxy_blackhole_and_heal_keep_the_session(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    with server.proxy() as proxy:
        assert proxy.connect_string == f"127.0.0.1:{proxy.port}"
        client = make_client(proxy.connect_string, session_timeout=6.0)
        session_id = client.session_id
        client.kz.create("/through-proxy", b"x")
        assert proxy.connections == 1
        assert proxy.mode == "forward"
        mark = client.states.mark()

        proxy.blackhole()
        read_timeout = 6.0 * 2 / 3
        # Not at once (nothing is reset), but within kazoo's read timeout (and some slack).
        assert client.states.wait_for(KazooState.SUSPENDED, read_timeout + 2.0, after=mark) > 1.0
        assert session_id in server.session_ids()  # the server heard nothing
        proxy.heal()

        client.wait_connected(5.0, after=mark)
        assert KazooState.LOST not in client.states.states[mark:]
        assert client.session_id == session_id
        assert client.kz.get("/through-proxy")[0] == b"x"


def test_proxy_cut_resets_until_heal(server: ZooKeeperServer, make_client: ClientFactory) -> None:
    proxy = server.proxy()
    client = make_client(proxy.connect_string, session_timeout=10.0)
    session_id = client.session_id
    mark = client.states.mark()

    proxy.cut()
    assert client.states.wait_for(KazooState.SUSPENDED, 2.0, after=mark) < 2.0
    assert proxy.connections == 0
    time.sleep(0.3)  # reconnect attempts are reset while cut
    assert client.kz.client_id is None

    proxy.heal()
    client.wait_connected(5.0, after=mark)
    assert client.session_id == session_id
    proxy.close()
    proxy.close()
    assert proxy.mode == "closed"


def test_proxy_drop_replies_lets_requests_through(
    server: ZooKeeperServer, make_client: ClientFactory
) -> None:
    observer = make_client(server.connect_string)
    with server.proxy() as proxy:
        client = make_client(proxy.connect_string, session_timeout=3.0)
        session_id = client.session_id
        mark = client.states.mark()

        proxy.drop_replies()
        assert proxy.mode == "drop_replies"
        pending = client.kz.create_async("/reply-lost", b"applied")
        eventually(lambda: observer.kz.exists("/reply-lost") is not None, 2.0, "create applied")
        client.states.wait_for(KazooState.SUSPENDED, 4.0, after=mark)  # read timeout: 2 s
        assert not pending.successful()
        assert session_id in server.session_ids()  # its pings kept reaching the server
        proxy.heal()

        client.wait_connected(5.0, after=mark)
        assert client.session_id == session_id
        assert client.kz.get("/reply-lost")[0] == b"applied"


def test_proxy_forwards_raw_bytes_both_ways(server: ZooKeeperServer) -> None:
    with TcpProxy(server.host, server.port) as proxy:
        assert four_letter_word("127.0.0.1", proxy.port, "ruok") == "imok"
        assert "Mode: leader" in four_letter_word("127.0.0.1", proxy.port, "srvr")
        assert proxy.accepted == 2


# -- ensemble ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[ZooKeeperCluster]:
    with ZooKeeperCluster(size=3) as cluster:
        yield cluster


@pytest.fixture
def cluster(shared_cluster: ZooKeeperCluster) -> Iterator[ZooKeeperCluster]:
    yield shared_cluster
    shared_cluster.start()  # restarts any member a test left down, waits for the quorum


def _leader_count(cluster: ZooKeeperCluster) -> int:
    return sum(1 for m in cluster.servers if m.is_serving() and m.mode() == "leader")


@pytest.mark.cluster
@pytest.mark.slow
def test_cluster_forms_one_quorum(cluster: ZooKeeperCluster) -> None:
    leader = cluster.wait_for_quorum(10.0)
    assert cluster.leader() is leader
    assert _leader_count(cluster) == 1
    assert sorted(m.mode() for m in cluster.servers) == ["follower", "follower", "leader"]
    assert cluster.connect_string == ",".join(f"127.0.0.1:{m.port}" for m in cluster.servers)
    assert len({m.port for m in cluster.servers}) == 3


@pytest.mark.cluster
@pytest.mark.slow
def test_killing_the_clients_server_moves_the_session(
    cluster: ZooKeeperCluster, make_client: ClientFactory
) -> None:
    client = make_client(cluster.connect_string, session_timeout=10.0)
    session_id = client.session_id
    client.kz.create("/failover-ephemeral", ephemeral=True)
    victim = cluster.server_for_session(session_id)
    assert isinstance(victim, ClusterMember)
    mark = client.states.mark()

    victim.kill()

    client.states.wait_for(KazooState.SUSPENDED, 2.0, after=mark)
    client.wait_connected(15.0, after=mark)
    assert client.session_id == session_id
    assert KazooState.LOST not in client.states.states[mark:]
    now_on = cluster.server_for_session(session_id)
    assert now_on is not None
    assert now_on is not victim
    assert client.kz.exists("/failover-ephemeral") is not None

    victim.restart()
    cluster.wait_for_quorum(15.0)
    assert victim.is_serving()
    assert session_id in victim.session_ids()


@pytest.mark.cluster
@pytest.mark.slow
def test_killing_the_leader_elects_another(cluster: ZooKeeperCluster) -> None:
    old_leader = cluster.wait_for_quorum(10.0)
    started = time.monotonic()

    old_leader.kill()
    new_leader = cluster.wait_for_quorum(10.0)

    assert new_leader is not old_leader
    assert time.monotonic() - started < 10.0
    old_leader.start()
    assert cluster.wait_for_quorum(15.0) is new_leader
    assert old_leader.mode() == "follower"


@pytest.mark.cluster
@pytest.mark.slow
def test_cluster_clients_through_proxies_and_expiry(
    cluster: ZooKeeperCluster, make_client: ClientFactory
) -> None:
    proxies = cluster.proxies()
    client = make_client(proxied_connect_string(proxies), session_timeout=10.0)
    observer = make_client(cluster.connect_string)
    client.kz.create("/cluster-expiry", ephemeral=True)
    assert sum(p.connections for p in proxies) == 1
    old_session = client.session_id
    mark = client.states.mark()

    expire_session(client.kz, hosts=cluster.connect_string)

    observer.kz.sync("/")
    assert observer.kz.exists("/cluster-expiry") is None
    client.states.wait_for_new_session(10.0, after=mark)
    assert client.session_id != old_session
    for proxy in proxies:
        proxy.close()


@pytest.mark.cluster
@pytest.mark.slow
def test_a_paused_follower_does_not_break_the_quorum(cluster: ZooKeeperCluster) -> None:
    leader = cluster.wait_for_quorum(10.0)
    follower = cluster.followers()[0]
    assert follower.mode() == "follower"

    follower.pause()

    assert not follower.is_serving()
    assert cluster.wait_for_quorum(5.0) is leader  # two of three still serve
    cluster.start()  # resumes the paused member and waits for it to serve again
    assert follower.is_serving()
    assert len(cluster.followers()) == 2


@pytest.mark.slow
def test_a_server_on_a_given_port_and_a_taken_port(server: ZooKeeperServer) -> None:
    (port,) = free_ports(1)
    with ZooKeeperServer(port=port) as own:
        assert own.port == port
        assert own.connect_string == f"127.0.0.1:{port}"
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
    # A port in use is an error, not a silent move to another port.
    taken = ZooKeeperServer(port=server.port, start_timeout=20.0)
    try:
        with pytest.raises(HarnessError, match=str(server.port)):
            taken.start()
    finally:
        taken.close()
    with pytest.raises(HarnessError, match="port must be"):
        ZooKeeperServer(port=70000)
