"""What a ZkClient tells about its session and connection, and the guards every request passes.

The read-only side of the one object users hold: its state and the
session's identity (from the tracker, _client/session.py), the connection's
own facts (negotiated timeout, address, why it is down, how long a write has
waited), the listeners, and the guards (``_usable``: started, not closed,
not forked) and path mapping (the namespace) every request goes through.
``ZkClient`` (client.py) adds the requests; what holds the connection and
decides when there is one is the ``ConnectionHolder`` (connection_holder.py).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from zk_recipes._client.connection_holder import ConnectionHolder
from zk_recipes._client.kazoo import KazooConnection
from zk_recipes._client.session import SessionTracker
from zk_recipes._client.states import ConnectionState, ListenerRegistry, StateListener
from zk_recipes._deadline import session_clock
from zk_recipes._settings import ClientSettings
from zk_recipes._types import Wakeable


class SessionView:
    """A client's session, connection and listeners, as ``ZkClient`` shows them."""

    settings: ClientSettings
    _holder: ConnectionHolder
    _tracker: SessionTracker
    _listeners: ListenerRegistry

    # ------------------------------------------------------------------ introspection
    @property
    def state(self) -> ConnectionState | None:
        """The last state told to listeners (None before the first connection)."""
        return self._tracker.state

    @property
    def session_id(self) -> int:
        """The id of the last session that connected (0 before the first one).

        It keeps a lost session's id until a new session connects: to ask
        whether a node is still ours, use ``session_epoch()``.
        """
        return self._tracker.session_id

    @property
    def loss_epoch(self) -> int:
        """How many session lives this client has ended (LOST, or close()).

        A hold taken in epoch *e* (``session_epoch(owner)``) is still ours
        exactly while ``loss_epoch == e``: for recipe authors.
        """
        return self._tracker.epoch

    def session_epoch(self, session_id: int) -> int | None:
        """The loss epoch of ``session_id`` if it is this client's live session, else None."""
        return self._tracker.epoch_of(session_id)

    @property
    def state_seq(self) -> int:
        """The ``seq`` of the last StateChange published (0 before the first)."""
        return self._tracker.seq

    @property
    def state_changed_at(self) -> float:
        """``time.monotonic()`` when the last state change was decided (its StateChange.at)."""
        return self._tracker.changed_at

    def state_snapshot(self) -> tuple[int, ConnectionState | None]:
        """``(state_seq, state)`` read together: the state as of that change, for recipe authors.

        Reading ``state`` and ``state_seq`` one after the other can pair a
        state with the seq of a change published in between.
        """
        return self._tracker.snapshot()

    def earlier_sessions(self) -> set[int]:
        """Sessions this client had before the current one (their nodes are ours, and stale)."""
        return self._tracker.earlier_sessions()

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, password) of the current session, as kazoo's ``client_id``."""
        conn = self._conn
        return conn.client_id if conn is not None else None

    @property
    def connect_string(self) -> str:
        return self.settings.hosts

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def negotiated_session_timeout(self) -> float | None:
        """The session timeout the server granted, in seconds."""
        conn = self._conn
        return conn.negotiated_timeout if conn is not None else None

    @property
    def last_zxid(self) -> int:
        """The zxid the newest reply read on this client carried (0 before any).

        For recipe authors keeping a cache: read in a watch callback marked
        inline (on the connection's thread), it says which replies came before
        the notification. Every reply read before it carries a zxid older than
        the change notified, every later one a zxid at least as new; a node
        read before a DELETED notification has a ``czxid`` at most this.
        """
        conn = self._conn
        return conn.last_zxid if conn is not None else 0

    @property
    def connected_address(self) -> tuple[str, int] | None:
        """(host, port) of the server this client is connected to, if any."""
        conn = self._conn
        return conn.connected_address if conn is not None else None

    @property
    def connection_problem(self) -> str | None:
        """Why this client is not connected, in words; None while it is (or before any attempt).

        The newest failure of its connection since it was last connected
        ("Connection dropped: socket connection error: Connection refused",
        "Cannot resolve zk1: ..."): what health checks report as ``last_error``
        and what ``UnavailableError`` and ``ConnectTimeoutError`` carry.
        """
        conn = self._conn
        state = self._tracker.state
        if conn is None or (state is not None and state.is_connected):
            return None
        return conn.last_problem or None

    @property
    def unanswered_for(self) -> float:
        """Seconds the oldest write (or sync) on the connection has waited for its reply; 0 if none.

        A server that keeps the connection open and answers nothing (paused, or
        cut off behind a one-way partition) shows here long before the client
        hears a missed ping and says SUSPENDED: a face that must answer at once
        looks at it before queueing another request behind the silent ones.
        """
        conn = self._conn
        sent = conn.oldest_unanswered() if conn is not None else None
        return 0.0 if sent is None else max(0.0, session_clock() - sent)

    @property
    def _refused_everywhere(self) -> bool:
        """Every server refused the connection in the latest round (nothing listens)."""
        conn = self._conn
        return conn is not None and conn.refused_everywhere

    @property
    def kazoo_client(self) -> Any:
        """The underlying kazoo client (an escape hatch; its state is managed here)."""
        return self._usable().kazoo_client

    @property
    def is_started(self) -> bool:
        return self._holder.is_started

    @property
    def is_closed(self) -> bool:
        """True once ``close()`` was called (a closed client cannot start again)."""
        return self._holder.is_closed

    # ------------------------------------------------------------------ listeners
    def add_listener(self, listener: StateListener) -> None:
        """Call ``listener(StateChange)`` on each state change, on a thread of its own."""
        self._listeners.add(listener)

    def remove_listener(self, listener: StateListener) -> None:
        self._listeners.remove(listener)

    def wake_on_close(self, event: Wakeable) -> AbstractContextManager[None]:
        """Set ``event`` if this client is closed while the block runs.

        For recipes that wait on a watch: kazoo stops its callback thread on
        close without firing pending watches, so without this a waiter would
        sleep until its own timeout (or forever).
        """
        return self._holder.wake_on_close(event)

    def wait_connected(self, timeout: float | None) -> bool:
        """Block until connected (CONNECTED/RECONNECTED/READ_ONLY); False on timeout or close."""
        return self._tracker.wait_connected(timeout)

    # ------------------------------------------------------------------ guards
    def check_usable(self) -> None:
        """Raise ClientStateError unless requests can be sent (started, not closed, not forked).

        Recipes call it to fail fast, before queueing anything.
        """
        self._usable()

    @property
    def _conn(self) -> KazooConnection | None:
        """The current connection (None before start and after close)."""
        return self._holder.conn

    def _usable(self) -> KazooConnection:
        return self._holder.usable()

    def _live_conn(self) -> KazooConnection:
        """The connection even while close() lets pending deletes finish."""
        return self._holder.live()

    def _wait_usable(self, timeout: float) -> bool:
        return self.wait_connected(timeout)

    @property
    def _op_timeout(self) -> float:
        return self.settings.connection_timeout

    def _abs(self, path: str) -> str:
        ns = self.settings.namespace
        return ns + path if path != "/" else (ns or "/")

    def _rel(self, path: str) -> str:
        ns = self.settings.namespace
        if ns and path.startswith(ns):
            return path[len(ns) :] or "/"
        return path
