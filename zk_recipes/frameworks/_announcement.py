"""This process as an instance of a service, registered while it serves: the faces' ``SERVICE``.

Django's ``ZK_RECIPES["default"]["SERVICE"]``, Flask's ``ZK_RECIPES_SERVICE``
(or ``ZkRecipes(app, service=...)``) and whatever the next face calls it are
one setting (``SERVICE_SETTING``, read by ``read_settings(extra=...)``) and
one object (``Announcement``):

- ``start()`` registers in the background and returns at once: serving never
  waits for ZooKeeper, and an ensemble that is down is retried every
  ``RETRY`` seconds until it comes (a log line says so once).
- ``stop()`` unregisters now (the node is deleted, not left for the session
  to expire) and is idempotent; it is also registered with ``atexit``, the
  fallback for servers that run no shutdown hook.
- **Per process.** Each process that serves registers its own instance (a
  random id, or ``ID``), and a forked child starts afresh: the parent's
  registration is the parent's. With ``PER_HOST`` the id is
  ``<host>-<port>``: the first process of the host registers it, the others
  stand by and take over when its node goes (one instance per host, whatever
  the number of workers).
- A session that ends is followed by the ServiceDiscovery itself: the
  instance is registered again with the next session.
- **SIGTERM withdraws.** A process whose SIGTERM does what it does by default
  (dies at once: ``flask run``, ``runserver --noreload``, a plain script)
  would leave its instance registered until its session expires. When an
  announcement starts on the main thread of such a process, SIGTERM first
  withdraws this process's instances (bounded to a second), then kills the
  process as before. A server with a SIGTERM handler of its own (gunicorn,
  uvicorn, Celery) is left alone: its shutdown hooks withdraw. Under a dev
  server's auto-reloader the parent kills its serving child with SIGKILL,
  which nothing can catch: the instance then stays for the session timeout.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import logging
import os
import signal
import socket
import threading
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from zk_recipes import (
    ConfigurationError,
    NodeExistsError,
    ServiceDiscovery,
    ServiceInstance,
    ServiceType,
    Setting,
    UriSpec,
    ZkClient,
    ZkRecipesError,
    validate_path,
)

log = logging.getLogger("zk_recipes.frameworks")

#: Seconds between two tries while ZooKeeper is unreachable (or another process holds
#: the host's instance, with PER_HOST).
RETRY = 1.0
#: The announcements started in this process (withdrawn on SIGTERM, see the module note).
_started: weakref.WeakSet[Announcement] = weakref.WeakSet()
#: Seconds SIGTERM waits for the withdrawals before the process dies of it.
SIGTERM_WITHDRAW = 1.0
_KEYS = {
    "name",
    "port",
    "ssl_port",
    "address",
    "id",
    "payload",
    "uri_spec",
    "service_type",
    "base_path",
    "per_host",
}


@dataclasses.dataclass(frozen=True)
class ServiceSpec:
    """The ``SERVICE`` setting, checked: what this process registers, and where."""

    name: str
    port: int | None = None
    ssl_port: int | None = None
    address: str | None = None
    id: str | None = None
    payload: Any = None
    uri_spec: str | None = None
    service_type: ServiceType = ServiceType.DYNAMIC
    base_path: str = "/services"
    per_host: bool = False

    def instance(self) -> ServiceInstance:
        """A new instance of this process (its id: ``id``, ``<host>-<port>``, or random)."""
        options: dict[str, Any] = {
            "port": self.port,
            "ssl_port": self.ssl_port,
            "payload": self.payload,
            "uri_spec": self.uri_spec,
            "service_type": self.service_type,
        }
        if self.address is not None:
            options["address"] = self.address
        if self.id is not None:
            options["id"] = self.id
        elif self.per_host:
            options["id"] = f"{socket.gethostname()}-{self.port or self.ssl_port or 0}"
        return ServiceInstance(name=self.name, **options)


def parse_service(value: object, text: bool) -> ServiceSpec | None:
    """``{"name": ..., "port": ...}`` (any key case), or that as JSON text (environment, files)."""
    if value is None:
        return None
    if isinstance(value, ServiceSpec):
        return value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ConfigurationError(f'must be JSON like {{"name": "orders"}}: {exc}') from None
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f'must be a dict like {{"NAME": "orders", "PORT": 8000}}, got {value!r}'
        )
    options = {str(key).lower(): item for key, item in value.items()}
    unknown = sorted(set(options) - _KEYS)
    if unknown:
        raise ConfigurationError(
            f"has no key {', '.join(k.upper() for k in unknown)}; "
            f"its keys are {', '.join(sorted(k.upper() for k in _KEYS))}"
        )
    if "name" not in options:
        raise ConfigurationError("needs a NAME: the service this process is an instance of")
    service_type = options.get("service_type", "DYNAMIC")
    if isinstance(service_type, str):
        try:
            options["service_type"] = ServiceType(service_type.upper())
        except ValueError:
            raise ConfigurationError(
                f"SERVICE_TYPE must be one of {', '.join(t.value for t in ServiceType)}, "
                f"got {service_type!r}"
            ) from None
    if "base_path" in options:
        options["base_path"] = validate_path(options["base_path"], what="BASE_PATH")
    if "uri_spec" in options and options["uri_spec"] is not None:
        UriSpec(str(options["uri_spec"]))  # a bad template fails now, not at start-up
    if not isinstance(options.get("per_host", False), bool):
        raise ConfigurationError(f"PER_HOST must be True or False, got {options['per_host']!r}")
    spec = ServiceSpec(**options)
    spec.instance()  # every field checked now, with ServiceInstance's messages
    return spec


SERVICE_SETTING = Setting(
    name="service",
    type="dict",
    default=None,
    meaning="Register this process as an instance of a service while it serves "
    "(docs/recipes/discovery.md): NAME, PORT, and optionally SSL_PORT, ADDRESS, ID, "
    "PAYLOAD, URI_SPEC, SERVICE_TYPE, BASE_PATH (/services), PER_HOST",
    parse=parse_service,
    example={"NAME": "orders", "PORT": 8000},
)


class Announcement:
    """One process's registration of ``spec``, with the client ``client_source()`` gives."""

    def __init__(self, spec: ServiceSpec, client_source: Callable[[], ZkClient]) -> None:
        self.spec = spec
        self._client_source = client_source
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pid = -1
        self._thread: threading.Thread | None = None
        self._discovery: ServiceDiscovery | None = None
        #: The instance registered, once it is.
        self.instance: ServiceInstance | None = None
        self.registered = threading.Event()

    def start(self) -> None:
        """Register in the background (idempotent in a process; a fork starts afresh)."""
        with self._lock:
            if self._pid == os.getpid() and not self._stop.is_set():
                return
            self._pid = os.getpid()
            self._stop = threading.Event()
            self.registered = threading.Event()
            self.instance = None
            self._discovery = None
            stop = self._stop
            self._thread = threading.Thread(
                target=self._register, args=(stop,), name="zk-recipes announce", daemon=True
            )
            self._thread.start()
        atexit.register(self.stop)
        _started.add(self)
        _withdraw_on_sigterm()

    def stop(self, timeout: float = 5.0) -> None:
        """Unregister now (the node is deleted); idempotent."""
        with self._lock:
            if self._pid != os.getpid():
                return  # another process's registration (we were forked): not ours to end
            self._stop.set()
            thread, discovery, instance = self._thread, self._discovery, self.instance
            self._discovery = None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if discovery is not None:
            with contextlib.suppress(ZkRecipesError):
                discovery.close()
            log.info("unregistered %s/%s", self.spec.name, instance.id if instance else "-")

    def _register(self, stop: threading.Event) -> None:
        said = False
        instance = self.spec.instance()
        while not stop.is_set():
            try:
                client = self._client_source()
                discovery = ServiceDiscovery(client, self.spec.base_path).start()
                discovery.register(instance)
            except NodeExistsError as exc:
                if not self.spec.per_host:
                    log.error(
                        "not registering %s/%s: %s. Give each process its own ID (or none: a "
                        "random one), or set PER_HOST for one instance per host",
                        self.spec.name,
                        instance.id,
                        exc,
                    )
                    return
                # Another process of this host has it: stand by until its node goes.
                stop.wait(RETRY)
                continue
            except ZkRecipesError as exc:
                if not said:
                    log.warning(
                        "registering %s/%s: %s; trying again every %gs",
                        self.spec.name,
                        instance.id,
                        exc,
                        RETRY,
                    )
                    said = True
                stop.wait(RETRY)
                continue
            with self._lock:
                if stop.is_set():
                    late = discovery
                else:
                    self._discovery, self.instance, late = discovery, instance, None
            if late is not None:
                late.close()  # stop() came while we registered
                return
            log.info("registered %s/%s in %s", instance.name, instance.id, self.spec.base_path)
            self.registered.set()
            return


def _withdraw_on_sigterm() -> None:
    """Make SIGTERM withdraw this process's instances first, where it would kill at once.

    Only from the main thread (the only one that may set a handler), and only
    over SIGTERM's default action: a server's own handler runs its shutdown
    hooks, which withdraw.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: object) -> None:
        def withdraw() -> None:
            for announcement in list(_started):
                announcement.stop(SIGTERM_WITHDRAW)

        withdrawing = threading.Thread(target=withdraw, name="zk-recipes withdraw on SIGTERM")
        withdrawing.daemon = True
        withdrawing.start()
        withdrawing.join(SIGTERM_WITHDRAW)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # and die of it, as before

    signal.signal(signal.SIGTERM, on_sigterm)
