"""Session faults: expire a client's session on the server, or only in the client.

``expire_session`` is the real thing, stricter than Curator's ``KillSession``
(which only injects an Expired event into the client): it opens a second kazoo
connection that *claims* the victim's session with its ``(session_id,
password)``, then closes it. ZooKeeper moves the session to the new connection
(dropping the victim's), and the close ends the session at once: its ephemeral
nodes are deleted before ``stop()`` returns, other clients' watches fire, and
the victim, on reconnecting, is told its session expired (LOST, then CONNECTED
on a new session). The same credentials are then tried again to prove the
session is gone; if the victim had reclaimed it in between, the claim-and-close
simply repeats.

``expire_session_locally`` is kazoo's own test trick: the client's connection
thread is made to believe the server said "expired". The client drops the
session and starts a new one, but **the server keeps the old session** (and its
ephemeral nodes) until the session timeout runs out. Use it to test how code
reacts to LOST when the rest of the world has not noticed yet.

Both accept a zk-recipes ``ZkClient`` or a raw ``KazooClient``: the session
comes from ``client_id`` (both have it), the servers from ZkClient's
``connect_string`` or kazoo's ``hosts``, and the local trick needs the kazoo
client (ZkClient's ``kazoo_client``). kazoo is untyped: the ``Any`` stops in the
helpers below.
"""

from __future__ import annotations

import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.connection import _SESSION_EXPIRED
from kazoo.retry import KazooRetry

from zk_recipes.testing._install import HarnessError


def _kazoo_of(client: object) -> Any:
    return getattr(client, "kazoo_client", client)


def _session_of(client: object) -> tuple[int, bytes] | None:
    """``client_id`` of a ZkClient or a KazooClient (None when not connected)."""
    client_id: Any = getattr(client, "client_id", None)
    if client_id is None:
        return None
    session_id, password = client_id
    return int(session_id), bytes(password)


def _hosts_of(client: object) -> str:
    """The servers to reach: ZkClient's ``connect_string`` or kazoo's ``hosts`` list."""
    connect_string = getattr(client, "connect_string", None)
    if isinstance(connect_string, str):
        return connect_string.partition("/")[0]  # no chroot: sessions are global
    hosts: list[tuple[str, int]] = list(_kazoo_of(client).hosts)
    return ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts)


def _claim_and_close(hosts: str, session: tuple[int, bytes], timeout: float) -> bool:
    """Connect with the session's credentials, then close; True if the session was still alive."""
    other = KazooClient(
        hosts=hosts,
        client_id=session,
        timeout=10.0,
        connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=1.5, max_delay=0.5),
    )
    try:
        other.start(timeout=timeout)
    except other.handler.timeout_exception as exc:  # start() already stopped and closed it
        raise HarnessError(
            f"could not reach {hosts} within {timeout} s to expire a session"
        ) from exc
    try:
        claimed = _session_of(other)
        return claimed is not None and claimed[0] == session[0]
    finally:
        other.stop()  # closes whichever session it holds: the victim's, or a throwaway one
        other.close()


def expire_session(client: object, *, timeout: float = 10.0, hosts: str | None = None) -> int:
    """Expire the client's session on the server, now; return the expired session id.

    When this returns the session is gone and its ephemeral nodes are deleted.
    The victim learns it on its next reconnect (LOST, then a new session).
    ``hosts`` overrides where to connect (e.g. the servers behind a cut proxy).
    """
    session = _session_of(client)
    if session is None:
        raise HarnessError(f"{client!r} has no session to expire (not connected?)")
    where = hosts or _hosts_of(client)
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise HarnessError(f"session 0x{session[0]:x} still alive after {timeout} s")
        if not _claim_and_close(where, session, remaining):
            return session[0]


def expire_session_locally(client: object, *, timeout: float = 10.0, wait: bool = True) -> int:
    """Make the client believe its session expired; return the old session id.

    The server keeps the old session until its timeout, ephemeral nodes included.
    With ``wait`` (the default) return once the client holds a new session.
    """
    session = _session_of(client)
    if session is None:
        raise HarnessError(f"{client!r} has no session to expire (not connected?)")
    _kazoo_of(client)._call(_SESSION_EXPIRED, None)
    if wait:
        deadline = time.monotonic() + timeout
        while True:
            current = _session_of(client)
            if current is not None and current[0] != session[0]:
                break
            if time.monotonic() > deadline:
                raise HarnessError(f"{client!r} got no new session within {timeout} s")
            time.sleep(0.01)
    return session[0]


def break_connection_thread(client: object, error: BaseException | None = None) -> None:
    """Make the client's kazoo connection thread die at its next connect attempt (once).

    kazoo's connection thread ends for good on AUTH_FAILED and on any exception
    it does not expect inside a connect (a SASL library error, say). Call this,
    then break the connection (e.g. ``TcpProxy.cut()``): the reconnect raises
    ``error`` (a RuntimeError by default) inside kazoo and its thread ends, as
    it would in the field. The fault fires once. kazoo reports the exception
    through ``threading.excepthook``; pytest turns that into a
    PytestUnhandledThreadExceptionWarning, which such a test filters.
    """
    connection = _kazoo_of(client)._connection
    real_connect = connection._connect

    def dying_connect(*args: Any, **kwargs: Any) -> Any:
        connection._connect = real_connect
        raise (
            error
            if error is not None
            else RuntimeError(
                "injected by break_connection_thread(): kazoo's connection thread ends here"
            )
        )

    connection._connect = dying_connect


__all__ = ["break_connection_thread", "expire_session", "expire_session_locally"]
