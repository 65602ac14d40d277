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
- **A DYNAMIC_SEQUENTIAL registration whose reply was lost is made once**:
  the node is looked for (our session, our JSON) before a second create.
  Curator's plain sequential create leaves two instances then.

**As the holder.** An instance's node is written (``update``) and deleted
(``unregister``, ``close``) only on the session that made it: once that
session has ended, the same path may hold another process's instance (the
write is not sent, and the instance is registered again on the new session).
A delete left pending by a disconnection deletes only the node it was asked
about (its ``czxid`` and the version we wrote): an instance registered again
meanwhile on the same session takes its node back, and the pending delete is
dropped (review 3, D1). The object's lock is never held across a
request: state changes and registrations make theirs outside it, so
``register``/``update``/``unregister`` never wait behind a flapping
connection's retries.
"""

from __future__ import annotations

import logging
import threading

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._client.steps import Reply, Steps, run_blocking
from zk_recipes._errors import (
    ConfigurationError,
    NoNodeError,
    RecipeUsageError,
    SessionLost,
    ZkRecipesError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._internals.retry_steps import request_steps
from zk_recipes.discovery._cache import ServiceCache
from zk_recipes.discovery._instance import ServiceInstance, ServiceType, check_node_name
from zk_recipes.discovery._payload import check_payload
from zk_recipes.discovery._provider import DownInstancePolicy, ProviderStrategy, ServiceProvider
from zk_recipes.discovery._reading import read_instance
from zk_recipes.discovery._registering import Registrar, Registration

log = logging.getLogger("zk_recipes.discovery")


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
        self.client = require_client(client, "ServiceDiscovery")
        self.base_path = _paths.validate_path(base_path, what="the discovery base path")
        self.payload_class = payload_class
        self._lock = threading.RLock()
        self._registered: dict[tuple[str, str], Registration] = {}
        self._registrar = Registrar(self.client, self.base_path, _taken)
        #: Registrations whose requests are under way (outside the lock).
        self._registering: set[tuple[str, str]] = set()
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
                self._registrar.delete(registration)

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
            if key in self._registered or key in self._registering:
                raise RecipeUsageError(
                    f"instance {instance.id} of {instance.name} is registered already: "
                    "update() it, or unregister() it first"
                )
            self._registering.add(key)
        try:  # the requests (retried while the connection flaps) outside the lock
            registration = self._registrar.create(instance)
        except BaseException:
            with self._lock:
                self._registering.discard(key)
            raise
        with self._lock:
            self._registering.discard(key)
            closed = self._closed
            if not closed:
                self._registered[key] = registration
        if closed:
            self._registrar.delete(registration)
            raise RecipeUsageError("this ServiceDiscovery was closed while it registered")
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
            registration.instance = instance  # what a registration made again writes too
        try:
            stat = self.client.retry(
                lambda: self.client.set(
                    registration.path, instance.to_json(), session=registration.session or None
                )
            )
        except SessionLost:
            # The session that made the node ended (HolderSessionLost: we knew before
            # sending; else the server said so): the path may hold another's node now.
            # The new session's re-registration (_on_state) writes this value.
            log.info("update of %s waits for its re-registration", registration.path)
            return instance
        registration.version = stat.version
        return instance

    def unregister(self, instance: ServiceInstance) -> None:
        """Delete the instance's node (any type) and forget it. Not registered: nothing."""
        self._check_open()
        with self._lock:
            registration = self._registered.pop((instance.name, instance.id), None)
        if registration is not None:
            self._registrar.delete(registration)

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

    def _registrations(self) -> list[Registration]:
        with self._lock:
            return list(self._registered.values())

    def _on_state(self, change: StateChange) -> None:
        """On every connection that comes up: put back what is missing, touch nothing else.

        A snapshot is taken under the lock and the requests are made outside
        it (M4): a register/update/unregister never waits behind them. A
        registration changed meanwhile is left to its new owner.
        """
        if change.state not in (ConnectionState.CONNECTED, ConnectionState.RECONNECTED):
            return
        with self._lock:
            if self._closed:
                return
            snapshot = list(self._registered.items())
        for key, registration in snapshot:
            try:
                remade = self._check_registration(key, registration, change.session_id)
            except ZkRecipesError as exc:
                log.warning(
                    "re-registering %s: %s (the next connection tries again)",
                    registration.path,
                    exc,
                )
                continue
            if remade is None:
                continue
            with self._lock:
                current = self._registered.get(key)
                if current is registration and not self._closed:
                    written, remade.instance = remade.instance, current.instance
                    self._registered[key] = remade
                    updated = current.instance.to_json() != written.to_json()
                    then = "update" if updated else "keep"  # updated meanwhile: its value
                elif not self._closed and (
                    (current is not None and current.path == remade.path)
                    or (key in self._registering and remade.path == registration.path)
                ):
                    # Unregistered and registered again meanwhile (found by the chaos run):
                    # the node we took is the new registration's own, at the same path, or
                    # about to be (its register() under way): it stays.
                    then = "keep"
                else:
                    then = "delete"  # unregistered (or closed) while we made it again
            if then == "update":
                self.update(remade.instance)
            elif then == "delete":
                self._registrar.delete(remade)

    def _check_registration(
        self, key: tuple[str, str], registration: Registration, session: int
    ) -> Registration | None:
        """None when the registration's node is still there on its session; else made again."""
        kept = registration.session in (0, session)
        if kept:
            stat = self.client.exists(registration.path)
            if stat is not None and stat.czxid == registration.czxid:
                return None  # the same session, the node is there: leave it (no flap)
        log.info(
            "registering %s/%s again (%s)",
            key[0],
            key[1],
            "its node was gone" if kept else "a new session",
        )
        return self._registrar.create(registration.instance, again=True)

    # -- queries (steps: run blocking here, awaited by aio.ServiceDiscovery) ----
    def query_for_names(self) -> list[str]:
        """The service names under the base path, sorted."""
        return run_blocking(self._names_steps())

    def query_for_instances(self, name: str) -> list[ServiceInstance]:
        """Every readable instance of ``name``, sorted by id (unreadable ones skipped, logged)."""
        return run_blocking(self._instances_steps(name))

    def query_for_instance(self, name: str, id: str) -> ServiceInstance | None:
        """One instance, or None when it is not registered (or does not parse: logged)."""
        return run_blocking(self._instance_steps(name, id))

    def _names_steps(self) -> Steps[list[str]]:
        client = self.client
        try:
            names: list[str] = yield from request_steps(
                client, lambda: client.get_children_async(self.base_path)
            )
        except NoNodeError:
            return []
        return sorted(names)

    def _instances_steps(self, name: str) -> Steps[list[ServiceInstance]]:
        check_node_name(name, "a service name")
        directory = _paths.join(self.base_path, name)
        client = self.client
        try:
            ids: list[str] = yield from request_steps(
                client, lambda: client.get_children_async(directory)
            )
        except NoNodeError:
            return []
        # Pipelined: every read is sent before the first answer is awaited.
        pending = [(node, client.get_async(_paths.join(directory, node))) for node in ids]
        found: list[ServiceInstance] = []
        limit = client.settings.connection_timeout
        for node, reply in pending:
            path = _paths.join(directory, node)
            try:
                data, _stat = yield Reply(reply, limit)
            except NoNodeError:
                continue  # gone since the listing
            instance = read_instance(name, path, data)
            if instance is not None:
                found.append(instance)
        return sorted(found, key=lambda i: i.id)

    def _instance_steps(self, name: str, id: str) -> Steps[ServiceInstance | None]:
        check_node_name(name, "a service name")
        check_node_name(id, "an instance id")
        path = _paths.join(_paths.join(self.base_path, name), id)
        client = self.client
        try:
            data, _stat = yield from request_steps(client, lambda: client.get_async(path))
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


def _taken() -> set[str]:
    """The nodes every open ServiceDiscovery of this process keeps registered."""
    open_now = [d for d in list(_metrics.discoveries) if isinstance(d, ServiceDiscovery)]
    return {r.path for d in open_now for r in d._registrations()}
