"""LeaderLatch: Curator's LeaderLatch, fenced, and safe across session loss.

Algorithm. Every candidate keeps one node in the latch directory (the
contender queue of _internals/contenders.py); the first node by sequence number leads.
A candidate that is not first watches only its immediate predecessor (a
getData watch: one notification per change, no herd). When that predecessor
is deleted and it was the head of the queue we saw, we lead at once, without
reading the directory again: sequence numbers only grow, so nobody can have
queued ahead of us. The leader watches its own node: if someone deletes it,
the latch drops leadership and joins again at the back with a new node
(Curator's ``reset()``). One thread per latch runs this loop; listeners run
on a serial executor of the latch, never on kazoo's threads.

Znodes (Curator 5 layout, so Java and Python candidates share one election):
``<path>/_c_<uuid>-latch-<seq10>``, EPHEMERAL_SEQUENTIAL, protected, under
CONTAINER parents; data = the UTF-8 identifier (``""`` gives 0 bytes).

SUSPENDED and LOST (the rules of every hold, _internals/holding.py: a term
is a hold on our node):

- ``ErrorPolicy.STANDARD`` (the default, Curator's): SUSPENDED drops
  leadership at once (``not_leader``). RECONNECTED on the same session with
  our node still first gives it back (``is_leader``, same fencing token).
- ``ErrorPolicy.SESSION``: SUSPENDED keeps leadership; only LOST drops it.
  The client declares LOST itself once the server has been silent for part
  of the session timeout (simulated expiry), so a partitioned leader stops
  before the server can expire its session and elect someone else.
- LOST always drops leadership. On the new session the latch deletes its
  old node and joins again with a new one.

Leadership is only ever declared on a node whose session life lasts (its
loss epoch is the client's; see _internals/holding.py), never on a node of
a session already declared LOST. Curator 5.4 re-reads
the directory after a reconnect and can lead on its old node, which the
server keeps until it expires the old session: two leaders (CURATOR-696,
fixed in 5.7). We never do.

Curator: ``org.apache.curator.framework.recipes.leader.LeaderLatch``.

Size: over the house limit (tests/test_module_sizes.py): one recipe and its state machine
(Curator's LeaderLatch.java is 683 lines); what it shares with the selector
lives in participants.py, the holding rules in _internals/holding.py, its
values (close modes, listener, history, statistics) in latch_values.py.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import threading
import time
from typing import final

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import StateChange
from zk_recipes._client.steps import Steps, run_blocking
from zk_recipes._deadline import wait_deadline
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    NoNodeError,
    RecipeUsageError,
    RetriesExhaustedError,
    SessionLost,
    WrongTypeError,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client, require_str
from zk_recipes._internals.contenders import ContenderQueue, Entry, is_live
from zk_recipes._internals.holding import (
    Hold,
    apply_change,
    hold_fields,
    is_sure,
    is_valid,
    taken_now,
)
from zk_recipes._internals.lifecycle import Lifecycle, Phase
from zk_recipes._internals.waits import NewWake, Sleep
from zk_recipes._leader.latch_values import (
    CloseMode,
    History,
    LeaderLatchListener,
    LeaderLatchStatistics,
    LeadershipDecision,
)
from zk_recipes._leader.participants import ErrorPolicy, Participant, read_participants
from zk_recipes._threads import SerialExecutor, join_unless_current, say
from zk_recipes._types import Wakeable, WatchEvent, WatchEventType

log = logging.getLogger("zk_recipes.leader")

LATCH_TOKEN = "latch-"
#: How long ``close(NOTIFY_LEADER)`` lets the ``not_leader`` listeners run before the
#: node is deleted (and the next candidate is elected).
_NOTIFY_GRACE = 10.0
#: Resets closer together than this (seconds) back off, so that a node deleted
#: again and again cannot make us spin (CURATOR-644/645 were such storms).
_RESET_WINDOW = 1.0


@final
class LeaderLatch:
    """Leader election where every candidate stays in line: ``LeaderLatch(client, path, id)``.

    ``start()`` joins; the first candidate leads until it closes or loses its
    session. Listen with ``add_listener``, or wait with ``await_leadership``;
    ``has_leadership()`` answers at once. Use it for "one of us is in charge
    while it is up" (a scheduler, a singleton consumer); use LeaderSelector
    for "take turns running this function".

    Parameters:
        client: a started ZkClient.
        path: the election's directory; Curator LeaderLatches on the same
            path (``/<namespace>/<path>``) take part in the same election.
        identifier: this candidate's id, its node's data (``participants()``).
        error_policy: STANDARD gives leadership up on SUSPENDED (Curator's
            default), SESSION only on LOST.
        history: called with a ``LeadershipDecision`` each time a term begins
            or ends, at the moment the latch decides (inline, under its lock:
            record and return at once). For audit logs and checkers; listeners
            are for acting on leadership.

    While leading: ``fencing_token`` (our node's czxid) for storage that can
    refuse a deposed leader. See docs/recipes/leader-latch.md.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        identifier: str = "",
        *,
        error_policy: ErrorPolicy = ErrorPolicy.STANDARD,
        history: History | None = None,
    ) -> None:
        self.client = require_client(client, "LeaderLatch")
        if history is not None and not callable(history):
            raise WrongTypeError(f"history must be a callable or None, got {history!r}")
        self._history = history
        self.identifier = require_str(identifier, "identifier")
        if not isinstance(error_policy, ErrorPolicy):
            raise WrongTypeError(f"error_policy must be an ErrorPolicy, got {error_policy!r}")
        self.path = _paths.validate_writable_path(path)
        self.error_policy = error_policy
        self._queue = ContenderQueue(client, self.path, LATCH_TOKEN)
        self._data = identifier.encode("utf-8")
        self._lock = threading.Lock()
        self._life = Lifecycle()
        self._entry: Entry | None = None
        #: Our node while it is first in line: a hold like any other (_internals/holding.py).
        self._term: Hold | None = None
        self._last_token: int | None = None
        self._published = False
        self._listeners: list[LeaderLatchListener] = []
        self._executor = SerialExecutor(f"zk-recipes latch listeners {self.path}")
        self._callback_thread: int | None = None
        self._waiters: set[Wakeable] = set()
        self._wake = threading.Event()
        self._watching: str | None = None
        self._watching_head = False
        self._head_gone = False
        self._recent_resets: collections.deque[float] = collections.deque(maxlen=4)
        self._thread: threading.Thread | None = None
        self._terms = 0
        self._resets = 0
        #: The term last published as leading (its node and token for ``history``).
        self._published_term: Hold | None = None

    # -- public API ------------------------------------------------------
    def start(self) -> LeaderLatch:
        """Join the election (in the background; the client may still be connecting)."""
        with self._lock:
            self._life.begin(repr(self), instead="create a new LeaderLatch to join again")
            try:
                self.client.check_usable()  # fail fast when the client is closed or forked
            except BaseException:
                self._life.phase = Phase.LATENT
                raise
        self.client.add_listener(self._on_state)
        self._thread = threading.Thread(
            target=self._run, name=f"zk-recipes latch {self.path}", daemon=True
        )
        self._thread.start()
        return self

    def close(self, mode: CloseMode = CloseMode.SILENT) -> None:
        """Leave the election: our node is deleted (in the background if the connection is down).

        ``SILENT`` (the default) removes the listeners first; ``NOTIFY_LEADER``
        runs a leader's ``not_leader`` listeners (up to 10 s) before its node
        goes, so they finish before anybody else is elected. Idempotent.
        """
        if not isinstance(mode, CloseMode):
            raise WrongTypeError(f"mode must be a CloseMode, got {mode!r}")
        with self._lock:
            if self._life.end() is None:
                return
            entry, self._entry = self._entry, None
            self._term = None
            self._watching = None
            if mode is CloseMode.SILENT:
                self._listeners.clear()
        self._publish("closed")
        if mode is CloseMode.NOTIFY_LEADER and self._callback_thread != threading.get_ident():
            self._executor.wait_idle(_NOTIFY_GRACE)
        if entry is not None:
            # First, since the next candidate waits for it. A closed client has no
            # session left, and so no node either.
            with contextlib.suppress(ClientStateError):
                self._queue.leave(entry)
        self._wake.set()
        self._wake_waiters()
        self.client.remove_listener(self._on_state)
        join_unless_current(self._thread, self.client.settings.connection_timeout)

    def __enter__(self) -> LeaderLatch:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def has_leadership(self) -> bool:
        """True while this latch leads for sure (see ``ErrorPolicy`` for SUSPENDED)."""
        term = self._term
        if term is None or not self._life.started:
            return False
        if self.error_policy is ErrorPolicy.STANDARD:
            return is_sure(self.client, term)
        return is_valid(self.client, term)

    def await_leadership(self, timeout: float | None = None) -> bool:
        """Wait until this latch leads; False on timeout, or if the latch or client is closed."""
        return run_blocking(self.await_leadership_steps(timeout))

    def await_leadership_steps(self, timeout: float | None = None) -> Steps[bool]:
        """``await_leadership`` as steps (_client/steps.py): what the asyncio form awaits."""
        deadline = wait_deadline(timeout)
        if self._life.phase is Phase.LATENT:
            self._life.require_started(repr(self))
        wake: Wakeable = yield NewWake()
        with self._lock:
            self._waiters.add(wake)
        try:
            with self.client.wake_on_close(wake):
                while True:
                    if self.has_leadership():
                        return True
                    if not self._life.started or not self.client.is_started:
                        return False
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    yield Sleep(wake, remaining)
        finally:
            with self._lock:
                self._waiters.discard(wake)

    def add_listener(self, listener: LeaderLatchListener) -> None:
        """Call ``listener.is_leader()`` / ``not_leader()`` on each change, on a latch thread."""
        if not callable(getattr(listener, "is_leader", None)) or not callable(
            getattr(listener, "not_leader", None)
        ):
            raise WrongTypeError(
                f"a latch listener needs is_leader() and not_leader() methods, got {listener!r}"
            )
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: LeaderLatchListener) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def participants(self) -> list[Participant]:
        """Every candidate in line, leader first (our own node included)."""
        return read_participants(self._queue)

    def leader(self) -> Participant | None:
        """The current leader as ZooKeeper sees it (None when nobody is in line)."""
        participants = self.participants()
        return participants[0] if participants else None

    @property
    def node(self) -> str | None:
        """Path of our node (None before it is created, and after close)."""
        entry = self._entry
        return entry.path if entry is not None else None

    @property
    def fencing_token(self) -> int:
        """The czxid of the node that won our current (or, once it ended, our last) term.

        Pass it to storage, which refuses any write with a lower token than it
        has seen: a newer leader always holds a larger one.
        """
        term = self._term
        if term is not None:
            return term.entry.czxid
        if self._last_token is None:
            raise RecipeUsageError(f"{self!r} has never led: there is no fencing token")
        return self._last_token

    def statistics(self) -> LeaderLatchStatistics:
        """A snapshot of this latch (see LeaderLatchStatistics)."""
        term = self._term
        return LeaderLatchStatistics(
            path=self.path,
            state=self._life.phase.value,
            leading=self.has_leadership(),
            node=self.node,
            fencing_token=term.entry.czxid if term is not None else self._last_token,
            terms=self._terms,
            resets=self._resets,
        )

    def __repr__(self) -> str:
        if not self._life.started:
            state = self._life.phase.value
        elif self.has_leadership():
            state = f"leader token={self.fencing_token}"
        else:
            state = "candidate"
        ident = f" id={self.identifier!r}" if self.identifier else ""
        return f"<LeaderLatch {self.path}{ident} {state}>"

    # -- leadership and listeners ------------------------------------------
    def _publish(self, reason: str, at: float | None = None) -> None:
        """Tell listeners and waiters when leadership changed since we last told them.

        ``reason`` and ``at`` (a ``time.monotonic()`` of the decision, when it
        was made elsewhere: a state change's) go to the ``history``.
        """
        with self._lock:
            leading = self.has_leadership()
            if leading == self._published:
                return
            self._published = leading
            if leading:
                self._terms += 1
                self._published_term = self._term
            self._record(leading, reason, at)
            listeners = list(self._listeners)
            if listeners:
                # Submitted under the lock, so the callbacks run in the order decided.
                self._executor.submit(lambda: self._call_listeners(listeners, leading))
            # Leaving (close(), or closing the client) ends a term; anything else loses it.
            chosen = self._life.started and not self.client.is_closed
            term = self._term
            entry = term.entry if term is not None else self._entry
        event = "leader.gained" if leading else "leader.lost" if chosen else "leader.ended"
        log.info(
            "latch %s: %s",
            self.path,
            "leader" if leading else "not leader",
            extra=hold_fields(event, "LeaderLatch", self.path, entry),
        )
        sink = _metrics.sink
        if sink is not None and (leading or chosen):
            sink.leadership("LeaderLatch", self.path, leading)
        self._wake_waiters()

    def _record(self, leading: bool, reason: str, at: float | None) -> None:
        """The decision, to ``history`` (called with the lock held: history must be quick)."""
        history = self._history
        term = self._published_term
        if not leading:
            self._published_term = None
        if history is None:
            return
        if at is None and not leading and term is not None and not is_valid(self.client, term):
            # The term ended with its session: when the client decided that.
            at, reason = self.client.state_changed_at, reason or "session ended"
        decision = LeadershipDecision(
            leading=leading,
            at_ns=time.monotonic_ns() if at is None else int(at * 1e9),
            node=term.entry.path if term is not None else None,
            token=term.entry.czxid if term is not None else None,
            reason=reason,
        )
        try:
            history(decision)
        except Exception as exc:  # a recorder's failure must not break the election
            say(functools.partial(log.error, "the history of latch %s raised %r", self.path, exc))

    def _call_listeners(self, listeners: list[LeaderLatchListener], leading: bool) -> None:
        self._callback_thread = threading.get_ident()
        try:
            for listener in listeners:
                try:
                    if leading:
                        listener.is_leader()
                    else:
                        listener.not_leader()
                except Exception:
                    log.exception("error in a listener of latch %s", self.path)
        finally:
            self._callback_thread = None

    def _wake_waiters(self) -> None:
        with self._lock:
            waiters = list(self._waiters)
        for event in waiters:
            event.set()

    def _on_state(self, change: StateChange) -> None:
        term = self._term
        if term is not None and apply_change(self.client, term, change):
            term.lost = True
        self._publish(change.state.name, change.at)
        self._wake.set()

    def _on_predecessor(self, event: WatchEvent) -> None:
        # kazoo's thread: be quick. When the head we waited behind is deleted we
        # are first (sequence numbers only grow): lead now, without waiting for
        # the loop, which then re-arms the watch on our own node.
        entry = None
        if event.type is WatchEventType.DELETED:
            with self._lock:
                if event.path == self._watching and self._watching_head:
                    self._head_gone = True
                    entry = self._entry
        if entry is not None:
            self._declare(entry)
        self._wake.set()

    def _on_own_node(self, event: WatchEvent) -> None:
        self._wake.set()  # the loop re-reads the directory; a missing node means reset

    # -- the election loop (one thread per latch) ---------------------------
    def _run(self) -> None:
        with self.client.wake_on_close(self._wake):
            while True:
                self._wake.clear()
                if not self._life.started:
                    return
                if not self.client.is_started:  # the client was closed under us
                    with self._lock:
                        self._term = None
                    self._publish("client closed")
                    return
                state = self.client.state
                if state is None or not state.is_connected:
                    self._wake.wait(1.0)
                    continue
                try:
                    again = self._step()
                except ClientStateError:
                    continue  # closed meanwhile: the checks above end the loop
                except (
                    ConnectionLostError,
                    ZkTimeoutError,
                    SessionLost,
                    RetriesExhaustedError,
                ) as exc:
                    log.info("latch %s: %r; trying again", self.path, exc)
                    self._wake.wait(0.05)
                    continue
                except Exception:
                    log.exception("latch %s: unexpected error; trying again in 1 s", self.path)
                    self._wake.wait(1.0)
                    continue
                if not again:
                    self._wake.wait()

    def _step(self) -> bool:
        """Make sure we are in line and act on our place; True to look again at once."""
        client = self.client
        entry = self._entry
        if entry is not None and not is_live(client, entry):
            self._reset(entry, f"its session {entry.session_id:#x} is gone")
            return True
        names: list[str] | None
        if entry is None:
            entry, names = self._queue.enter(self._data)
            # Ours from this moment, before anything else can fail: a node we made
            # and forgot would queue ahead of our next one, and once it is first
            # nobody would lead for as long as our session lives.
            with self._lock:
                closed = not self._life.started
                if not closed:
                    self._entry = entry
                    self._watching, self._head_gone = None, False
            if closed:
                self._queue.leave(entry)
                return False
            if names is None:  # the list behind the create was lost: read it (a failure
                names = self._queue.participants()  # leaves the entry, the next step re-reads)
        else:
            with self._lock:
                shortcut = self._head_gone
                self._head_gone = False
            names = None if shortcut else self._queue.participants()
            if names is not None:
                with self._lock:
                    if self._head_gone:  # the head went while we read: the list is stale
                        self._head_gone = False
                        names = None
        if names is None:
            index = 0  # the head we waited behind is gone: we are first
        elif entry.name not in names:
            self._reset(entry, "our node is gone")
            return True
        else:
            index = names.index(entry.name)
        if index == 0:
            return self._lead(entry)
        assert names is not None
        predecessor = self._queue.node_path(names[index - 1])
        with self._lock:
            if self._term is not None:  # someone queued ahead of us (a foreign node?)
                self._term = None
            self._watching, self._watching_head = predecessor, index == 1
        self._publish("someone queued ahead of us")
        try:
            client.get_async(predecessor, watch=self._on_predecessor).result(
                client.settings.connection_timeout
            )
        except NoNodeError:
            return True  # gone already: look again
        return False

    def _declare(self, entry: Entry) -> bool:
        """Lead on ``entry``, first in line; False when closed, replaced or of another session."""
        client = self.client
        with self._lock:
            if not self._life.started or self._entry is not entry:
                return False
            if not is_live(client, entry):
                return False
            if self._term is None or self._term.entry is not entry:
                # Declared while disconnected, the term is in doubt until the
                # reconnect shows our node is still there (apply_change).
                seq, in_doubt = taken_now(client)
                self._term = Hold(entry, seq, in_doubt)
                self._last_token = entry.czxid
            self._watching = None
        self._publish("first in line")
        return True

    def _lead(self, entry: Entry) -> bool:
        """First in line: verify our node, then lead on it (verify first, publish after).

        Read with a watch kept while we lead: deleted by someone means we no
        longer do. A term already declared by the head-deleted shortcut
        (``_on_predecessor``, decided from the list our node was in) is checked
        the same way.
        """
        client = self.client
        try:
            _, stat = client.get_async(entry.path, watch=self._on_own_node).result(
                client.settings.connection_timeout
            )
        except NoNodeError:
            self._reset(entry, "our node is gone")
            return True
        if stat.ephemeral_owner != entry.session_id or not is_live(client, entry):
            self._reset(entry, f"our node belongs to session {stat.ephemeral_owner:#x}")
            return True
        if not self._declare(entry):
            # Closed or replaced: the loop ends or moves on. Other session, or
            # LOST: the next step resets or waits for the connection.
            return self._life.started and self._entry is entry
        return False

    def _reset(self, entry: Entry, why: str) -> None:
        """Drop leadership, delete our node, and join again with a new one (Curator's reset)."""
        with self._lock:
            if self._entry is entry:
                self._entry = None
            if self._term is not None and self._term.entry is entry:
                self._term = None
            self._watching, self._head_gone = None, False
            self._resets += 1
        self._publish(why)  # decide first (not_leader is on its way), talk later
        log.info("latch %s: %s; joining again with a new node", self.path, why)
        self._queue.leave(entry)
        now = time.monotonic()
        recent = self._recent_resets
        recent.append(now)
        if len(recent) == recent.maxlen and now - recent[0] < _RESET_WINDOW:
            self._wake.wait(_RESET_WINDOW / 4)
