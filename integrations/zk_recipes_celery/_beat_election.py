"""The beat election: every beat process of an app is a LeaderLatch candidate.

Znodes: ``<prefix>/beat/<beat name>/_c_<uuid>-latch-<seq>`` (Curator
LeaderLatch layout; data = ``host:pid``). The latch uses ErrorPolicy.STANDARD:
SUSPENDED drops leadership at once, so a beat cut off from ZooKeeper stops
publishing before the server can expire its session and elect another; on
LOST the latch joins again on the new session, without restarting beat.

The gate asks ``BeatElection.role()`` once per due entry, in the scheduler's
``is_due``, just before the entry is advanced and sent (``_beat_gate``), never
in a signal handler (Celery swallows their exceptions, redbeat#208).
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import socket
import threading
import time
import weakref
from typing import Any

from zk_recipes import (
    ConnectionLostError,
    ConnectionState,
    LeaderLatch,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes_celery._lifecycle import AppState, app_state

log = logging.getLogger("zk_recipes.celery.beat")

_CONNECTED = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)
#: How long a publish waits for a beat that just started to learn whether it leads.
DECIDE_WAIT = 3.0


class BeatRole(enum.Enum):
    LEADER = "leader"
    STANDBY = "standby"
    #: Not known yet (joining) or not knowable now (connection SUSPENDED).
    UNKNOWN = "unknown"


class BeatElection:
    """This process's seat in the beat election of one Celery app."""

    def __init__(self, state: AppState) -> None:
        self._state = state
        self._lock = threading.Lock()
        self._latch: LeaderLatch | None = None
        self._joiner: threading.Thread | None = None
        self._closed = threading.Event()
        self._decided = False
        self._last_leader: str | None = None
        #: How many times this beat became the leader (a term: the gate starts each from
        #: ZooKeeper's record of the sends, see beat.LeaderGate).
        self.terms = 0
        #: The process that made this election: after a fork it belongs to the parent.
        self.pid = os.getpid()
        self.identifier = f"{socket.gethostname()}:{os.getpid()}"

    def join(self) -> None:
        """Join in the background (connect, then queue); returns at once. Idempotent."""
        with self._lock:
            if self._closed.is_set() or self._latch is not None:
                return
            if self._joiner is not None and self._joiner.is_alive():
                return
            self._joiner = threading.Thread(
                target=self._join, name="zk-recipes beat election", daemon=True
            )
            self._joiner.start()

    def _join(self) -> None:
        """Connect and queue, trying until it works or the election is closed.

        An unreachable ensemble is said once, at WARNING, the moment it is
        known (``ProcessClient.available()``: a refused connection at once, a
        silent server after a second), with the ensemble and the reason;
        the retries after it are DEBUG, and the join that ends them INFO.
        """
        delay = 0.5
        failures = 0
        while not self._closed.is_set():
            try:
                client = self._state.process_client.available()
                path = self._state.config.beat_path
                latch = LeaderLatch(client, path, self.identifier)
                latch.add_listener(_RoleLogger(path, self.identifier, self))
                with self._lock:
                    if self._closed.is_set():
                        return
                    latch.start()
                    self._latch = latch
                log.info(
                    "beat %s joined the election at %s%s",
                    self.identifier,
                    path,
                    f" after {failures} failed attempt(s)" if failures else "",
                )
                return
            except ZkRecipesError as exc:
                failures += 1
                outage = isinstance(exc, (ConnectionLostError, ZkTimeoutError))
                level = logging.DEBUG if failures > 1 and outage else logging.WARNING
                if not outage:
                    level = logging.ERROR
                log.log(
                    level,
                    "beat %s cannot join the election: %s; no leader-only entry is sent until "
                    "it does (retrying, next in %.1fs)",
                    self.identifier,
                    exc,
                    delay,
                )
                self._closed.wait(delay)  # close() ends the wait
                delay = min(delay * 2, 30.0)

    def role(self) -> BeatRole:
        """LEADER, STANDBY, or UNKNOWN while joining or while the connection is down."""
        latch = self._latch
        if latch is None or self._closed.is_set():
            return BeatRole.UNKNOWN
        client = latch.client
        if client.state not in _CONNECTED:
            return BeatRole.UNKNOWN
        if latch.has_leadership():
            self._decided = True
            self._last_leader = self.identifier
            return BeatRole.LEADER
        node = latch.node
        if node is None:
            return BeatRole.UNKNOWN
        try:
            leader = latch.leader()
        except ZkRecipesError:
            return BeatRole.UNKNOWN
        if leader is None or leader.node == node:  # about to lead: our latch has not seen it yet
            return BeatRole.UNKNOWN
        self._decided = True
        self._last_leader = leader.id
        return BeatRole.STANDBY

    def leading_term(self) -> int | None:
        """This beat's term while it leads and is connected, else None; no request."""
        latch = self._latch
        if latch is None or self._closed.is_set() or latch.client.state not in _CONNECTED:
            return None
        return self.terms if latch.has_leadership() else None

    def may_publish(self, wait: float = DECIDE_WAIT) -> bool:
        """True only if we lead and are CONNECTED now.

        Right after start-up, before the first election outcome is known, waits up
        to ``wait`` s for it; later (e.g. while SUSPENDED) it answers at once, so a
        connection problem never stalls beat's loop.
        """
        self.join()
        if self._decided:
            wait = 0.0
        deadline = time.monotonic() + wait
        while True:
            role = self.role()
            if role is BeatRole.LEADER:
                return True
            if role is BeatRole.STANDBY or time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def leader_identifier(self) -> str | None:
        """The leader as last seen by ``role()`` (no extra request)."""
        return self._last_leader

    def close(self) -> None:
        """Leave the election (our node goes at once). Idempotent."""
        with self._lock:
            self._closed.set()
            latch, self._latch = self._latch, None
        if latch is not None and os.getpid() == self.pid:
            latch.close()


class _RoleLogger:
    def __init__(self, path: str, identifier: str, election: BeatElection) -> None:
        self._path = path
        self._identifier = identifier
        self._election = election

    def is_leader(self) -> None:
        self._election.terms += 1
        log.info(
            "beat %s is now the leader of %s: sending due entries", self._identifier, self._path
        )

    def not_leader(self) -> None:
        log.warning(
            "beat %s is no longer the leader of %s: not sending due entries",
            self._identifier,
            self._path,
        )


#: Each app's election seat in this process (one per AppState; a forked child makes its own).
_elections: weakref.WeakKeyDictionary[AppState, BeatElection] = weakref.WeakKeyDictionary()
_elections_lock = threading.Lock()


def beat_election(app: Any = None) -> BeatElection:
    """This process's BeatElection for ``app`` (created on first use, not joined yet).

    Its ``leave`` is registered with the app's state, so closing the state
    (worker or beat shutdown, ``close_clients()``) leaves the election before
    the client closes.
    """
    state = app_state(app)
    with _elections_lock:
        election = _elections.get(state)
        if election is None or election.pid != os.getpid():
            election = _elections[state] = BeatElection(state)
            state.on_close(functools.partial(leave, state))
    return election


def leave(state: AppState) -> bool:
    """Leave ``state``'s election now (our node goes at once); whether this process had a seat."""
    with _elections_lock:
        election = _elections.pop(state, None)
    if election is None:
        return False
    election.close()
    return True
