"""Discovery under faults (review 3): no ghost, no absent instance, no second node, no wait.

- D1: a delete left pending by ``close()``/``unregister()`` while disconnected
  must not delete the same instance registered again on the same session
  meanwhile (in either order of the race at the reconnect).
- D2: a DYNAMIC_SEQUENTIAL registration whose reply was lost is made once,
  and ``close()`` leaves nothing.
- An instance's node is updated only on the session that made it.
- M4: ``register`` does not wait behind a state change's requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.containers import children_of
from zk_recipes import (
    ConnectionState,
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
    StateChange,
    ZkClient,
)
from zk_recipes._client import deletes
from zk_recipes.testing import TcpProxy, ZooKeeperServer, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _instance(id: str, **options: object) -> ServiceInstance:
    return ServiceInstance(name="api", id=id, address="10.0.0.1", port=8080, **options)  # type: ignore[arg-type]


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


@pytest.mark.parametrize("deleter", ["at once", "late"])
def test_a_pending_delete_does_not_take_the_instance_registered_again(
    zk_client_factory: ClientFactory,
    proxied: TcpProxy,
    monkeypatch: pytest.MonkeyPatch,
    deleter: str,
) -> None:
    """The deleter runs at the reconnect, before or after ``register()`` is done with the node.

    "late": its attempt is held back 0.5 s (as in its back-off after a failed
    round), so it comes after ``register()`` returned; "at once": it races
    ``register()``'s create and set. Either way the instance stays registered.
    """
    if deleter == "late":
        original = deletes.GuaranteedDeleter.try_once

        def late(self: deletes.GuaranteedDeleter, item: deletes._PendingDelete) -> bool:
            time.sleep(0.5)
            return original(self, item)

        monkeypatch.setattr(deletes.GuaranteedDeleter, "try_once", late)
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=10.0)
    observer = zk_client_factory()
    instance = _instance("i0")
    first = ServiceDiscovery(client).start()
    first.register(instance)
    proxied.cut()
    wait_until(lambda: not client.state or not client.state.is_connected, "disconnected")
    first.close()  # its delete is queued until the connection is back
    assert client.pending_deletes() == ["/services/api/i0"]
    second = ServiceDiscovery(client).start()
    failures: list[BaseException] = []

    def register_again() -> None:
        try:
            second.register(instance)
        except BaseException as exc:
            failures.append(exc)

    again = threading.Thread(target=register_again)
    again.start()
    time.sleep(0.2)  # register() is waiting for the connection
    proxied.heal()
    again.join(20)
    assert failures == []
    assert client.wait_for_deletes(10)
    assert [i.id for i in second.registered()] == ["i0"]
    stat = observer.exists("/services/api/i0")
    assert stat is not None
    assert stat.ephemeral_owner == client.session_id
    second.close()
    wait_until(lambda: observer.exists("/services/api/i0") is None, "unregistered at close")


def test_a_sequential_registration_whose_reply_was_lost_is_made_once(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=6.0)
    observer = zk_client_factory()
    discovery = ServiceDiscovery(client).start()
    discovery.register(_instance("warm-up"))
    instance = _instance("worker-", service_type=ServiceType.DYNAMIC_SEQUENTIAL)
    proxied.drop_replies()  # the create is applied; its reply does not come back
    registering = threading.Thread(target=discovery.register, args=(instance,))
    registering.start()
    wait_until(
        lambda: any(n.startswith("worker-") for n in observer.get_children("/services/api")),
        "applied on the server",
    )
    proxied.heal()
    registering.join(30)
    workers = [n for n in observer.get_children("/services/api") if n.startswith("worker-")]
    assert len(workers) == 1  # Curator's plain create would leave two here
    discovery.close()
    wait_until(lambda: children_of(observer, "/services/api") == [], "nothing left at close")


def test_an_update_after_the_session_changed_is_written_by_the_new_registration(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    client = zk_client_factory(session_timeout=3.0)
    observer = zk_client_factory()
    discovery = ServiceDiscovery(client).start()
    discovery.register(_instance("u0", payload="v1"))
    old = observer.exists("/services/api/u0")
    assert old is not None
    expire_session(client, hosts=zk_hosts)
    discovery.update(_instance("u0", payload="v2"))  # on the old session: not written
    wait_until(
        lambda: (
            b'"v2"' in observer.get("/services/api/u0")[0]
            if observer.exists("/services/api/u0")
            else False
        ),
        "registered again on the new session, with the new value",
    )
    stat = observer.exists("/services/api/u0")
    assert stat is not None
    assert stat.ephemeral_owner == client.session_id != old.ephemeral_owner
    discovery.close()


def test_register_does_not_wait_behind_a_state_change(
    zk_client_factory: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 3, M4: re-registering on a reconnect held the discovery's lock through its
    retried requests; a register()/update() waited for all of them."""
    client = zk_client_factory()
    discovery = ServiceDiscovery(client).start()
    discovery.register(_instance("s0"))
    inside, release = threading.Event(), threading.Event()
    original = ServiceDiscovery._check_registration

    def slow_check(self: ServiceDiscovery, *args: object) -> object:
        inside.set()
        release.wait(20)  # a flapping connection's retries
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ServiceDiscovery, "_check_registration", slow_check)
    change = StateChange(ConnectionState.RECONNECTED, client.session_id, 0.0, False, 0)
    state = threading.Thread(target=discovery._on_state, args=(change,))
    state.start()
    try:
        assert inside.wait(10)
        registered = threading.Event()

        def register() -> None:
            discovery.register(_instance("s1"))
            registered.set()

        threading.Thread(target=register).start()
        assert registered.wait(10)  # not behind the state change
    finally:
        release.set()
        state.join(20)
    assert sorted(i.id for i in discovery.registered()) == ["s0", "s1"]
    discovery.close()


def test_static_instances_left_by_a_close_while_disconnected_are_named(
    zk_client_factory: ClientFactory, proxied: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """A STATIC instance is a persistent node: it needs a connection to go. A client closed
    while disconnected says which nodes it could not delete (review 3, M7)."""
    client: ZkClient = zk_client_factory(hosts=proxied.connect_string, session_timeout=4.0)
    observer = zk_client_factory()
    discovery = ServiceDiscovery(client).start()
    discovery.register(_instance("st", service_type=ServiceType.STATIC))
    proxied.cut()
    wait_until(lambda: not client.state or not client.state.is_connected, "disconnected")
    discovery.close()
    with caplog.at_level("WARNING", logger="zk_recipes.client"):
        client.close()
    assert "/services/api/st" in caplog.text
    assert observer.exists("/services/api/st") is not None  # left: someone must delete it
    observer.delete("/services/api/st")


def test_a_registration_waiting_for_the_server_holds_up_nothing_else(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    """The discovery's lock is never held across a request: a register() waiting out a cut
    leaves registered(), update() and unregister() of other instances free."""
    client = zk_client_factory(hosts=proxied.connect_string, session_timeout=10.0)
    discovery = ServiceDiscovery(client).start()
    discovery.register(_instance("r0"))
    proxied.cut()
    wait_until(lambda: not client.state or not client.state.is_connected, "disconnected")
    waiting = threading.Thread(target=discovery.register, args=(_instance("r1"),))
    waiting.start()
    answered = threading.Event()

    def meanwhile() -> None:
        assert [i.id for i in discovery.registered()] == ["r0"]
        discovery.unregister(_instance("r0"))  # queued: the connection is down
        answered.set()

    threading.Thread(target=meanwhile).start()
    assert answered.wait(10)
    assert waiting.is_alive()  # still waiting for the server
    proxied.heal()
    waiting.join(20)
    assert [i.id for i in discovery.registered()] == ["r1"]
    discovery.close()
