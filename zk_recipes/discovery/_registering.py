"""Writing a registration: an instance's node made, made once, and deleted, as its holder.

The writes of ``ServiceDiscovery`` (``_discovery.py``'s module note says
what they promise):

- a DYNAMIC, STATIC or PERMANENT node is created, or, when it exists and is
  ours (a lost reply, or an earlier registration of the same id whose delete
  still waits for the connection), taken back: that pending delete is
  cancelled first and the value set at the version seen, on the node's
  session (review 3, D1);
- a DYNAMIC_SEQUENTIAL node is created once: after a lost reply the node is
  looked for (named ``<id><10 digits>``, our live session, our JSON, and not
  registered by another ServiceDiscovery of this process) before a second
  create (D2);
- a registration is deleted on its session only, at the version we wrote
  (ephemeral nodes) and by czxid, so a delete left pending deletes no
  registration made again meanwhile.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import (
    BadVersionError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    SessionLost,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._types import CreateMode, ZnodeStat
from zk_recipes.discovery._instance import ServiceInstance, ServiceType

log = logging.getLogger("zk_recipes.discovery")

MODES = {
    ServiceType.DYNAMIC: CreateMode.EPHEMERAL,
    ServiceType.DYNAMIC_SEQUENTIAL: CreateMode.EPHEMERAL_SEQUENTIAL,
    ServiceType.STATIC: CreateMode.PERSISTENT,
    ServiceType.PERMANENT: CreateMode.PERSISTENT,
}


@dataclasses.dataclass
class Registration:
    """One instance this process keeps registered, and its node."""

    instance: ServiceInstance
    #: The node (for DYNAMIC_SEQUENTIAL: with its sequence), relative to the namespace.
    path: str
    #: The session that created it (0 for a persistent node: any session keeps it).
    session: int
    #: The node's czxid, and the version of our last write to it.
    czxid: int = 0
    version: int = -1


def owner_of(stat: ZnodeStat) -> int:
    """The session a registration's node goes with (0: a persistent node)."""
    return stat.ephemeral_owner


class Registrar:
    """The writes of one ServiceDiscovery under ``base_path``.

    ``taken()``: the nodes every ServiceDiscovery of this process keeps
    registered (a lost reply's search must not take another's node).
    """

    def __init__(self, client: ZkClient, base_path: str, taken: Callable[[], set[str]]) -> None:
        self.client = client
        self.base_path = base_path
        self._taken = taken

    def path(self, instance: ServiceInstance) -> str:
        return _paths.join(_paths.join(self.base_path, instance.name), instance.id)

    def create(self, instance: ServiceInstance, *, again: bool = False) -> Registration:
        path = self.path(instance)
        mode = MODES[instance.service_type]
        data = instance.to_json()
        client = self.client
        if mode.is_sequential:
            registration = self._create_sequential(instance, path, data)
        else:
            registration = self._create_fixed(instance, path, mode, data)
        if again:
            _metrics.count("zk_recipes_service_reregistrations_total", service=instance.name)
        log.debug("%s registered (session %#x)", registration.path, client.session_id)
        return registration

    def _create_fixed(
        self, instance: ServiceInstance, path: str, mode: CreateMode, data: bytes
    ) -> Registration:
        """A DYNAMIC, STATIC or PERMANENT instance's node: made, or ours already and set."""
        client = self.client
        for _attempt in range(5):
            try:
                made = client.create(
                    path, data, mode=mode, parents=True, replace_stale=mode is CreateMode.EPHEMERAL
                )
                made_stat = made.stat
                return Registration(
                    instance, made.path, owner_of(made_stat), made_stat.czxid, made_stat.version
                )
            except NodeExistsError:
                pass
            stat = client.retry(functools.partial(client.exists, path))
            if stat is None:
                continue  # deleted meanwhile: make it
            owner = stat.ephemeral_owner
            if mode.is_ephemeral and client.session_epoch(owner) is None:
                raise NodeExistsError(
                    f"instance {instance.id} of {instance.name} is registered by another "
                    f"session ({owner:#x}): instance ids must be unique; pick another id",
                    path,
                ) from None
            # Ours (a reply lost, or an earlier registration whose delete waits for the
            # connection: that delete must not take it now), or persistent: its value is ours.
            client.cancel_pending_delete(path)
            try:
                written = client.retry(
                    functools.partial(client.set, path, data, stat.version, session=owner or None)
                )
            except (NoNodeError, BadVersionError):
                continue  # deleted (by a delete under way) or written meanwhile: look again
            return Registration(instance, path, owner, written.czxid, written.version)
        raise NodeExistsError(f"could not register {path}: it keeps changing; try again", path)

    def _create_sequential(self, instance: ServiceInstance, path: str, data: bytes) -> Registration:
        """A DYNAMIC_SEQUENTIAL instance's node, made once even when a reply is lost (D2)."""
        client = self.client
        for _attempt in range(5):
            try:
                made = client.create(
                    path, data, mode=CreateMode.EPHEMERAL_SEQUENTIAL, parents=True, retry=False
                )
                stat = made.stat
                return Registration(instance, made.path, owner_of(stat), stat.czxid, stat.version)
            except (ConnectionLostError, ZkTimeoutError, SessionLost):
                found = client.retry(lambda: self._sequential_of(path, data))
                if found is not None:
                    node, stat = found
                    return Registration(instance, node, owner_of(stat), stat.czxid, stat.version)
        raise ConnectionLostError(f"could not register {path}: the connection keeps failing")

    def _sequential_of(self, path: str, data: bytes) -> tuple[str, ZnodeStat] | None:
        """After a lost reply: the node a sequential create of ``path`` made, if it made one.

        Ours: named ``<id><10 digits>``, owned by our live session, holding our
        JSON, and registered by no ServiceDiscovery of this process.
        """
        client = self.client
        client.wait_connected(client.settings.connection_timeout)
        parent, prefix = _paths.parent_of(path), _paths.name_of(path)
        try:
            names = client.get_children(parent)
        except NoNodeError:
            return None
        taken = self._taken()
        for name in sorted(names):
            node = _paths.join(parent, name)
            tail = name[len(prefix) :]
            if not name.startswith(prefix) or len(tail) != 10 or not tail.isdigit():
                continue
            if node in taken:
                continue
            try:
                found, stat = client.get(node)
            except NoNodeError:
                continue
            if found == data and client.session_epoch(stat.ephemeral_owner) is not None:
                return node, stat
        return None

    def delete(self, registration: Registration) -> None:
        """Delete our node, as its holder; a delete left pending deletes only this node."""
        ephemeral = registration.session != 0
        try:
            self.client.delete(
                registration.path,
                registration.version if ephemeral else -1,
                guaranteed=True,
                session=registration.session or None,
                czxid=registration.czxid or None,
            )
        except ZkRecipesError as exc:
            log.warning("unregistering %s: %s", registration.path, exc)
