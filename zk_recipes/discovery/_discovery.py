"""ServiceDiscovery: register, update, unregister and query instances in Curator's layout.

Nodes are ``<base_path>/<name>/<id>`` (parents made as CONTAINER nodes, as
Curator's ``creatingParentContainersIfNeeded``), with the instance's JSON
(``ServiceInstance.to_json``). DYNAMIC instances are ephemeral,
DYNAMIC_SEQUENTIAL ephemeral and sequential (the node is the id plus ten
digits), STATIC and PERMANENT persistent.

Where it differs from Curator on purpose (curator-x-discovery 5.4):

- **No flap on a reconnect.** Curator deletes and re-creates every instance
  on each CONNECTED/RECONNECTED, so every watcher sees it leave and come
  back on a blip. Here, on a reconnect that kept the session, a node that
  still exists is left alone (one ``exists`` each); after a new session
  (expiry) each instance is registered again at once, an ephemeral node
  still held by the old session replaced.
- **PERMANENT means permanent**: ``close()`` leaves it (CURATOR-94, open);
  only ``unregister`` deletes it.
- **A tolerant reader**: a node that does not parse is skipped, logged and
  counted (``zk_recipes_service_instances_unreadable_total``), never the
  failure of the whole query (Java's ``queryForInstances`` throws).
- **Payloads checked before writing**: one a Java reader could not read is
  refused at ``register()`` (``_payload.py``).
- ``query_for_instances`` returns instances sorted by id (Curator: hash order).
"""

from __future__ import annotations

import dataclasses
import logging
import threading

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._errors import (
    ConfigurationError,
    NodeExistsError,
    NoNodeError,
    RecipeUsageError,
    ZkRecipesError,
)
from zk_recipes._types import CreateMode
from zk_recipes.discovery._cache import ServiceCache
from zk_recipes.discovery._instance import ServiceInstance, ServiceType, check_node_name
from zk_recipes.discovery._payload import check_payload
from zk_recipes.discovery._provider import DownInstancePolicy, ProviderStrategy, ServiceProvider
from zk_recipes.discovery._reading import read_instance

log = logging.getLogger("zk_recipes.discovery")

_MODES = {
    ServiceType.DYNAMIC: CreateMode.EPHEMERAL,
    ServiceType.DYNAMIC_SEQUENTIAL: CreateMode.EPHEMERAL_SEQUENTIAL,
    ServiceType.STATIC: CreateMode.PERSISTENT,
    ServiceType.PERMANENT: CreateMode.PERSISTENT,
}


@dataclasses.dataclass
class _Registration:
    instance: ServiceInstance
    #: The node (for DYNAMIC_SEQUENTIAL: with its sequence), relative to the namespace.
    path: str
    #: The session that created it (0 for a persistent node: any session keeps it).
    session: int


class ServiceDiscovery:
    """The instances this process registers under ``base_path``, and queries of everyone's.

    ``payload_class``: the Java class the Java readers of these services were
    built with (``ServiceDiscoveryBuilder.builder(X.class)``); payloads that
    would not cast to it are refused. None: readers built with
    ``Object.class``, or none.
    """

    def __init__(
        self,
        client: ZkClient,
        base_path: str = "/services",
        *,
        payload_class: str | None = None,
    ) -> None:
        if not isinstance(client, ZkClient):
            raise ConfigurationError(f"ServiceDiscovery needs a ZkClient, got {client!r}")
        self.client = client
        self.base_path = _paths.validate_path(base_path, what="the discovery base path")
        self.payload_class = payload_class
        self._lock = threading.RLock()
        self._registered: dict[tuple[str, str], _Registration] = {}
        self._started = False
        self._closed = False

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> ServiceDiscovery:
        with self._lock:
            if self._closed:
                raise RecipeUsageError("this ServiceDiscovery is closed: make a new one")
            if not self._started:
                self._started = True
                self.client.add_listener(self._on_state)
                _metrics.discoveries.add(self)  # the registered-instances gauge
        return self

    def close(self) -> None:
        """Delete our DYNAMIC, DYNAMIC_SEQUENTIAL and STATIC instances now (PERMANENT stay).

        The client lives on: the ephemeral nodes go at once, not when the
        session ends. Idempotent.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            registrations = list(self._registered.values())
            self._registered.clear()
        self.client.remove_listener(self._on_state)
        for registration in registrations:
            if registration.instance.service_type is not ServiceType.PERMANENT:
                self._delete(registration)

    def __enter__(self) -> ServiceDiscovery:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RecipeUsageError("this ServiceDiscovery is closed: make a new one")
        if not self._started:
            self.start()

    # -- our instances ---------------------------------------------------------
    def register(self, instance: ServiceInstance) -> ServiceInstance:
        """Write ``instance``'s node; it is kept registered until ``unregister``/``close``."""
        self._check_open()
        if not isinstance(instance, ServiceInstance):
            raise ConfigurationError(f"register() takes a ServiceInstance, got {instance!r}")
        check_payload(
            instance.payload, self.payload_class, where=f"instance {instance.id} of {instance.name}"
        )
        key = (instance.name, instance.id)
        with self._lock:
            if key in self._registered:
                raise RecipeUsageError(
                    f"instance {instance.id} of {instance.name} is registered already: "
                    "update() it, or unregister() it first"
                )
            registration = self._create(instance)
            self._registered[key] = registration
        _metrics.count("zk_recipes_service_registrations_total", service=instance.name)
        log.info("registered %s/%s at %s", instance.name, instance.id, registration.path)
        return instance

    def update(self, instance: ServiceInstance) -> ServiceInstance:
        """Write a new value for a registered instance (same name and id): one ``set``."""
        self._check_open()
        check_payload(
            instance.payload, self.payload_class, where=f"instance {instance.id} of {instance.name}"
        )
        with self._lock:
            registration = self._registered.get((instance.name, instance.id))
            if registration is None:
                raise RecipeUsageError(
                    f"instance {instance.id} of {instance.name} is not registered here: "
                    "register() it"
                )
            if instance.service_type is not registration.instance.service_type:
                raise RecipeUsageError(
                    "update() cannot change service_type "
                    f"({registration.instance.service_type.name} -> {instance.service_type.name}):"
                    " unregister() and register() again"
                )
            self.client.retry(lambda: self.client.set(registration.path, instance.to_json()))
            registration.instance = instance
        return instance

    def unregister(self, instance: ServiceInstance) -> None:
        """Delete the instance's node (any type) and forget it. Not registered: nothing."""
        self._check_open()
        with self._lock:
            registration = self._registered.pop((instance.name, instance.id), None)
        if registration is not None:
            self._delete(registration)

    @staticmethod
    def registered_by(client: ZkClient) -> list[ServiceInstance]:
        """What this process keeps registered with ``client`` (its open ServiceDiscovery objects).

        For status pages: the instances this process announces.
        """
        found = [
            instance
            for discovery in list(_metrics.discoveries)
            if isinstance(discovery, ServiceDiscovery)
            and discovery.client is client
            and not discovery._closed
            for instance in discovery.registered()
        ]
        return sorted(found, key=lambda i: (i.name, i.id))

    def registered(self) -> list[ServiceInstance]:
        """The instances this object keeps registered, by name and id."""
        with self._lock:
            return [r.instance for _, r in sorted(self._registered.items())]

    def _path(self, instance: ServiceInstance) -> str:
        return _paths.join(_paths.join(self.base_path, instance.name), instance.id)

    def _create(self, instance: ServiceInstance, *, again: bool = False) -> _Registration:
        path = self._path(instance)
        mode = _MODES[instance.service_type]
        data = instance.to_json()
        client = self.client
        try:
            made = client.create(
                path, data, mode=mode, parents=True, replace_stale=mode is CreateMode.EPHEMERAL
            )
            path = made.path
        except NodeExistsError:
            stat = client.exists(path)
            if mode.is_ephemeral and stat is not None and stat.ephemeral_owner != client.session_id:
                owner = stat.ephemeral_owner
                raise NodeExistsError(
                    f"instance {instance.id} of {instance.name} is registered by another "
                    f"session ({owner:#x}): instance ids must be unique; pick another id",
                    path,
                ) from None
            # Ours (a reply lost on the way), or persistent: the node stays, its value is ours.
            client.retry(lambda: client.set(path, data))
        session = client.session_id if mode.is_ephemeral else 0
        if again:
            _metrics.count("zk_recipes_service_reregistrations_total", service=instance.name)
        return _Registration(instance, path, session)

    def _delete(self, registration: _Registration) -> None:
        try:
            self.client.delete(registration.path, guaranteed=True)
        except ZkRecipesError as exc:
            log.warning("unregistering %s: %s", registration.path, exc)

    def _on_state(self, change: StateChange) -> None:
        """On every connection that comes up: put back what is missing, touch nothing else."""
        if change.state not in (ConnectionState.CONNECTED, ConnectionState.RECONNECTED):
            return
        with self._lock:
            if self._closed:
                return
            for key, registration in list(self._registered.items()):
                try:
                    self._check_registration(key, registration, change.session_id)
                except ZkRecipesError as exc:
                    log.warning(
                        "re-registering %s: %s (the next connection tries again)",
                        registration.path,
                        exc,
                    )

    def _check_registration(
        self, key: tuple[str, str], registration: _Registration, session: int
    ) -> None:
        kept = registration.session in (0, session)
        if kept:
            stat = self.client.exists(registration.path)
            if stat is not None:
                return  # the same session, the node is there: leave it (no flap)
        log.info(
            "registering %s/%s again (%s)",
            key[0],
            key[1],
            "its node was gone" if kept else "a new session",
        )
        self._registered[key] = self._create(registration.instance, again=True)

    # -- queries -------------------------------------------------------------
    def query_for_names(self) -> list[str]:
        """The service names under the base path, sorted."""
        try:
            return sorted(self.client.retry(lambda: self.client.get_children(self.base_path)))
        except NoNodeError:
            return []

    def query_for_instances(self, name: str) -> list[ServiceInstance]:
        """Every readable instance of ``name``, sorted by id (unreadable ones skipped, logged)."""
        check_node_name(name, "a service name")
        directory = _paths.join(self.base_path, name)
        client = self.client
        try:
            ids = client.retry(lambda: client.get_children(directory))
        except NoNodeError:
            return []
        pending = [(node, client.get_async(_paths.join(directory, node))) for node in ids]
        found: list[ServiceInstance] = []
        for node, reply in pending:
            path = _paths.join(directory, node)
            try:
                data, _stat = reply.result(client.settings.connection_timeout)
            except NoNodeError:
                continue  # gone since the listing
            instance = read_instance(name, path, data)
            if instance is not None:
                found.append(instance)
        return sorted(found, key=lambda i: i.id)

    def query_for_instance(self, name: str, id: str) -> ServiceInstance | None:
        """One instance, or None when it is not registered (or does not parse: logged)."""
        check_node_name(name, "a service name")
        check_node_name(id, "an instance id")
        path = _paths.join(_paths.join(self.base_path, name), id)
        try:
            data, _stat = self.client.retry(lambda: self.client.get(path))
        except NoNodeError:
            return None
        return read_instance(name, path, data)

    # -- the other faces -------------------------------------------------------
    def service_cache(self, name: str) -> ServiceCache:
        """A ServiceCache of ``name``'s instances (``start()`` it)."""
        return ServiceCache(self, name)

    def service_provider(
        self,
        name: str,
        strategy: ProviderStrategy | None = None,
        down_instance_policy: DownInstancePolicy | None = None,
    ) -> ServiceProvider:
        """A ServiceProvider picking among ``name``'s instances (``start()`` it)."""
        return ServiceProvider(self, name, strategy, down_instance_policy)

    def __repr__(self) -> str:
        return f"<ServiceDiscovery {self.base_path}: {len(self._registered)} registered>"
