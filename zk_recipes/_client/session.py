"""The session state machine: Curator's five states, simulated expiry, and the loss epoch.

kazoo reports three states from its connection thread. ``SessionTracker``
turns them into CONNECTED / SUSPENDED / RECONNECTED / LOST / READ_ONLY (and
CLOSED once the client is closed), noticing session changes (kazoo does not
say when a reconnect landed on a new session) and keeping one invariant:
LOST is always told before a RECONNECTED on a new session.

**The loss epoch: one validity model for every hold.** ``epoch`` counts the
session lives this client has ended: it is bumped, under the tracker's lock
and *before* any listener hears of it, whenever LOST is published (declared
by the client or told by the server) and when the client is closed. A hold
(a lock, a lease, a leadership term...) records the epoch of the session
that owns its node when it is taken (``epoch_of(session_id)``, None when
that session is not this client's live one) and is still ours exactly
while ``epoch`` has not moved. Session ids cannot answer that question:
``session_id`` is "the last session that connected", and it keeps the dead
session's id from LOST until a new session connects (during a partition: never).

**Simulated expiry.** kazoo stays SUSPENDED through a whole partition and
says LOST only once it reaches a server again, long after the server has
expired the session and handed our locks to someone else. A watchdog thread
(one for all the process's clients: ``watchdog.py``)
counts from the last moment the quorum provably heard us — the send time of
the newest write or sync whose reply arrived (``KazooConnection.last_heard``;
never a read or ping, which a follower cut from the quorum answers alone,
nor a watch notification, which only shows that the server can reach us)
— and declares LOST once ``simulated_expiry_fraction`` of the negotiated
session timeout has passed since. An idle session is proved by a sync the
watchdog asks for after ``_PROVE_AFTER`` of the timeout. The leader cannot
expire the session before a full timeout after it last heard of it, so the
LOST is told first, under the server settings docs/client.md states. The
session is then abandoned: kazoo builds a new one (and is told to drop the
old one again should it manage to resume it), and once the server is
reachable the old session is closed on the server, so its ephemeral nodes go
at once instead of at its expiry.

**Decide first, talk later.** Every decision (the epoch, the state, the
hand-off to listeners) is made under the tracker's lock and finished before
anything is logged: log records go to the log writer thread (``say``), after
the lock is released, so a log stream that blocks can delay neither a LOST
nor the next decision. The watchdog's turns are guarded (an error is reported,
the next turn runs) and restart the threads that could not start before
(``retry_deferred``): thread exhaustion wedges no listener for good.

**A connection that ends by itself** (kazoo's thread stops for good on
AUTH_FAILED or an unexpected error): LOST is published (that kazoo client
cannot resume the session) and ``on_connection_ended`` builds a new one.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from zk_recipes import _metrics
from zk_recipes._client import watchdog
from zk_recipes._client.kazoo import KazooConnection
from zk_recipes._client.states import ConnectionState, ListenerRegistry, StateChange
from zk_recipes._deadline import session_clock
from zk_recipes._logfields import fields
from zk_recipes._settings import ClientSettings
from zk_recipes._threads import say, start_or_defer

log = logging.getLogger("zk_recipes.client")

#: Share of the session timeout without a proof after which the watchdog has a sync sent.
_PROVE_AFTER = 1 / 6
#: While no proof has come since then: how soon the watchdog looks again (seconds).
_PROVE_AGAIN = 0.25

#: ``on_connection_ended(conn, why)``: kazoo's connection thread for ``conn`` ended by itself.
ConnectionEnded = Callable[[KazooConnection, str], None]


class SessionTracker:
    """Decides and publishes connection states for one client; keeps the loss epoch."""

    def __init__(
        self,
        settings: ClientSettings,
        listeners: ListenerRegistry,
        on_connection_ended: ConnectionEnded | None = None,
    ) -> None:
        self._settings = settings
        self._listeners = listeners
        self._on_connection_ended = on_connection_ended
        self._changed = threading.Condition(threading.Lock())
        self._conn: KazooConnection | None = None
        self._closed = False
        self._followed = False  # by the process's watchdog (watchdog.py)
        self.state: ConnectionState | None = None
        self.session_id = 0
        #: Session lives ended so far (LOST or close): see the module note.
        self.epoch = 0
        #: Changes published so far (StateChange.seq of the last one).
        self.seq = 0
        self.changed_at = 0.0  #: time.monotonic() of the last change published
        self._abandoned: list[tuple[int, bytes]] = []  # given up, to close on the server
        self._abandoned_ids: set[int] = set()
        self._past_sessions: set[int] = set()

    def attach(self, conn: KazooConnection) -> None:
        """Follow ``conn`` (before it starts); the watchdog starts with the first one."""
        with self._changed:
            self._conn = conn
            self._changed.notify_all()
            if self._closed:
                return
            if self._followed:
                watchdog.current().poke(self)
                return
            watchdog.current().follow(self)
            self._followed = True

    def close(self) -> None:
        """End the current session life (CLOSED is the last state listeners hear)."""
        talk: list[Callable[[], None]] = []
        with self._changed:
            if self._closed:
                return
            self._closed = True
            self._conn = None
            if self.state is not None:
                self._publish(ConnectionState.CLOSED, self.session_id, talk)
            else:
                self.epoch += 1
                self.state = ConnectionState.CLOSED
            self._changed.notify_all()
        _talk(talk)
        ending = watchdog.current().forget(self)
        if ending is not None and ending is not threading.current_thread():
            ending.join(2.0)  # the last client: its thread ends with it

    @property
    def closed(self) -> bool:
        return self._closed

    def snapshot(self) -> tuple[int, ConnectionState | None]:
        """(seq, state) of the last change published, read together under the lock."""
        with self._changed:
            return self.seq, self.state

    def earlier_sessions(self) -> set[int]:
        """Sessions this client had before the current one (their nodes are ours, and stale)."""
        with self._changed:
            return self._past_sessions | self._abandoned_ids

    def epoch_of(self, session_id: int) -> int | None:
        """The epoch a node owned by ``session_id`` belongs to; None if that session is not live.

        Live: it is the current session and it has not been declared LOST (nor
        the client closed).
        """
        with self._changed:
            state = self.state
            if (
                session_id
                and session_id == self.session_id
                and state is not None
                and not state.ends_session
            ):
                return self.epoch
            return None

    def wait_connected(self, timeout: float | None) -> bool:
        with self._changed:
            return (
                self._changed.wait_for(
                    lambda: self._closed or (self.state is not None and self.state.is_connected),
                    timeout,
                )
                and not self._closed
            )

    # -- decisions (kazoo's connection thread, or the watchdog) ------------
    def _publish(
        self,
        state: ConnectionState,
        session_id: int,
        talk: list[Callable[[], None]],
        *,
        simulated: bool = False,
    ) -> None:
        """Decide ``state`` and hand it to the listeners; its log record goes on ``talk``.

        Called with self._changed held. The epoch moves before anyone hears of
        the loss, so a hold checked from now on is already invalid; nothing here
        logs or waits (the caller hands ``talk`` to the log writer once the lock
        is released).
        """
        if state.ends_session:
            self.epoch += 1
        self.seq += 1
        self.state = state
        self.changed_at = time.monotonic()
        self._changed.notify_all()
        if self._followed:
            watchdog.current().poke(self)  # a new state: the next look is due now
        change = StateChange(state, session_id, self.changed_at, simulated, self.seq)
        _count(lambda sink: sink.state_changed(state.name))
        try:
            self._listeners.publish(change)  # queues only: a thread that cannot start is put off
        except Exception as exc:  # a listener registry bug must not undo the decision
            talk.append(
                functools.partial(log.error, "handing %s to the listeners failed: %r", state, exc)
            )
        conn = self._conn  # why, read now: a reconnect may clear it before the line is written
        problem = conn.last_problem if conn is not None and not state.is_connected else ""
        talk.append(functools.partial(self._log_state, change, problem))

    def _log_state(self, change: StateChange, problem: str) -> None:
        # SUSPENDED and LOST are what an operator looks for, with why (kazoo's own
        # line per failed attempt is DEBUG); the rest is routine.
        state = change.state
        bad = state in (ConnectionState.SUSPENDED, ConnectionState.LOST)
        if change.simulated or not bad:
            problem = ""
        log.log(
            logging.WARNING if bad else logging.INFO,
            "ZooKeeper state %s (session %#x%s)%s",
            state.name,
            change.session_id,
            ", declared by the client" if change.simulated else "",
            f": {problem}" if problem else "",
            extra=fields(
                "client.state",
                state=state.name,
                session_id=change.session_id,
                namespace=self._settings.namespace or "/",
                simulated=change.simulated if state is ConnectionState.LOST else None,
            ),
        )

    def on_raw_state(self, conn: KazooConnection, kind: str, session_id: int) -> None:
        """kazoo's hook, on kazoo's connection thread: decide, publish, never block."""
        reclaim: list[tuple[int, bytes]] = []
        ended = False
        talk: list[Callable[[], None]] = []
        with self._changed:
            if self._closed or conn is not self._conn:
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
                        self._publish(ConnectionState.LOST, self.session_id, talk)
                    new = ConnectionState.READ_ONLY if read_only else ConnectionState.RECONNECTED
                if self.session_id and session_id != self.session_id:
                    self._past_sessions.add(self.session_id)
                self.session_id = session_id
                self._publish(new, session_id, talk)
                reclaim, self._abandoned = self._abandoned, []
            elif kind == "SUSPENDED":
                if self.state is not None and self.state.is_connected:
                    self._publish(ConnectionState.SUSPENDED, self.session_id, talk)
            else:
                # EXPIRED (the server says so), AUTH_FAILED, or CLOSED: kazoo's
                # connection thread ended by itself (we stop it only after close()).
                ended = kind == "CLOSED"
                if self.state is not None and self.state is not ConnectionState.LOST:
                    if self.state.is_connected:
                        self._publish(ConnectionState.SUSPENDED, self.session_id, talk)
                    self._publish(ConnectionState.LOST, self.session_id, talk)
        _talk(talk)
        if ended and self._on_connection_ended is not None:
            why = conn.last_problem or "kazoo's connection thread ended"
            self._on_connection_ended(conn, why)
        timeout = self._settings.connection_timeout
        for client_id in reclaim:
            start_or_defer(
                "zk-recipes close abandoned session",
                functools.partial(conn.close_session_on_server, client_id, timeout),
            )

    def look(self) -> float | None:
        """One look at the silence, by the process's watchdog: seconds to the next, None: done.

        Guarded: an error is reported and the next look comes soon (a watchdog
        that stopped looking would never declare LOST again). Decisions are
        made under the lock; the sync asked for and the log records go out
        after it is released.
        """
        talk: list[Callable[[], None]] = []
        prove: list[KazooConnection] = []
        wait: float | None
        with self._changed:
            if self._closed:
                return None
            try:
                wait = self._turn(talk, prove)
            except Exception as exc:
                talk.append(
                    functools.partial(log.error, "the session watchdog's turn failed: %r", exc)
                )
                wait = 0.05
        for conn in prove:
            conn.prove()  # queues a sync: never blocks
        _talk(talk)
        return wait

    def _turn(self, talk: list[Callable[[], None]], prove: list[KazooConnection]) -> float | None:
        """One look at the silence, under the lock: seconds to wait next, None to stop.

        Asks for a proof (a sync, through ``prove``) when nothing has proved the
        session for ``_PROVE_AFTER`` of its timeout: an idle client's pings and
        reads prove nothing (a follower cut from the quorum answers them).
        """
        conn = self._conn
        if conn is None:
            return None  # only close() clears it (the watchdog starts with attach())
        fraction = self._settings.simulated_expiry_fraction
        timeout = conn.negotiated_timeout or self._settings.session_timeout
        limit = fraction * timeout
        if self.state is None or self.state is ConnectionState.LOST:
            return limit / 4
        silent = session_clock() - conn.last_heard
        if silent < limit:
            prove_after = _PROVE_AFTER * timeout
            if silent >= prove_after and self.state.is_connected:
                prove.append(conn)  # one sync in flight at most (KazooConnection.prove)
            if silent < prove_after:
                return prove_after - silent + 0.005  # on the session clock (watchdog.py)
            # Proving: look again soon, so a sync that could not be sent, or failed
            # with its connection, is sent again (prove() keeps one in flight at most).
            return min(limit - silent + 0.005, _PROVE_AGAIN)
        session_id = self.session_id
        client_id = conn.client_id
        if client_id is not None:
            self._abandoned.append(client_id)
            self._abandoned_ids.add(client_id[0])
        # Decide first: the epoch, the state and the hand-off, before any word of it.
        simulated: list[Callable[[], None]] = []
        if self.state.is_connected:
            self._publish(ConnectionState.SUSPENDED, session_id, simulated)
        self._publish(ConnectionState.LOST, session_id, simulated, simulated=True)
        _count(lambda sink: sink.simulated_expiry())
        namespace = self._settings.namespace or "/"
        talk.append(
            lambda: log.warning(
                "nothing proves the ZooKeeper quorum heard of session %#x for %.2f s (no "
                "write or sync sent since then was answered; %.0f%% of the %.2f s session "
                "timeout): declaring it LOST",
                session_id,
                silent,
                fraction * 100,
                limit / fraction,
                extra=fields(
                    "client.simulated_expiry",
                    session_id=session_id,
                    namespace=namespace,
                    silent_s=round(silent, 3),
                ),
            )
        )
        talk.extend(simulated)
        conn.abandon_session()
        return 0.0


def _count(record: Callable[[_metrics.Sink], object]) -> None:
    """Record a metric if metrics are on; a sink that raises must not undo a decision."""
    sink = _metrics.sink
    if sink is None:
        return
    try:
        record(sink)
    except Exception as exc:
        say(functools.partial(log.error, "recording a zk-recipes metric failed: %r", exc))


def _talk(talk: list[Callable[[], None]]) -> None:
    """Hand the decisions' log records to the log writer, in order (never waits for them)."""
    for emit in talk:
        say(emit)
