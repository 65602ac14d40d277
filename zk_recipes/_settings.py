"""The client's one frozen settings object.

Every way of configuring a client ends here: keyword arguments to
``ZkClient``, Django's ``ZK_RECIPES`` dict, Flask's ``ZK_RECIPES_*`` keys and
Celery's ``zk_recipes_*`` settings are all turned into a ``ClientSettings``,
which checks every value once, at construction, and says what to fix.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from zk_recipes._errors import ConfigurationError, InvalidPathError, shown
from zk_recipes._paths import DEFAULT_MAX_DATA_BYTES, normalize_namespace
from zk_recipes._retry import ExponentialBackoffRetry, RetryPolicy
from zk_recipes._types import Acl

_HOSTS_HELP = "expected 'host:port[,host:port...]', e.g. 'zk1:2181,zk2:2181,zk3:2181'"


@dataclasses.dataclass(frozen=True)
class TlsOptions:
    """TLS to ZooKeeper's secure client port (``secureClientPort``)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: str | None = None
    verify_certs: bool = True
    check_hostname: bool = True


def parse_hosts(hosts: object) -> tuple[tuple[str, int], ...]:
    """Parse a connect string into (host, port) pairs; raise ConfigurationError if malformed."""
    if isinstance(hosts, str):
        if "://" in hosts:
            raise ConfigurationError(
                f"hosts {hosts!r} looks like a URL; give host:port pairs, {_HOSTS_HELP}"
            )
        if ";" in hosts:
            raise ConfigurationError(
                f"hosts {hosts!r} uses ';' between servers; separate them with commas, "
                f"{_HOSTS_HELP}"
            )
        entries = hosts.split(",")
    elif isinstance(hosts, Sequence) and all(isinstance(h, str) for h in hosts):
        entries = list(hosts)
    else:
        raise ConfigurationError(f"hosts must be a str, {_HOSTS_HELP}; got {hosts!r}")
    if not entries or all(not e.strip() for e in entries):
        raise ConfigurationError(f"hosts is empty: {_HOSTS_HELP}")
    parsed: list[tuple[str, int]] = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            raise ConfigurationError(f"hosts {hosts!r} has an empty entry; {_HOSTS_HELP}")
        if "/" in entry:
            chroot = "/" + entry.split("/", 1)[1]
            raise ConfigurationError(
                f"hosts {hosts!r} contains a path, {chroot!r}: hosts are host:port pairs; "
                "give the chroot as namespace= instead"
            )
        if entry.startswith("["):  # [ipv6]:port
            host, sep, rest = entry[1:].partition("]")
            if not sep:
                raise ConfigurationError(f"hosts entry {entry!r} has an unclosed '['")
            port_text = rest[1:] if rest.startswith(":") else ("" if not rest else None)
            if port_text is None:
                raise ConfigurationError(f"hosts entry {entry!r}: {_HOSTS_HELP}")
        elif entry.count(":") > 1:
            raise ConfigurationError(
                f"hosts entry {entry!r}: write IPv6 addresses in brackets, like '[::1]:2181'"
            )
        else:
            host, _, port_text = entry.partition(":")
        if not host or any(c.isspace() for c in host):
            raise ConfigurationError(f"hosts entry {entry!r} has no valid host name; {_HOSTS_HELP}")
        port = 2181
        if port_text:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ConfigurationError(
                    f"hosts entry {entry!r}: port must be a number from 1 to 65535"
                )
            port = int(port_text)
        parsed.append((host, port))
    return tuple(parsed)


def _positive_seconds(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"{name} must be a positive, finite number of seconds, got {shown(value, 0)}"
        )
    return float(value)


@dataclasses.dataclass(frozen=True)
class ClientSettings:
    """Everything a ZkClient needs, validated once.

    Times are in seconds. ``simulated_expiry_fraction`` is the share of the
    negotiated session timeout after the last reply from the server at which
    the client declares the session LOST by itself (see docs/client.md).
    """

    hosts: str
    namespace: str = ""
    session_timeout: float = 10.0
    connection_timeout: float = 15.0
    retry_policy: RetryPolicy = dataclasses.field(
        default_factory=lambda: ExponentialBackoffRetry(0.1, 5)
    )
    auth: tuple[tuple[str, str], ...] = ()
    sasl: Mapping[str, str] | None = None
    default_acl: tuple[Acl, ...] | None = None
    tls: TlsOptions | None = None
    read_only: bool = False
    track_ensemble: bool = True
    prefer_observers: bool = False
    simulated_expiry_fraction: float = 0.66
    max_data_bytes: int = DEFAULT_MAX_DATA_BYTES

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        host_pairs = parse_hosts(self.hosts)
        set_(
            self, "hosts", ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in host_pairs)
        )
        try:
            set_(self, "namespace", normalize_namespace(self.namespace))
        except InvalidPathError as exc:
            raise ConfigurationError(str(exc)) from exc
        set_(self, "session_timeout", _positive_seconds("session_timeout", self.session_timeout))
        set_(
            self,
            "connection_timeout",
            _positive_seconds("connection_timeout", self.connection_timeout),
        )
        if not isinstance(self.retry_policy, RetryPolicy):
            raise ConfigurationError(
                f"retry_policy must be a RetryPolicy such as ExponentialBackoffRetry(0.1, 5), "
                f"got {self.retry_policy!r}"
            )
        auth = tuple(self.auth)
        for item in auth:
            if (
                not isinstance(item, tuple)
                or len(item) != 2
                or not all(isinstance(x, str) for x in item)
            ):
                raise ConfigurationError(
                    f"auth entries must be (scheme, credential) pairs like ('digest', 'user:pw'), "
                    f"got {item!r}"
                )
        set_(self, "auth", auth)
        if self.sasl is not None:
            if not isinstance(self.sasl, Mapping) or "mechanism" not in self.sasl:
                raise ConfigurationError(
                    "sasl must be a mapping with at least 'mechanism' ('DIGEST-MD5' or 'GSSAPI'), "
                    f"got {self.sasl!r}"
                )
            set_(self, "sasl", dict(self.sasl))
        if self.default_acl is not None:
            acl = tuple(self.default_acl)
            if not acl or not all(isinstance(a, Acl) for a in acl):
                raise ConfigurationError(
                    "default_acl must be a non-empty sequence of zk_recipes.Acl entries, "
                    f"got {self.default_acl!r}"
                )
            set_(self, "default_acl", acl)
        if self.tls is not None and not isinstance(self.tls, TlsOptions):
            raise ConfigurationError(f"tls must be a zk_recipes.TlsOptions, got {self.tls!r}")
        if not isinstance(self.track_ensemble, bool):
            raise ConfigurationError(
                f"track_ensemble must be True or False, got {self.track_ensemble!r}"
            )
        if not isinstance(self.prefer_observers, bool):
            raise ConfigurationError(
                f"prefer_observers must be True or False, got {self.prefer_observers!r}"
            )
        if not isinstance(self.read_only, bool):
            raise ConfigurationError(f"read_only must be True or False, got {self.read_only!r}")
        if self.read_only:
            raise ConfigurationError(
                "read_only=True is not supported: on a read-only server (one cut off from "
                "the quorum) a lock, lease or leadership cannot be proven, since its copy of "
                "the tree is frozen while the quorum may expire the session and give the "
                "lock to someone else; and kazoo 2.11 cannot read such a server's handshake "
                "for a session that has seen newer data, so it would never connect there "
                "anyway. Leave read_only unset: the client waits for a read-write server."
            )
        fraction = self.simulated_expiry_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not 0 < fraction <= 1
        ):
            raise ConfigurationError(
                "simulated_expiry_fraction must be in (0, 1] (a share of the session timeout; "
                "below 1 so the client hears of the loss before the server acts), got "
                f"{shown(fraction, 0, 1)}"
            )
        limit = self.max_data_bytes
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise ConfigurationError(f"max_data_bytes must be a positive int, got {limit!r}")

    @property
    def host_pairs(self) -> tuple[tuple[str, int], ...]:
        return parse_hosts(self.hosts)

    def replace(self, **changes: Any) -> ClientSettings:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)
