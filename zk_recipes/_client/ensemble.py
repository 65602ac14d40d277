"""The ensemble as the servers describe it: ``/zookeeper/config``'s data, parsed.

What a client follows (``ensemble_tracking.py``) and what ``zk-recipes
ensemble`` reads. The node's data is the dynamic config: ``server.<id>=<address>:<quorum
port>:<election port>[:participant|:observer];[<client address>:]<client
port>`` lines and ``version=<hex>``. The client address is what we connect
to; a wildcard one (``0.0.0.0``, ``::``) means "the server's own address";
a server with no client part serves no clients and is left out (as Curator
does). Observers are included: they serve clients too.

A config with no server a client can use raises ``NothingToFollow`` (a
standalone server, a static configuration); one that does not parse,
``EnsembleConfigError``.
"""

from __future__ import annotations

import dataclasses
import random

from zk_recipes._errors import ConfigurationError

#: The server's own node, outside every namespace.
CONFIG_NODE = "/zookeeper/config"

_ROLES = ("participant", "observer")
_WILDCARDS = ("0.0.0.0", "::", "[::]", "0:0:0:0:0:0:0:0")


class EnsembleConfigError(ConfigurationError):
    """``/zookeeper/config`` names no server a client can use, or does not parse."""


class NothingToFollow(EnsembleConfigError):
    """The config names no client address: a static configuration, nothing to follow."""


@dataclasses.dataclass(frozen=True)
class EnsembleServer:
    """One server of the ensemble, as its dynamic config names it."""

    #: Its ``myid``.
    id: int
    #: Where clients connect (the server's own address for a wildcard client address).
    host: str
    port: int
    #: ``"participant"`` (votes) or ``"observer"``.
    role: str

    @property
    def address(self) -> str:
        """``host:port`` (IPv6 hosts in brackets), as a connect string entry."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclasses.dataclass(frozen=True)
class Ensemble:
    """The ensemble a client follows: its servers and the config version they came with."""

    servers: tuple[EnsembleServer, ...]
    #: The config's ``version`` (the zxid of the reconfig that made it); 0 when it had none.
    version: int

    @property
    def hosts(self) -> str:
        """The servers as a connect string, in ``id`` order."""
        return ",".join(server.address for server in self.servers)

    def connect_order(self, prefer_observers: bool = False) -> tuple[str, bool]:
        """The connect string to hand kazoo, and whether kazoo should shuffle it.

        Preferring observers, and with some: the observers first, then the
        voters, each group shuffled here (so the clients of many processes
        spread over the observers) and kept in that order by kazoo, which tries
        the hosts in turn. Else ``hosts``, shuffled by kazoo.
        """
        observers = [s.address for s in self.servers if s.role == "observer"]
        if not prefer_observers or not observers:
            return self.hosts, True
        voters = [s.address for s in self.servers if s.role != "observer"]
        ordered = random.sample(observers, len(observers)) + random.sample(voters, len(voters))
        return ",".join(ordered), False

    @staticmethod
    def from_config(data: bytes) -> Ensemble:
        """The ensemble ``/zookeeper/config``'s data names (EnsembleConfigError if none)."""
        return parse_config(data)


def _split_host_port(text: str, where: str) -> tuple[str, int]:
    text = text.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise EnsembleConfigError(f"{where}: {text!r} is not [ipv6]:port")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise EnsembleConfigError(f"{where}: {text!r} is not host:port")
    try:
        port = int(port_text)
    except ValueError:
        raise EnsembleConfigError(f"{where}: port {port_text!r} is not a number") from None
    if not 0 < port < 65536 or not host:
        raise EnsembleConfigError(f"{where}: {text!r} is not host:port")
    return host, port


def _server(key: str, value: str) -> EnsembleServer | None:
    """One ``server.N=...`` line; None for a server that serves no clients."""
    where = f"{key}={value}"
    try:
        myid = int(key.split(".", 1)[1])
    except ValueError:
        raise EnsembleConfigError(f"{where}: the server id is not a number") from None
    quorum, has_client, client = value.partition(";")
    if not has_client or not client.strip():
        return None
    parts = quorum.strip()
    role = "participant"
    for candidate in _ROLES:
        if parts.endswith(":" + candidate):
            role, parts = candidate, parts[: -len(candidate) - 1]
    # <address>:<quorum port>:<election port>: the address is what is left of two ports.
    address = parts.rsplit(":", 2)[0]
    if not address or address == parts:
        raise EnsembleConfigError(f"{where}: no server address before the ports")
    address = address.strip("[]")
    client = client.strip()
    if ":" in client.replace("[", "").replace("]", "") or client.startswith("["):
        host, port = _split_host_port(client, where)
        host = host.strip("[]")
    else:
        host, port = address, _split_host_port(f"x:{client}", where)[1]
    if host in _WILDCARDS:
        host = address
    return EnsembleServer(myid, host, port, role)


def parse_config(data: bytes) -> Ensemble:
    """The ensemble that ``/zookeeper/config``'s data names (EnsembleConfigError if none)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise EnsembleConfigError("the config is not UTF-8 text") from None
    servers: dict[int, EnsembleServer] = {}
    version = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise EnsembleConfigError(f"{line!r} is not key=value")
        key = key.strip()
        if key == "version":
            try:
                version = int(value.strip(), 16)
            except ValueError:
                raise EnsembleConfigError(f"version {value!r} is not hexadecimal") from None
        elif key.startswith("server."):
            server = _server(key, value)
            if server is not None:
                servers[server.id] = server
    if not servers:
        raise NothingToFollow(
            "the config names no server with a client address (a standalone server, or a "
            "static configuration without dynamic reconfiguration): nothing to follow"
        )
    return Ensemble(tuple(servers[i] for i in sorted(servers)), version)


def version_of(data: bytes) -> int | None:
    for line in data.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "version":
            try:
                return int(value.strip(), 16)
            except ValueError:
                return None
    return None
