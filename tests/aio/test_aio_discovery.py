"""aio.ServiceDiscovery on a real server: the sync ServiceDiscovery, awaited.

Registrations are the sync object's (checked with another client and a sync
reader), queries are its steps on the loop (no thread), a new session
registers the instances again, and leaving the block deletes them at once.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.aio.loops import run_on
from zk_recipes import (
    NodeExistsError,
    RecipeUsageError,
    ServiceDiscovery,
    ServiceInstance,
    ZkClient,
    aio,
)
from zk_recipes.testing import expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _instance(name: str, id: str, port: int = 8080) -> ServiceInstance:
    return ServiceInstance(name=name, id=id, address="10.0.0.9", port=port)


def test_register_query_update_unregister_and_close(
    loop: str, zk_client_factory: ClientFactory
) -> None:
    client, other = zk_client_factory(), zk_client_factory()
    sync_reader = ServiceDiscovery(other, "/services")

    async def main() -> None:
        async with aio.ServiceDiscovery(client, "/services") as discovery:
            b = await discovery.register(_instance("orders", "b"))
            a = await discovery.register(_instance("orders", "a"))
            await discovery.register(_instance("billing", "x"))
            threads = threading.active_count()
            reader = aio.ServiceDiscovery(other, "/services")
            names, instances, one, none = await asyncio.gather(
                reader.query_for_names(),
                reader.query_for_instances("orders"),
                reader.query_for_instance("orders", "b"),
                reader.query_for_instance("orders", "nobody"),
            )
            assert threading.active_count() == threads  # the queries ran on the loop
            assert names == ["billing", "orders"]
            assert instances == [a, b] == sync_reader.query_for_instances("orders")
            assert one == b
            assert none is None
            assert await reader.query_for_instances("nothing") == []
            assert (await other.aio.get("/services/orders/a"))[1].ephemeral_owner == (
                client.session_id
            )
            moved = await discovery.update(b.replace(port=9090))
            assert await reader.query_for_instance("orders", "b") == moved
            await discovery.unregister(a)
            assert await reader.query_for_instances("orders") == [moved]
            with pytest.raises(RecipeUsageError, match="registered already"):
                await discovery.register(moved)
            assert [i.id for i in discovery.registered()] == ["x", "b"]
        # Leaving the block deleted ours at once, not at the session's end (the emptied
        # service directories are containers: the server may reap them any time).
        assert sync_reader.query_for_instances("orders") == []
        assert sync_reader.query_for_instances("billing") == []

    run_on(loop, main())


def test_a_new_session_registers_the_instances_again(
    zk_client_factory: ClientFactory, zk_hosts: str
) -> None:
    client, checker = zk_client_factory(), zk_client_factory()

    async def main() -> None:
        async with aio.ServiceDiscovery(client) as discovery:
            await discovery.register(_instance("svc", "phoenix"))
            old = await asyncio.to_thread(expire_session, client, hosts=zk_hosts)

            def registered_again() -> bool:
                stat = checker.exists("/services/svc/phoenix")
                return stat is not None and stat.ephemeral_owner not in (0, old)

            await asyncio.to_thread(wait_until, registered_again, "registered again", 20)

    asyncio.run(main())


def test_another_sessions_id_and_misuse_are_refused(zk_client_factory: ClientFactory) -> None:
    first, second = zk_client_factory(), zk_client_factory()

    async def main() -> None:
        async with aio.ServiceDiscovery(first) as mine:
            await mine.register(_instance("svc", "same"))
            async with aio.ServiceDiscovery(second) as theirs:
                with pytest.raises(NodeExistsError, match="instance ids must be unique"):
                    await theirs.register(_instance("svc", "same"))
                with pytest.raises(Exception, match="a service name"):
                    await theirs.query_for_instances("bad/name")
        closed = aio.ServiceDiscovery(first)
        await closed.close()
        with pytest.raises(RecipeUsageError, match="closed"):
            await closed.register(_instance("svc", "late"))

    asyncio.run(main())


def test_a_cancelled_query_leaves_the_discovery_usable(zk_client: ZkClient) -> None:
    async def main() -> None:
        async with aio.ServiceDiscovery(zk_client) as discovery:
            await discovery.register(_instance("svc", "one"))
            query = asyncio.ensure_future(discovery.query_for_instances("svc"))
            await asyncio.sleep(0)
            query.cancel()
            with pytest.raises(asyncio.CancelledError):
                await query
            assert [i.id for i in await discovery.query_for_instances("svc")] == ["one"]

    asyncio.run(main())
