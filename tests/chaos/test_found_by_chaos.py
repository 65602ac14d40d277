"""What the chaos run found in the recipes, as reproductions marked ``xfail(strict=True)``.

Each test shows one bug the long run surfaced, reduced to a deterministic
reproduction on a real server; the recipe's owner fixes the code and removes
the marker (the suite's ``xfail_strict`` fails the test once it passes), and
the test stays, as the fix's.

**A re-registration at a reconnect deletes the instance registered again
meanwhile** (``zk_recipes/discovery/_discovery.py``, ``_on_state``). Seen in
``benchmarks/chaos.py --duration 120 --seed 3``: ``w2.1-d26`` was unregistered
and registered again by its worker 36 ms after a RECONNECTED (same session)
and then missing from ZooKeeper for 2.5 s while held and connected, until the
worker itself unregistered it (``absent_while_held_max_s`` 2.34, just under
the bound). The sequence, from the worker's log:

1. RECONNECTED: ``_on_state`` snapshots the registrations (``R1`` for the id);
2. the application unregisters the id (``R1``'s node deleted) and registers it
   again: ``register()`` makes a node ``N2`` (``R2``);
3. ``_on_state`` checks ``R1``: its node is gone (``N2`` has another czxid),
   so it makes it again: the create meets ``N2``, ours, and takes it (a
   ``set``), returning ``R3`` with ``N2``'s czxid and version;
4. ``_on_state`` finds the registration replaced meanwhile (``R2`` is not
   ``R1``) and deletes ``R3``'s node (``self._registrar.delete(remade)``,
   "unregistered (or closed) while we made it again"):
   that is ``N2``, the node ``R2`` holds. The instance stays in
   ``registered()`` and is absent from ZooKeeper until the next reconnect.

The reproduction makes step 2 happen inside step 3's window (the application's
unregister and register, called from the re-registration's own thread before
it looks), then checks the node. Fixed: a node taken over by the check that
the current registration (or one under way) holds at the same path stays.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from zk_recipes import ServiceDiscovery, ServiceInstance, ZkClient
from zk_recipes.testing import TcpProxy, ZooKeeperServer
from zk_recipes.testing.pytest_plugin import ClientFactory


@pytest.fixture
def proxied(zk_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    with zk_server.proxy() as proxy:
        yield proxy


def test_an_instance_registered_again_during_a_reconnect_check_stays_in_zookeeper(
    zk_client_factory: ClientFactory, proxied: TcpProxy
) -> None:
    client: ZkClient = zk_client_factory(hosts=proxied.connect_string)
    instance = ServiceInstance(name="api", id="i0", address="10.0.0.1", port=8080)
    discovery = ServiceDiscovery(client, "/services").start()
    discovery.register(instance)
    inside: Any = discovery  # the private steps this reproduction hooks into
    check, delete = inside._check_registration, inside._registrar.delete
    checked, deleted = threading.Event(), threading.Event()

    def racing(key: tuple[str, str], registration: object, session: int) -> object:
        if not checked.is_set():  # the application flaps the instance as the check begins
            discovery.unregister(instance)
            discovery.register(instance)
        try:
            return check(key, registration, session)
        finally:
            checked.set()

    def deleting(registration: object) -> None:
        delete(registration)
        if checked.is_set():
            deleted.set()

    inside._check_registration = racing
    inside._registrar.delete = deleting
    try:
        proxied.cut()  # a blip: RECONNECTED on the same session, and _on_state runs
        proxied.heal()
        assert checked.wait(10), "the reconnect's check did not run"
        deleted.wait(2.0)  # what _on_state does after the check, if it deletes anything
        assert discovery.registered() == [instance]
        assert client.exists("/services/api/i0") is not None, "registered, but its node is gone"
    finally:
        discovery.close()
