"""Before a first connection: does any ZooKeeper host name resolve at all?

kazoo skips a host whose name does not resolve and, when none does, retries
quietly until the connection timeout (15 s by default) runs out, then
reports a timeout that says nothing about names. A mistyped host name, or a
Kubernetes service that does not exist (yet), should fail in a couple of
seconds and say which names did not resolve. ``check_hosts_resolve`` looks
them up before kazoo starts: as soon as one resolves, kazoo goes on as
usual (a name that resolves later is kazoo's business, at each reconnect);
when none resolves for ``RESOLVE_WITHIN`` seconds (a short outage of the
resolver is ridden out), the start fails with the resolver's own words.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence

from zk_recipes._errors import ConnectTimeoutError

#: How long a start keeps looking up names of which none resolves.
RESOLVE_WITHIN = 2.0
#: Between two rounds of lookups.
_AGAIN_AFTER = 0.25


def check_hosts_resolve(hosts: Sequence[tuple[str, int]], timeout: float) -> None:
    """Return once one of ``hosts`` resolves; ConnectTimeoutError naming them if none does.

    Looks for at most ``min(timeout, RESOLVE_WITHIN)`` seconds (at least one round).
    """
    deadline = time.monotonic() + min(timeout, RESOLVE_WITHIN)
    pause = threading.Event()
    while True:
        failures: list[str] = []
        for host, port in hosts:
            try:
                socket.getaddrinfo(host.strip(), port, 0, 0, socket.IPPROTO_TCP)
            except (socket.gaierror, UnicodeError) as exc:
                failures.append(f"{host}: {getattr(exc, 'strerror', None) or exc}")
            else:
                return
        left = deadline - time.monotonic()
        if left <= 0:
            break
        pause.wait(min(_AGAIN_AFTER, left))
    raise ConnectTimeoutError(
        "no ZooKeeper host name resolves ("
        + "; ".join(failures)
        + "): check the hosts setting (host:port,host:port) and that this machine's "
        "DNS knows these names"
    )
