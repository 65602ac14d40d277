"""ServiceInstance: one registered instance of a service, in curator-x-discovery's JSON.

``to_json()`` writes the bytes Curator 5.4's ``JsonInstanceSerializer``
writes in its default ("compatible") mode, key by key: ``name``, ``id``,
``address``, ``port``, ``sslPort``, ``payload``, ``registrationTimeUTC``,
``serviceType``, ``uriSpec``, and no ``enabled`` key (readers take it as
true; a disabled instance gets ``"enabled":false`` appended, which Curator's
readers understand). ``from_json()`` reads Curator's and ours, ignoring
unknown keys as Jackson is told to, and raises UnreadableInstanceError for
anything else.
"""

from __future__ import annotations

import dataclasses
import enum
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any

from zk_recipes._errors import ConfigurationError, UnreadableInstanceError
from zk_recipes.discovery import _json
from zk_recipes.discovery._payload import check_payload, from_wire, to_wire
from zk_recipes.discovery._uri_spec import UriSpec


class ServiceType(enum.Enum):
    """How an instance's node lives (Curator's ServiceType)."""

    #: Ephemeral: gone when the registering session ends (the usual case).
    DYNAMIC = "DYNAMIC"
    #: Ephemeral and sequential: the node is the id followed by a 10-digit sequence.
    DYNAMIC_SEQUENTIAL = "DYNAMIC_SEQUENTIAL"
    #: Persistent, deleted by ``unregister``/``close`` (Curator's STATIC).
    STATIC = "STATIC"
    #: Persistent, and left in place by ``close()`` (only ``unregister`` deletes it).
    PERMANENT = "PERMANENT"


def local_address() -> str | None:
    """This host's first non-loopback IPv4 address (Curator's builder default), else any."""
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        return None
    addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        if not address.startswith("127."):
            return address
    return addresses[0] if addresses else None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _new_id() -> str:
    return str(uuid.uuid4())


def check_node_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{what} must be a non-empty str, got {value!r}")
    if "/" in value or value in (".", "..") or "\x00" in value:
        raise ConfigurationError(
            f"{what} {value!r} is a znode name: no '/', no NUL, not '.' or '..'"
        )
    return value


def _check_port(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigurationError(f"{what} must be None or a port number 0-65535, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class ServiceInstance:
    """An instance of service ``name``: where it listens, and what it says about itself.

    Defaults as Curator's builder: a random UUID ``id``, this host's first
    non-loopback address, now as the registration time, DYNAMIC.
    """

    name: str
    id: str = dataclasses.field(default_factory=_new_id)
    address: str | None = dataclasses.field(default_factory=local_address)
    port: int | None = None
    ssl_port: int | None = None
    #: None, str, int, float, bool, or a dict starting with "@class" (see the discovery page).
    payload: Any = None
    registration_time_utc: int = dataclasses.field(default_factory=_now_ms)
    service_type: ServiceType = ServiceType.DYNAMIC
    uri_spec: UriSpec | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        check_node_name(self.name, "a service name")
        check_node_name(self.id, "an instance id")
        if self.address is not None and not isinstance(self.address, str):
            raise ConfigurationError(f"address must be a str or None, got {self.address!r}")
        _check_port(self.port, "port")
        _check_port(self.ssl_port, "ssl_port")
        time_ms = self.registration_time_utc
        if isinstance(time_ms, bool) or not isinstance(time_ms, int):
            raise ConfigurationError(
                f"registration_time_utc is milliseconds since 1970 (an int), got {time_ms!r}"
            )
        if isinstance(self.service_type, str):
            try:
                object.__setattr__(self, "service_type", ServiceType(self.service_type.upper()))
            except ValueError:
                raise ConfigurationError(
                    f"service_type must be one of {[t.value for t in ServiceType]}, "
                    f"got {self.service_type!r}"
                ) from None
        spec: object = self.uri_spec  # a template string is taken too
        if isinstance(spec, str):
            object.__setattr__(self, "uri_spec", UriSpec(spec))
        elif spec is not None and not isinstance(spec, UriSpec):
            raise ConfigurationError(f"uri_spec must be a UriSpec or a str, got {spec!r}")
        if not isinstance(self.enabled, bool):
            raise ConfigurationError(f"enabled must be a bool, got {self.enabled!r}")
        check_payload(self.payload, where=f"instance {self.id} of {self.name}")

    def __hash__(self) -> int:
        return hash((self.name, self.id, self.registration_time_utc))

    def build_uri(self, variables: Mapping[str, object] = {}) -> str:
        """The instance's URI from its ``uri_spec`` (ValueError without one)."""
        if self.uri_spec is None:
            raise ConfigurationError(f"instance {self.id} of {self.name} has no uri_spec")
        return self.uri_spec.build(self, variables)

    def replace(self, **changes: Any) -> ServiceInstance:
        """A copy with ``changes`` (to ``update()`` a registered instance)."""
        return dataclasses.replace(self, **changes)

    # -- the JSON ----------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "name": self.name,
            "id": self.id,
            "address": self.address,
            "port": self.port,
            "sslPort": self.ssl_port,
            "payload": to_wire(self.payload),
            "registrationTimeUTC": self.registration_time_utc,
            "serviceType": self.service_type.value,
            "uriSpec": self.uri_spec.to_wire() if self.uri_spec is not None else None,
        }
        if not self.enabled:
            body["enabled"] = False
        return body

    def to_json(self) -> bytes:
        """The node's bytes, as Curator's JsonInstanceSerializer writes them."""
        return _json.dumps(self.to_wire()).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, where: str = "") -> ServiceInstance:
        """Read a node written by Curator or by us; UnreadableInstanceError says what is wrong."""
        place = f" ({where})" if where else ""
        try:
            body = _json.loads(data)
        except (UnicodeDecodeError, ValueError) as exc:
            raise UnreadableInstanceError(f"not JSON{place}: {exc}") from None
        if not isinstance(body, dict):
            raise UnreadableInstanceError(f"not a JSON object{place}: {data[:80]!r}")
        try:
            uri = body.get("uriSpec")
            return cls(
                name=body.get("name"),  # type: ignore[arg-type]
                id=body.get("id"),  # type: ignore[arg-type]
                address=body.get("address"),
                port=body.get("port"),
                ssl_port=body.get("sslPort"),
                payload=from_wire(body.get("payload")),
                registration_time_utc=body.get("registrationTimeUTC", 0),
                service_type=body.get("serviceType") or ServiceType.DYNAMIC,
                uri_spec=UriSpec.from_wire(uri) if uri is not None else None,
                enabled=body.get("enabled", True),
            )
        except (ConfigurationError, ValueError) as exc:
            raise UnreadableInstanceError(f"not a service instance{place}: {exc}") from None
