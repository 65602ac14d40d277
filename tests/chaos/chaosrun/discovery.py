"""Discovery under chaos: workers register, update, flap and close instances; the parent watches.

Worker side (``Registrar``, a thread of each worker, on the worker's one
client): a ``ServiceDiscovery`` keeps ``dynamic`` DYNAMIC instances
(``<worker>-d<k>``) and one DYNAMIC_SEQUENTIAL one (``<worker>-s<k>``: its
node is the id and ten digits) registered in one service, and every
``every`` seconds changes something: updates an instance (a new port), flaps
one (``unregister`` then ``register``: the same id for a DYNAMIC one, a new
id for the sequential one), retires a DYNAMIC id for a new one, or closes
the whole ``ServiceDiscovery`` and registers everything again from a new
one. Each call is recorded when it is made (``sd_reg``, ``sd_unreg``,
``sd_close``, ``sd_upd``) and a registration again when it returned
(``sd_reg_ok``) or failed (``sd_reg_err``): the checker's intervals of
"held registered" and "may still be visible" come from these.

Parent side (``Observer``): a client of its own, straight to the ensemble
(never faulted itself), lists the service every ``every`` seconds: ``sync``
(the server it talks to catches up with the leader), ``getChildren``, one
``exists`` per node for its ephemeral owner. Each listing is a snapshot
with the times it was begun (after every write committed before then) and
ended: a node listed had not been deleted before ``t0``; a node missing was
absent at some moment in ``[t0, t1]``. A listing that fails (no leader) is
not a snapshot: the checker reads gaps as "not seen", never as absent.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
from pathlib import Path

from zk_recipes import (
    NoNodeError,
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
    ZkClient,
    ZkRecipesError,
)

from .store import EventRecorder, connect, record_snapshot


def instance_of(node: str) -> str:
    """The instance id a node of the service stands for (a sequential one ends in ten digits)."""
    return node[:-10] if "-s" in node and node[-10:].isdigit() else node


class Registrar:
    """One worker's instances and what it does to them (see the module note)."""

    def __init__(
        self,
        client: ZkClient,
        *,
        worker: str,
        events: EventRecorder,
        base_path: str,
        service: str,
        dynamic: int,
        every: tuple[float, float],
        seed: int,
    ) -> None:
        self._client = client
        self._worker = worker
        self._events = events
        self._base = base_path
        self._service = service
        self._every = every
        self._rng = random.Random(seed)
        self._numbers = itertools.count(dynamic)
        self._ports = itertools.count(20000)
        #: The ids this worker wants registered, and their type.
        self._wanted: dict[str, ServiceType] = {
            f"{worker}-d{k}": ServiceType.DYNAMIC for k in range(dynamic)
        }
        self._wanted[self._new_id("s")] = ServiceType.DYNAMIC_SEQUENTIAL
        #: What the ServiceDiscovery holds registered now.
        self._held: dict[str, ServiceInstance] = {}
        self._discovery = ServiceDiscovery(client, base_path).start()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos registrar", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop, then close the ServiceDiscovery (which deletes every instance)."""
        self._stop.set()
        self._thread.join(60.0)
        self._close_discovery()

    def _new_id(self, kind: str) -> str:
        return f"{self._worker}-{kind}{next(self._numbers)}"

    def _run(self) -> None:
        while not self._stop.wait(self._rng.uniform(*self._every)):
            try:
                self._step()
            except ZkRecipesError as exc:
                self._events.record("sd_error", detail=repr(exc)[:200])

    def _step(self) -> None:
        missing = [key for key in self._wanted if key not in self._held]
        if missing:  # made again after a failed register
            self._register(missing[0])
            return
        rng, draw = self._rng, self._rng.random()
        key = rng.choice(sorted(self._held))
        if draw < 0.45:
            instance = self._held[key].replace(port=next(self._ports))
            self._events.record("sd_upd", path=key)
            self._discovery.update(instance)
            self._held[key] = instance
        elif draw < 0.75:  # flap: unregister, register again
            self._unregister(key)
            if self._wanted[key] is ServiceType.DYNAMIC_SEQUENTIAL:
                del self._wanted[key]
                key = self._new_id("s")
                self._wanted[key] = ServiceType.DYNAMIC_SEQUENTIAL
            self._register(key)
        elif draw < 0.9:  # retire a DYNAMIC id for a new one
            dynamic = sorted(k for k, t in self._wanted.items() if t is ServiceType.DYNAMIC)
            retired = rng.choice(dynamic)
            self._unregister(retired)
            del self._wanted[retired]
            key = self._new_id("d")
            self._wanted[key] = ServiceType.DYNAMIC
            self._register(key)
        else:  # close the ServiceDiscovery and register everything from a new one
            self._close_discovery()
            self._discovery = ServiceDiscovery(self._client, self._base).start()
            for key in list(self._wanted):
                self._register(key)

    def _register(self, key: str) -> None:
        instance = ServiceInstance(
            name=self._service,
            id=key,
            address="127.0.0.1",
            port=next(self._ports),
            service_type=self._wanted[key],
        )
        self._events.record("sd_reg", path=key, detail=instance.service_type.name)
        try:
            self._discovery.register(instance)
        except ZkRecipesError as exc:
            self._events.record("sd_reg_err", path=key, detail=repr(exc)[:200])
            return
        self._held[key] = instance
        self._events.record("sd_reg_ok", path=key)

    def _unregister(self, key: str) -> None:
        instance = self._held.pop(key)
        self._events.record("sd_unreg", path=key)
        self._discovery.unregister(instance)

    def _close_discovery(self) -> None:
        for key in sorted(self._held):
            self._events.record("sd_close", path=key)
        self._held.clear()
        with contextlib.suppress(ZkRecipesError):
            self._discovery.close()


class Observer:
    """The parent's view of the service: a snapshot every ``every`` seconds (module note)."""

    def __init__(self, client: ZkClient, path: str, every: float, db_path: Path) -> None:
        self._client = client
        self._path = path
        self._every = every
        self._db_path = db_path
        self.snapshots = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos observer", daemon=True)

    def start(self) -> Observer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30.0)

    def _run(self) -> None:
        conn = connect(self._db_path)
        try:
            while not self._stop.wait(self._every):
                t0 = time.monotonic_ns()
                try:
                    nodes = self._list()
                except ZkRecipesError:
                    self.failures += 1
                    continue
                record_snapshot(conn, t0, time.monotonic_ns(), json.dumps(nodes))
                self.snapshots += 1
        finally:
            conn.close()

    def _list(self) -> list[tuple[str, int | None]]:
        client, path = self._client, self._path
        try:
            client.sync(path)
            names = client.get_children(path)
        except NoNodeError:  # a container reaped once empty
            return []
        wait = client.settings.connection_timeout
        replies = [(name, client.exists_async(f"{path}/{name}")) for name in names]
        found: list[tuple[str, int | None]] = []
        for name, reply in replies:
            stat = reply.result(wait)
            found.append((name, None if stat is None else stat.ephemeral_owner))
        return found
