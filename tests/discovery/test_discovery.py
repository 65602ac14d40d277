"""ServiceDiscovery on a real server: register, query, close, and no flap across reconnects.

Instances are checked on the server with another client. The no-flap test
watches the service's directory with a ChildrenCache from a second client:
across a cut that keeps the session it must see no DELETED and no CREATED.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from zk_recipes import (
    CacheEvent,
    CacheEventType,
    ChildrenCache,
    NodeExistsError,
    RecipeUsageError,
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
    ZkClient,
)
from zk_recipes.testing import Recorder, TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _instance(name: str, id: str, port: int = 8080, **options: object) -> ServiceInstance:
    return ServiceInstance(name=name, id=id, address="10.0.0.9", port=port, **options)  # type: ignore[arg-type]


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_register_query_update_unregister(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    other = zk_client_factory()
    with ServiceDiscovery(client, "/services") as discovery:
        b = discovery.register(_instance("orders", "b", payload="two"))
        a = discovery.register(_instance("orders", "a", payload={"@class": "java.util.HashMap"}))
        x = discovery.register(_instance("billing", "x"))
        reader = ServiceDiscovery(other, "/services")
        assert reader.query_for_names() == ["billing", "orders"]
        assert reader.query_for_instances("orders") == [a, b]  # sorted by id
        assert reader.query_for_instance("orders", "b") == b
        assert reader.query_for_instance("orders", "nobody") is None
        assert reader.query_for_instances("nothing") == []
        data, stat = other.get("/services/orders/a")
        assert data == a.to_json()
        assert stat.ephemeral_owner == client.session_id
        moved = discovery.update(b.replace(port=9090))
        assert reader.query_for_instance("orders", "b") == moved
        discovery.unregister(a)
        assert reader.query_for_instances("orders") == [moved]
        with pytest.raises(RecipeUsageError, match="registered already"):
            discovery.register(moved)
        with pytest.raises(RecipeUsageError, match="not registered here"):
            discovery.update(a)
        assert discovery.registered() == [x, moved]


def test_close_deletes_our_instances_at_once_but_not_permanent_ones(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory()
    checker = zk_client_factory()
    discovery = ServiceDiscovery(client).start()
    discovery.register(_instance("svc", "dynamic"))
    discovery.register(_instance("svc", "static", service_type=ServiceType.STATIC))
    discovery.register(_instance("svc", "permanent", service_type=ServiceType.PERMANENT))
    sequential = discovery.register(
        _instance("svc", "seq-", service_type=ServiceType.DYNAMIC_SEQUENTIAL)
    )
    names = checker.get_children("/services/svc")
    assert sorted(n for n in names if not n.startswith("seq-")) == [
        "dynamic",
        "permanent",
        "static",
    ]
    assert [n for n in names if n.startswith("seq-")] == [n for n in names if len(n) == 14]
    assert checker.exists("/services/svc/static").ephemeral_owner == 0  # type: ignore[union-attr]
    discovery.close()
    discovery.close()  # idempotent
    assert client.state is not None
    assert client.state.is_connected
    assert checker.get_children("/services/svc") == ["permanent"]
    assert sequential.id == "seq-"


def test_another_sessions_instance_with_our_id_is_refused(zk_client_factory: ClientFactory) -> None:
    first = ServiceDiscovery(zk_client_factory()).start()
    second = ServiceDiscovery(zk_client_factory()).start()
    first.register(_instance("svc", "same"))
    with pytest.raises(NodeExistsError, match="instance ids must be unique"):
        second.register(_instance("svc", "same"))


def test_a_cut_that_keeps_the_session_shows_watchers_no_flap(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    registrar = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    watcher = zk_client_factory()
    events = Recorder[CacheEvent]()
    with ServiceDiscovery(registrar) as discovery, ChildrenCache(watcher, "/services/svc") as cache:
        cache.listen(events)
        discovery.register(_instance("svc", "steady"))
        events.wait_for(lambda e: e.type is CacheEventType.CREATED)
        session = registrar.session_id
        mark = events.mark()
        proxied.blackhole()
        time.sleep(1.0)
        proxied.heal()
        wait_until(lambda: registrar.state is not None and registrar.state.is_connected, "back")
        assert registrar.session_id == session
        # The heal resets a connection that lost bytes: the sync may meet that reset first.
        registrar.retry(lambda: registrar.sync("/"))  # our re-check (one exists) is done
        time.sleep(0.3)
        kinds = [e.type for e in events.snapshot()[mark:]]
        assert CacheEventType.DELETED not in kinds
        assert CacheEventType.CREATED not in kinds


def test_after_expiry_the_instances_are_registered_again_at_once(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    client = zk_client_factory()
    checker = zk_client_factory()
    with ServiceDiscovery(client) as discovery:
        discovery.register(_instance("svc", "phoenix"))
        old = expire_session(client, hosts=zk_hosts)
        wait_until(
            lambda: (
                (stat := checker.exists("/services/svc/phoenix")) is not None
                and stat.ephemeral_owner not in (0, old)
            ),
            "registered again by the new session",
            timeout=20,
        )
        assert checker.exists("/services/svc/phoenix").ephemeral_owner == client.session_id  # type: ignore[union-attr]


def test_an_unreadable_node_is_skipped_not_the_failure_of_the_query(
    zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = zk_client_factory()
    with ServiceDiscovery(client) as discovery:
        good = discovery.register(_instance("svc", "good"))
        client.create("/services/svc/bad", b"{not json")
        assert discovery.query_for_instances("svc") == [good]
        assert discovery.query_for_instance("svc", "bad") is None
    assert "skipping an instance of svc" in caplog.text


_REGISTERING_CHILD = textwrap.dedent(
    """
    import sys, time
    from zk_recipes import ServiceDiscovery, ServiceInstance, ZkClient
    client = ZkClient(sys.argv[1], namespace=sys.argv[2], session_timeout=2.0).start()
    ServiceDiscovery(client).start().register(ServiceInstance(name="svc", id="child", port=1))
    print("registered", flush=True)
    time.sleep(60)
    """
)


def test_a_killed_process_vanishes_within_the_session_timeout(
    zk_client_factory: ClientFactory, zk_hosts: str, zk_namespace: str
) -> None:
    checker: ZkClient = zk_client_factory()
    child = subprocess.Popen(
        [sys.executable, "-c", _REGISTERING_CHILD, zk_hosts, zk_namespace],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "registered"
        assert checker.exists("/services/svc/child") is not None
        child.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        wait_until(lambda: checker.exists("/services/svc/child") is None, "gone", timeout=10)
        assert time.monotonic() - killed < 2.0 * 2 + 1  # the session timeout, with margin
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()


def test_status_reports_show_what_this_process_announces(zk_client_factory: ClientFactory) -> None:
    from zk_recipes.frameworks import connection_report, connection_rows

    client = zk_client_factory()
    with ServiceDiscovery(client) as discovery:
        discovery.register(_instance("svc", "b"))
        discovery.register(_instance("api", "a"))
        report = connection_report(client, server=False)
        assert report["services"] == ["api/a", "svc/b"]
        assert ("announced", "api/a, svc/b") in connection_rows(report)
    assert connection_report(client, server=False)["services"] == []
