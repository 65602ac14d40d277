"""``aio.ServiceDiscovery``: service discovery awaited, on the sync ServiceDiscovery itself.

Not a second registry: it holds a ``zk_recipes.discovery.ServiceDiscovery``
(Curator's layout, its re-registration after a new session, its guarded
writes) and awaits it. The queries are that object's steps, awaited: their
requests are pipelined and answered on the loop, no thread. The writes
(``register``, ``update``, ``unregister``, ``close``) are the sync object's
own calls on the asyncio pool (``POOL_THREADS``): each is a handful of
bounded requests retried while the connection flaps (a lost reply's search,
a stale node taken back), made once per instance, not once per request, so
they are not worth a second copy as steps.
"""

from __future__ import annotations

import functools

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import call_step
from zk_recipes.aio._drive import run_awaited
from zk_recipes.discovery import ServiceDiscovery as _SyncServiceDiscovery, ServiceInstance


class ServiceDiscovery:
    """Register this process's instances and query everyone's, from asyncio code.

    ``async with aio.ServiceDiscovery(client, "/services") as discovery:``
    then ``await discovery.register(instance)``, ``await update(instance)``,
    ``await unregister(instance)``, ``await query_for_names()``, ``await
    query_for_instances(name)``, ``await query_for_instance(name, id)``;
    leaving the block (``await close()``) deletes our non-PERMANENT instances.
    The same nodes and rules as the sync ServiceDiscovery (and Curator's);
    ``sync`` is that object, for its ServiceCache and ServiceProvider.
    """

    def __init__(
        self,
        client: ZkClient,
        base_path: str = "/services",
        *,
        payload_class: str | None = None,
    ) -> None:
        #: The sync ServiceDiscovery this one awaits (its caches and providers).
        self.sync = _SyncServiceDiscovery(client, base_path, payload_class=payload_class)
        self.client = self.sync.client
        self.base_path = self.sync.base_path

    async def start(self) -> ServiceDiscovery:
        """Start (re-registering after a new session); ``register()`` starts it too."""
        self.sync.start()  # a listener added: no request
        return self

    async def close(self) -> None:
        """Delete our DYNAMIC, DYNAMIC_SEQUENTIAL and STATIC instances now. Idempotent."""
        await run_awaited(call_step(self.sync.close), None)

    async def __aenter__(self) -> ServiceDiscovery:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def register(self, instance: ServiceInstance) -> ServiceInstance:
        """Write ``instance``'s node; kept registered until ``unregister``/``close``."""
        call = functools.partial(self.sync.register, instance)
        return await run_awaited(call_step(call), None)

    async def update(self, instance: ServiceInstance) -> ServiceInstance:
        """Write a new value for a registered instance (same name and id)."""
        call = functools.partial(self.sync.update, instance)
        return await run_awaited(call_step(call), None)

    async def unregister(self, instance: ServiceInstance) -> None:
        """Delete the instance's node and forget it. Not registered: nothing."""
        await run_awaited(call_step(functools.partial(self.sync.unregister, instance)), None)

    def registered(self) -> list[ServiceInstance]:
        """The instances this object keeps registered (never blocks)."""
        return self.sync.registered()

    async def query_for_names(self) -> list[str]:
        """The service names under the base path, sorted."""
        return await run_awaited(self.sync._names_steps(), None)

    async def query_for_instances(self, name: str) -> list[ServiceInstance]:
        """Every readable instance of ``name``, sorted by id (unreadable ones skipped, logged)."""
        return await run_awaited(self.sync._instances_steps(name), None)

    async def query_for_instance(self, name: str, id: str) -> ServiceInstance | None:
        """One instance, or None when it is not registered (or does not parse: logged)."""
        return await run_awaited(self.sync._instance_steps(name, id), None)

    def __repr__(self) -> str:
        return "<aio." + repr(self.sync)[1:]
