"""A ZkClient's connection life: start, close, revival and fork, as one state machine.

``ZkClient`` is the one object users hold; this is what it holds. It owns the
current ``KazooConnection`` and the rules for when there is one:

- **start** connects once: concurrent ``start()`` calls wait for the one
  under way, never return before it is connected, and try again themselves
  in the time left if it fails;
- **close** ends every hold before the server can hand it to anyone else:
  a start under way is told to stop, the client's own last work (pending
  guaranteed deletes, while the session is still ours) runs, then the
  tracker ends the session life (the epoch moves, listeners hear CLOSED),
  waiters on a watch are woken, and only then is the session closed on the
  server, which deletes our ephemeral nodes;
- **a connection that ends by itself** (kazoo's thread stops on AUTH_FAILED
  or an unexpected error) is rebuilt in the background with back-off; the
  session it carried is LOST (the tracker's doing), requests meanwhile fail
  with the retryable ConnectionLostError;
- **fork**: a kazoo client does not survive ``fork()`` (its threads are gone,
  its socket is shared with the parent). A holder used in a forked child
  raises ClientStateError; ``close()`` there only forgets the connection,
  never touching the parent's session nor any lock copied from it. Clients
  are made after forking (the framework integrations do);
- **exit**: holders still open at interpreter exit are closed, so our
  ephemeral nodes go at once instead of at the session's expiry.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import final

from zk_recipes._client.kazoo import KazooConnection, not_connected
from zk_recipes._client.session import SessionTracker
from zk_recipes._client.states import ListenerRegistry
from zk_recipes._errors import (
    ClientStateError,
    ConfigurationError,
    ConnectTimeoutError,
    WrongTypeError,
)
from zk_recipes._settings import ClientSettings
from zk_recipes._threads import say, start_or_defer
from zk_recipes._types import Wakeable

log = logging.getLogger("zk_recipes.client")

#: Back-off between attempts to rebuild a connection whose thread ended by itself.
_REVIVE_FIRST, _REVIVE_MAX = 0.1, 5.0

_open_holders: weakref.WeakSet[ConnectionHolder] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for holder in list(_open_holders):
        holder.forked = True


def _close_at_exit() -> None:
    for holder in list(_open_holders):
        try:
            holder.close()
        except Exception:  # pragma: no cover - best effort at exit
            log.debug("closing a client at exit failed", exc_info=True)


os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)


@final
class ConnectionHolder:
    """The current connection of one client and the rules for having one.

    ``before_session_ends`` runs in ``close()`` while the session is still
    ours (the client's pending deletes); ``event_path`` turns the server's
    paths in watch events into the caller's (the namespace taken off).
    """

    def __init__(
        self,
        settings: ClientSettings,
        listeners: ListenerRegistry,
        *,
        event_path: Callable[[str], str],
        before_session_ends: Callable[[KazooConnection | None], None],
    ) -> None:
        self._settings = settings
        self._event_path = event_path
        self._before_session_ends = before_session_ends
        self._listeners = listeners
        self._lock = threading.Lock()
        self.tracker = SessionTracker(settings, listeners, self._connection_ended)
        self._conn: KazooConnection | None = None
        #: The hosts the ensemble's own config names (ensemble.py), once followed.
        self._followed_hosts: tuple[str, bool] | None = None  # and shuffled by kazoo?
        self._started = False
        self._closed = False
        self._closed_event = threading.Event()
        #: Set in a child process after fork(): the connection is the parent's.
        self.forked = False
        self._reviving = False
        self._wakeups: set[Wakeable] = set()
        self._starting: threading.Event | None = None

    @property
    def conn(self) -> KazooConnection | None:
        """The current connection (None before start and after close)."""
        return self._conn

    @property
    def is_started(self) -> bool:
        return self._started and not self._closed

    @property
    def is_closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ start
    def start(self, timeout: float | None, *, refused_ends: bool) -> None:
        """Connect once and establish a session, within ``timeout`` s (None: the setting)."""
        if timeout is None:
            timeout = self._settings.connection_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise WrongTypeError(
                f"start(timeout=) must be a positive number of seconds, got {timeout!r}"
            )
        if not timeout > 0:
            raise ConfigurationError(
                f"start(timeout=) must be a positive number of seconds, got {timeout!r}"
            )
        self.check_fork()
        deadline = time.monotonic() + timeout
        waited = False  # on another thread's start that failed: ours gets the time left
        while True:
            with self._lock:
                if self._closed:
                    raise ClientStateError("this ZkClient was closed; create a new one")
                concurrent = self._starting
                if concurrent is None:
                    if self._started:
                        return
                    conn = self._new_connection()
                    self._started = True
                    starting = self._starting = threading.Event()
                    break
            # Another thread is starting this client: return once it is connected,
            # never before (a request sent while kazoo is CONNECTING fails); if that
            # start fails, try again ourselves in the time left.
            waited = True
            if not concurrent.wait(max(0.0, deadline - time.monotonic())):
                raise ConnectTimeoutError(self._not_connected_in(timeout))
            if deadline - time.monotonic() <= 0 and not self.is_started:
                raise ConnectTimeoutError(self._not_connected_in(timeout))
        try:
            conn.start(
                max(0.001, deadline - time.monotonic()) if waited else timeout,
                refused_ends=refused_ends,
            )
        except BaseException:
            with self._lock:
                self._started = False
                self._conn = None
            raise
        finally:
            with self._lock:
                self._starting = None
            starting.set()  # a close() waiting for this start stops ``conn`` now
        if self._closed:
            raise ClientStateError("this ZkClient was closed while it was starting")
        _open_holders.add(self)

    def _not_connected_in(self, timeout: float) -> str:
        """Why a start that waited on another thread's start gave up: the cause and a hint."""
        conn = self._conn
        state = self.tracker.state
        problem = None
        if conn is not None and not (state is not None and state.is_connected):
            problem = conn.last_problem or None
        return not_connected(self._settings.hosts, timeout, problem)

    def _new_connection(self) -> KazooConnection:
        """A new connection, the current one from now on (call under ``_lock``)."""
        conn = self._conn = KazooConnection(
            self._settings, self.tracker.on_raw_state, event_path=self._event_path
        )
        if self._followed_hosts is not None:
            conn.set_hosts(*self._followed_hosts)
        self.tracker.attach(conn)
        return conn

    def use_hosts(self, hosts: str, randomize: bool = True) -> None:
        """Connect to ``hosts`` from the next attempt on, this connection's and later ones'
        (``randomize``: in an order kazoo shuffles, else in the order given)."""
        with self._lock:
            self._followed_hosts = (hosts, randomize)
            conn = self._conn
        if conn is not None:
            conn.set_hosts(hosts, randomize)

    # ------------------------------------------------------------------ close
    def close(self) -> None:
        """End the session life: every hold ends before the server can hand it on. Idempotent."""
        if self.forked:
            # The session is the parent's; locks copied from the parent may be held
            # forever here (a parent thread held them at fork): touch none of them.
            self._closed = True
            conn, self._conn = self._conn, None
            _open_holders.discard(self)
            if conn is not None:
                conn.discard()
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
            wakeups, self._wakeups = self._wakeups, set()
            starting = self._starting
        self._closed_event.set()
        if starting is not None:
            # A start under way is told to stop (it may be waiting out an unreachable
            # ensemble), then waited for: a session it made would live on otherwise.
            conn = self._conn
            if conn is not None:
                conn.abort_start()
            starting.wait(self._settings.connection_timeout)
        self._before_session_ends(self._conn)
        # Every hold ends here (epoch, CLOSED), before the server can hand it on.
        self.tracker.close()
        for event in wakeups:
            event.set()
        with self._lock:
            conn, self._conn = self._conn, None
        _open_holders.discard(self)
        if conn is not None:
            conn.stop()
        self._listeners.wait_idle(1.0)

    @contextlib.contextmanager
    def wake_on_close(self, event: Wakeable) -> Iterator[None]:
        """Set ``event`` if the client is closed while the block runs."""
        with self._lock:
            if self._closed:
                event.set()
            else:
                self._wakeups.add(event)
        try:
            yield
        finally:
            with self._lock:
                self._wakeups.discard(event)

    # ------------------------------------------------------------------ a connection that ended
    def _connection_ended(self, dead: KazooConnection, why: str) -> None:
        # The tracker's hook, on the dying connection's thread: hand off at once.
        with self._lock:
            if self._closed or self._conn is not dead or self._reviving:
                return
            self._reviving = True
        # A reconnect that cannot start now (thread exhaustion) is started later by
        # the session watchdog (retry_deferred); _reviving stays set until it ends.
        start_or_defer("zk-recipes reconnect", lambda: self._revive(dead))
        say(
            functools.partial(
                log.warning,
                "the connection to ZooKeeper ended for good (%s); its session is LOST, "
                "building a new connection",
                why,
            )
        )

    def _revive(self, dead: KazooConnection) -> None:
        dead.stop()
        delay = _REVIVE_FIRST
        failures = 0
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    conn = self._new_connection()
                try:
                    conn.start(self._settings.connection_timeout)
                except Exception as exc:  # keep trying whatever it was: never a zombie
                    failures += 1
                    (log.warning if failures == 1 else log.debug)(
                        "rebuilding the connection to ZooKeeper failed (%s); next try in %.1f s",
                        exc,
                        delay,
                    )
                    if self._closed_event.wait(delay):
                        return
                    delay = min(_REVIVE_MAX, delay * 2)
                    continue
                log.info("connection to ZooKeeper rebuilt (session %#x)", conn.session_id)
                return
        finally:
            with self._lock:
                self._reviving = False

    # ------------------------------------------------------------------ guards
    def check_fork(self) -> None:
        if self.forked:
            raise ClientStateError(
                "this ZkClient was started in a parent process and cannot be used after fork(): "
                "a ZooKeeper session cannot be shared between processes. Create the client in "
                "the child (after the fork), e.g. in Celery's worker_process_init; the "
                "zk_recipes framework integrations do this for you."
            )

    def usable(self) -> KazooConnection:
        """The connection requests go out on; ClientStateError if there is none to use."""
        self.check_fork()
        conn = self._conn
        if conn is None or self._closed:
            if self._closed:
                raise ClientStateError("this ZkClient is closed; create a new one")
            raise ClientStateError("this ZkClient is not started; call start() or use `with`")
        return conn

    def live(self) -> KazooConnection:
        """The connection even while close() lets pending deletes finish."""
        conn = self._conn
        if conn is None:
            raise ClientStateError("this ZkClient is closed; create a new one")
        return conn
