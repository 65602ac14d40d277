"""The session state machine: Curator's five states and simulated expiry.

kazoo reports three states from its connection thread. ``SessionTracker``
turns them into CONNECTED / SUSPENDED / RECONNECTED / LOST / READ_ONLY,
noticing session changes (kazoo does not say when a reconnect landed on a
new session) and keeping one invariant: LOST is always told before a
RECONNECTED on a new session.

**Simulated expiry.** kazoo stays SUSPENDED through a whole partition and
says LOST only once it reaches a server again, long after the server has
expired the session and handed our locks to someone else. A watchdog thread
counts from the *last reply read from the server* — not from SUSPENDED,
which kazoo reports only after its read timeout (two thirds of the session)
— and declares LOST once ``simulated_expiry_fraction`` of the negotiated
session timeout has passed in silence. The session is then abandoned: kazoo
builds a new one (and is told to drop the old one again should it manage to
resume it), and once the server is reachable the old session is closed on
the server, so its ephemeral nodes go at once instead of at its expiry.
"""

from __future__ import annotations

import functools
import logging
import threading
import time

from zk_recipes._client.kazoo import KazooConnection, run_in_thread
from zk_recipes._client.states import ConnectionState, ListenerRegistry, StateChange
from zk_recipes._settings import ClientSettings

log = logging.getLogger("zk_recipes.client")


class SessionTracker:
    """Decides and publishes connection states for one client."""

    def __init__(self, settings: ClientSettings, listeners: ListenerRegistry) -> None:
        self._settings = settings
        self._listeners = listeners
        self._changed = threading.Condition(threading.Lock())
        self._conn: KazooConnection | None = None
        self._closed = False
        self._watchdog: threading.Thread | None = None
        self.state: ConnectionState | None = None
        self.session_id = 0
        #: Sessions given up by simulated expiry, still to be closed on the server.
        self._abandoned: list[tuple[int, bytes]] = []
        self._abandoned_ids: set[int] = set()
        self._past_sessions: set[int] = set()

    def attach(self, conn: KazooConnection) -> None:
        """Follow ``conn`` (before it starts) and begin watching for silence."""
        with self._changed:
            self._conn = conn
        self._watchdog = run_in_thread("zk-recipes session watchdog", self._watch)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._conn = None
            self._changed.notify_all()
        watchdog = self._watchdog
        if watchdog is not None and watchdog is not threading.current_thread():
            watchdog.join(2.0)

    def earlier_sessions(self) -> set[int]:
        """Sessions this client had before the current one (their nodes are ours, and stale)."""
        with self._changed:
            return self._past_sessions | self._abandoned_ids

    def wait_connected(self, timeout: float) -> bool:
        with self._changed:
            return (
                self._changed.wait_for(
                    lambda: self._closed or (self.state is not None and self.state.is_connected),
                    timeout,
                )
                and not self._closed
            )

    # -- decisions (kazoo's connection thread, or the watchdog) ------------
    def _publish(self, state: ConnectionState, session_id: int, *, simulated: bool = False) -> None:
        # Called with self._changed held.
        self.state = state
        self._changed.notify_all()
        log.info("ZooKeeper state %s (session %#x)", state.name, session_id)
        self._listeners.publish(StateChange(state, session_id, time.monotonic(), simulated))

    def on_raw_state(self, kind: str, session_id: int) -> None:
        """kazoo's hook, on kazoo's connection thread: decide, publish, never block."""
        reclaim: list[tuple[int, bytes]] = []
        with self._changed:
            conn = self._conn
            if self._closed or conn is None:
                return
            if kind in ("CONNECTED", "READ_ONLY"):
                if session_id in self._abandoned_ids:
                    # kazoo resumed a session we already declared LOST: drop it again.
                    conn.expire_now()
                    return
                read_only = kind == "READ_ONLY"
                if self.state is None:
                    new = ConnectionState.READ_ONLY if read_only else ConnectionState.CONNECTED
                else:
                    if session_id != self.session_id and self.state is not ConnectionState.LOST:
                        self._publish(ConnectionState.LOST, self.session_id)
                    new = ConnectionState.READ_ONLY if read_only else ConnectionState.RECONNECTED
                if self.session_id and session_id != self.session_id:
                    self._past_sessions.add(self.session_id)
                self.session_id = session_id
                self._publish(new, session_id)
                reclaim, self._abandoned = self._abandoned, []
            elif kind == "SUSPENDED":
                if self.state is not None and self.state.is_connected:
                    self._publish(ConnectionState.SUSPENDED, self.session_id)
            elif self.state is not None and self.state is not ConnectionState.LOST:
                # EXPIRED (the server says so), AUTH_FAILED or CLOSED while not closing.
                if self.state.is_connected:
                    self._publish(ConnectionState.SUSPENDED, self.session_id)
                self._publish(ConnectionState.LOST, self.session_id)
        timeout = self._settings.connection_timeout
        for client_id in reclaim:
            run_in_thread(
                "zk-recipes close abandoned session",
                functools.partial(conn.close_session_on_server, client_id, timeout),
            )

    def _watch(self) -> None:
        """Declare LOST when the server has been silent for too long (simulated expiry)."""
        fraction = self._settings.simulated_expiry_fraction
        with self._changed:
            while not self._closed:
                conn = self._conn
                if conn is None:
                    return
                limit = fraction * (conn.negotiated_timeout or self._settings.session_timeout)
                if self.state is None or self.state is ConnectionState.LOST:
                    self._changed.wait(limit / 4)
                    continue
                silent = time.monotonic() - conn.last_reply
                if silent < limit:
                    self._changed.wait(limit - silent + 0.005)
                    continue
                log.warning(
                    "no reply from ZooKeeper for %.2f s (%.0f%% of the %.2f s session timeout): "
                    "declaring session %#x LOST",
                    silent,
                    fraction * 100,
                    limit / fraction,
                    self.session_id,
                )
                client_id = conn.client_id
                if client_id is not None:
                    self._abandoned.append(client_id)
                    self._abandoned_ids.add(client_id[0])
                if self.state.is_connected:
                    self._publish(ConnectionState.SUSPENDED, self.session_id)
                self._publish(ConnectionState.LOST, self.session_id, simulated=True)
                conn.abandon_session()
