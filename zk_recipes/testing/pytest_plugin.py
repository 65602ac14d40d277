"""pytest fixtures backed by real ZooKeeper servers (opt-in).

Enable in a ``conftest.py``::

    pytest_plugins = ["zk_recipes.testing.pytest_plugin"]

Fixtures:

- ``zk_server``: one standalone server for the whole test session.
- ``zk_cluster``: one 3-node ensemble for the whole session (started on first use).
- ``zk_private_server``: a server of the test module's own, for tests that stop,
  pause or restart it without disturbing everybody else.
- ``zk_proxy``: a ``TcpProxy`` in front of ``zk_private_server`` (cut, black-hole
  or drop replies for one client while the server stays healthy).
- ``zk_hosts``: the connect string tests should use (``--zk-hosts`` or ``zk_server``).
- ``zk_namespace``: a unique namespace per test, deleted afterwards.
- ``zk_client_factory``: ``make(**options)`` returns a started ``ZkClient`` in the
  test's namespace; every client it made is closed after the test.
- ``zk_client``: one such client.

``--zk-hosts HOST:PORT,...`` runs against an existing ensemble instead of
starting one; tests that need to control a server (``zk_server``,
``zk_cluster``) are skipped then. ``--zk-session-timeout`` sets the default
session timeout of the clients handed out (3 s: short, so expiry tests are
quick). When a test that used a harness server fails, the tail of the
server's log is attached to its report. Should the shared ``zk_server`` die,
the next test restarts it (same port and data, so sessions survive) and the
run's summary says how it ended, with its log.
"""

from __future__ import annotations

import contextlib
import logging
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import pytest

from zk_recipes import NodeExistsError, SessionLost, ZkClient
from zk_recipes.testing._cluster import ZooKeeperCluster
from zk_recipes.testing._install import HarnessError, find_installation
from zk_recipes.testing._proxy import TcpProxy
from zk_recipes.testing._server import ZooKeeperServer

#: Every test namespace lives under this path.
TESTS_ROOT = "/zk-recipes-tests"

log = logging.getLogger(__name__)

_SESSION_SERVER = pytest.StashKey[ZooKeeperServer]()
_SESSION_SERVER_DEATHS = pytest.StashKey[list[str]]()


class ClientFactory(Protocol):
    def __call__(self, **options: Any) -> ZkClient: ...


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("zk-recipes")
    group.addoption(
        "--zk-hosts",
        default=None,
        help="connect string of an existing ZooKeeper ensemble to test against "
        "(default: start a throwaway server)",
    )
    group.addoption(
        "--zk-session-timeout",
        type=float,
        default=3.0,
        help="session timeout in seconds for clients from zk_client_factory (default 3)",
    )


def _external_hosts(config: pytest.Config) -> str | None:
    hosts = config.getoption("--zk-hosts")
    return str(hosts) if hosts else None


@pytest.fixture(scope="session")
def zk_server(request: pytest.FixtureRequest) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper server shared by the whole test session."""
    if _external_hosts(request.config):
        pytest.skip("needs a harness-managed server; not available with --zk-hosts")
    server = ZooKeeperServer()
    server.start()
    request.config.stash[_SESSION_SERVER] = server
    try:
        yield server
    finally:
        del request.config.stash[_SESSION_SERVER]
        server.close()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Restart the shared server if it died, and say so in the run's summary.

    Runs before any fixture of the test, so one death fails the test that was
    running, not every test after it; the summary keeps how it ended and its log.
    """
    server = item.config.stash.get(_SESSION_SERVER, None)
    if server is None or server.is_running:
        return
    how = server.exit_status or "stopped"
    deaths = item.config.stash.setdefault(_SESSION_SERVER_DEATHS, [])
    deaths.append(
        f"{server!r} found dead ({how}) before {item.nodeid}; restarted. "
        f"Log tail:\n{server.log_tail(30)}"
    )
    log.error("the shared ZooKeeper server died (%s); restarting it", how)
    server.start()


def pytest_report_header(config: pytest.Config) -> list[str]:
    """What the servers are, in the first lines of every run (a failing CI log starts here)."""
    timeout = config.getoption("--zk-session-timeout")
    hosts = _external_hosts(config)
    if hosts:
        return [f"zk_recipes: an existing ensemble at {hosts} (--zk-hosts); sessions {timeout:g}s"]
    try:
        found = find_installation()
    except HarnessError as exc:
        return [f"zk_recipes: no ZooKeeper to start: {str(exc).splitlines()[0]}"]
    return [
        f"zk_recipes: throwaway servers of ZooKeeper {found.zookeeper_version} "
        f"({found.source}: {found.zookeeper_jar}) on Java {found.java_version} "
        f"({found.java}); sessions {timeout:g}s"
    ]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    deaths = config.stash.get(_SESSION_SERVER_DEATHS, [])
    if deaths:
        terminalreporter.section("zk_recipes harness: the shared ZooKeeper server died")
        for death in deaths:
            terminalreporter.write_line(death)


@pytest.fixture(scope="session")
def zk_cluster(request: pytest.FixtureRequest) -> Iterator[ZooKeeperCluster]:
    """A 3-node ZooKeeper ensemble shared by the whole test session."""
    if _external_hosts(request.config):
        pytest.skip("needs a harness-managed ensemble; not available with --zk-hosts")
    cluster = ZooKeeperCluster(size=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def zk_private_server(request: pytest.FixtureRequest) -> Iterator[ZooKeeperServer]:
    """A server for this test module alone: break it as you like."""
    if _external_hosts(request.config):
        pytest.skip("needs a harness-managed server; not available with --zk-hosts")
    with ZooKeeperServer() as server:
        yield server


@pytest.fixture
def zk_proxy(zk_private_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    """A fault-injecting proxy in front of ``zk_private_server`` (closed after the test)."""
    with TcpProxy(zk_private_server.host, zk_private_server.port) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def zk_hosts(request: pytest.FixtureRequest) -> str:
    """The connect string of the ensemble under test."""
    external = _external_hosts(request.config)
    if external:
        return external
    server: ZooKeeperServer = request.getfixturevalue("zk_server")
    return server.connect_string


@pytest.fixture(scope="session")
def _zk_admin(zk_hosts: str) -> Iterator[ZkClient]:
    """One client outside every namespace, to make and remove the tests' namespaces."""
    with ZkClient(zk_hosts, connection_timeout=10.0) as admin:
        yield admin


def _make_namespace(admin: ZkClient, namespace: str) -> None:
    """Make ``namespace`` with the shared admin client, once more after a session it lost.

    The admin holds nothing, so a lost session costs it nothing: a test that
    loses every session of the process (a faked suspend, a paused server) must
    not fail the next test's set-up while the admin builds a new one.
    """
    try:
        admin.create(namespace, parents=True)
    except SessionLost:
        admin.wait_connected(admin.settings.connection_timeout)
        with contextlib.suppress(NodeExistsError):  # made before the session went
            admin.create(namespace, parents=True)


@pytest.fixture
def zk_namespace(request: pytest.FixtureRequest, _zk_admin: ZkClient) -> Iterator[str]:
    """A namespace of this test's own, deleted (with everything in it) afterwards.

    Its root exists (open ACL) before the test starts, so a test client with a
    restrictive default ACL cannot lock the others out of the shared parent.
    """
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:40]
    namespace = f"{TESTS_ROOT}/{slug}-{uuid.uuid4().hex[:8]}"
    _make_namespace(_zk_admin, namespace)
    yield namespace
    with contextlib.suppress(Exception):
        _zk_admin.delete(namespace, recursive=True)


@pytest.fixture
def zk_client_factory(
    request: pytest.FixtureRequest, zk_hosts: str, zk_namespace: str
) -> Iterator[ClientFactory]:
    """``make(**options)``: a started ZkClient in this test's namespace, closed after the test."""
    made: list[ZkClient] = []
    session_timeout = float(request.config.getoption("--zk-session-timeout"))

    def make(**options: Any) -> ZkClient:
        options.setdefault("hosts", zk_hosts)
        options.setdefault("namespace", zk_namespace)
        options.setdefault("session_timeout", session_timeout)
        options.setdefault("connection_timeout", 10.0)
        start = options.pop("start", True)
        client = ZkClient(**options)
        made.append(client)
        if start:
            client.start()
        return client

    yield make
    for client in reversed(made):
        with contextlib.suppress(Exception):
            client.close()


@pytest.fixture
def zk_client(zk_client_factory: ClientFactory) -> ZkClient:
    """A started ZkClient in this test's namespace."""
    return zk_client_factory()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    sources: list[tuple[str, Callable[[], str]]] = []
    for name in ("zk_server", "zk_private_server"):
        server = funcargs.get(name)
        if isinstance(server, ZooKeeperServer):
            sources.append((f"ZooKeeper log of {name} (tail)", server.log_tail))
    cluster = funcargs.get("zk_cluster")
    if isinstance(cluster, ZooKeeperCluster):
        for index, member in enumerate(cluster.servers):
            sources.append((f"ZooKeeper server {index + 1} log (tail)", member.log_tail))
    for title, tail in sources:
        with contextlib.suppress(Exception):
            report.sections.append((title, tail()))
