"""LeaderSelector: Curator's LeaderSelector, with cooperative cancellation.

Algorithm. Leadership is holding a Lock (the fair, fenced mutex of
_locks/lock.py) on the selector's path while the user's ``take_leadership(ctx)``
runs on the selector's own thread; when it returns (or raises) the lock is
released and the next candidate leads. With ``auto_requeue=True`` the
selector queues again after every term; otherwise it competes once per
``start()`` / ``requeue()``.

Znodes: the mutex layout, ``<path>/_c_<uuid>-lock-<seq10>``,
EPHEMERAL_SEQUENTIAL, protected, under CONTAINER parents; data = the UTF-8
identifier (``""`` gives 0 bytes; Curator writes the local IP when no id is
set). So a Java LeaderSelector, a Java InterProcessMutex and our Lock on one
path all exclude each other; a LeaderLatch on the same path does not take
part (other token).

Cancellation. Python threads cannot be interrupted, so the contract is
cooperative: ``ctx.cancelled`` (a threading.Event) is set, and the optional
``on_cancel(ctx)`` runs on a selector thread, the moment leadership is in
question, and ``take_leadership`` must then stop and return soon.

- ``ErrorPolicy.STANDARD`` (the default): cancelled on SUSPENDED and LOST,
  like Curator's LeaderSelectorListenerAdapter (CancelLeadershipException).
- ``ErrorPolicy.SESSION``: cancelled on LOST only.
- Also cancelled when our node is deleted by someone (the watch on it is
  armed again after every reconnect, since kazoo drops watches on a
  disconnect), when the mutex's hold is lost by any route, on ``close()``,
  and when the client is closed.

The client declares LOST before the server can expire the session, so a
partitioned leader is told before anybody else can be elected; how long its
``take_leadership`` then takes to return is up to it. Guard external writes
with ``ctx.fencing_token`` (our node's czxid) so storage can refuse a leader
that did not stop in time.

Curator: ``org.apache.curator.framework.recipes.leader.LeaderSelector``
(5.4, whose requeue after interrupts or expiry can stop for good:
CURATOR-518, CURATOR-671; here a failed attempt is retried once connected).

Size: over the house limit (tests/test_module_sizes.py): one recipe and its
requeue loop (Curator's LeaderSelector.java is of the same size); what it
shares with the latch is participants.py's, the hold rules _internals'.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from typing import final

from zk_recipes import _metrics, _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import ConnectionState, StateChange
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
from zk_recipes._internals.args import require_callable, require_client, require_str
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.contenders import ContenderQueue
from zk_recipes._internals.holding import hold_fields, is_valid
from zk_recipes._internals.lifecycle import Lifecycle, Phase
from zk_recipes._leader.participants import ErrorPolicy, Participant, read_participants
from zk_recipes._locks.lock import LOCK_KIND, LOCK_TOKEN, _Mutex
from zk_recipes._threads import SerialExecutor, join_unless_current
from zk_recipes._types import WatchEvent, WatchEventType

log = logging.getLogger("zk_recipes.leader")

TakeLeadership = Callable[["LeadershipContext"], object]
CancelCallback = Callable[["LeadershipContext"], object]

# Its metrics are leadership's (the selector records them), not a lock's.
_SELECTOR_KIND = dataclasses.replace(LOCK_KIND, name="LeaderSelector lock", metric=None)


@final
class LeadershipContext:
    """One term of leadership, handed to ``take_leadership(ctx)``.

    Check ``ctx.cancelled`` (or wait on it) and return soon once it is set;
    ``ctx.reason`` says why ("SUSPENDED", "LOST", "node deleted", "closed").
    """

    __slots__ = ("_began", "_reason", "cancelled", "fencing_token", "node", "selector", "term")

    def __init__(self, selector: LeaderSelector, fencing_token: int, node: str, term: int) -> None:
        self.selector = selector
        #: Our node's czxid: larger for every later term, whoever leads it.
        self.fencing_token = fencing_token
        #: Path of our lock node, relative to the client's namespace.
        self.node = node
        #: 1 for this selector's first term, 2 for its second...
        self.term = term
        #: Set when leadership is in question: stop and return.
        self.cancelled = threading.Event()
        self._reason: str | None = None
        #: take_leadership was called (set under the selector's guard).
        self._began = False

    @property
    def reason(self) -> str | None:
        """Why the term was cancelled (None while it is not)."""
        return self._reason

    def _cancel(self, reason: str) -> bool:
        """Cancel once; True the first time."""
        if self._reason is not None:
            return False
        self._reason = reason
        self.cancelled.set()
        return True

    def __repr__(self) -> str:
        state = f"cancelled ({self._reason})" if self._reason else "leading"
        return f"<LeadershipContext term={self.term} token={self.fencing_token} {state}>"


@dataclasses.dataclass(frozen=True)
class LeaderSelectorStatistics:
    """A snapshot of one selector (``selector.statistics()``)."""

    #: The election's path, relative to the client's namespace.
    path: str
    #: "latent", "started" or "closed".
    state: str
    #: Leading now (what ``has_leadership()`` says).
    leading: bool
    #: Queued (or about to queue) for a term.
    queued: bool
    #: Terms led so far.
    terms: int
    #: Terms cancelled so far (by a state change, a deleted node, close()).
    cancellations: int


@final
class LeaderSelector:
    """Run ``take_leadership(ctx)`` while this process leads; return from it to give up.

    ``LeaderSelector(client, path, take_leadership, auto_requeue=True).start()``.

    Parameters:
        client: a started ZkClient.
        path: the election's directory; a Java LeaderSelector (or
            InterProcessMutex) on the same path takes part.
        take_leadership: called with a LeadershipContext on the selector's
            thread; leadership lasts until it returns. It must watch
            ``ctx.cancelled`` and return soon once it is set.
        identifier: this candidate's id (its node's data; ``participants()``).
        auto_requeue: compete again after every term (else once per
            ``start()``/``requeue()``).
        error_policy: STANDARD cancels on SUSPENDED and LOST, SESSION on LOST only.
        on_cancel: called with the context when a term is cancelled.

    See docs/recipes/leader-selector.md.
    """

    def __init__(
        self,
        client: ZkClient,
        path: str,
        take_leadership: TakeLeadership,
        *,
        identifier: str = "",
        auto_requeue: bool = False,
        error_policy: ErrorPolicy = ErrorPolicy.STANDARD,
        on_cancel: CancelCallback | None = None,
    ) -> None:
        self.client = require_client(client, "LeaderSelector")
        require_callable(take_leadership, "take_leadership")
        if on_cancel is not None:
            require_callable(on_cancel, "on_cancel")
        self.identifier = require_str(identifier, "identifier")
        if not isinstance(error_policy, ErrorPolicy):
            raise WrongTypeError(f"error_policy must be an ErrorPolicy, got {error_policy!r}")
        self.path = _paths.validate_writable_path(path)
        self.auto_requeue = bool(auto_requeue)
        self.error_policy = error_policy
        self._take_leadership = take_leadership
        self._on_cancel = on_cancel
        self._stop_waiting = Cancellation()
        self._mutex = _Mutex(
            client,
            self.path,
            _SELECTOR_KIND,
            node_data=identifier.encode("utf-8"),
            stop=self._stop_waiting,
        )
        self._mutex.on_lost(self._mutex_lost)
        self._queue = ContenderQueue(client, self.path, LOCK_TOKEN)
        self._guard = threading.Lock()
        self._changed = threading.Condition(self._guard)
        self._life = Lifecycle()
        self._pending = False
        self._acquiring = False
        self._ctx: LeadershipContext | None = None
        self._connected = threading.Event()
        self._executor = SerialExecutor(f"zk-recipes selector callbacks {self.path}")
        self._thread: threading.Thread | None = None
        self._terms = 0
        self._cancellations = 0

    # -- public API ------------------------------------------------------
    def start(self) -> LeaderSelector:
        """Start competing (once, or for ever with ``auto_requeue``), in the background."""
        with self._guard:
            self._life.begin(
                repr(self), instead="use requeue() to compete again, or create a new selector"
            )
            try:
                self.client.check_usable()  # fail fast when the client is closed or forked
            except BaseException:
                self._life.phase = Phase.LATENT
                raise
            self._pending = True
        self.client.add_listener(self._on_state)
        self._thread = threading.Thread(
            target=self._run, name=f"zk-recipes selector {self.path}", daemon=True
        )
        self._thread.start()
        return self

    def requeue(self) -> bool:
        """Compete again after the current term (if any); False if already queued."""
        with self._changed:
            if not self._life.started:
                hint = "create a new selector" if self._life.closed else "call start() first"
                raise RecipeUsageError(f"requeue() of {self!r}: it is not started ({hint})")
            if self._pending or self._acquiring:
                return False
            self._pending = True
            self._changed.notify_all()
            return True

    def close(self, timeout: float = 10.0) -> None:
        """Stop competing: cancel a running term and wait (up to ``timeout`` s) for it to end.

        The lock node is deleted once ``take_leadership`` has returned (it is
        never released under a leader that is still running). Idempotent.
        """
        with self._changed:
            if self._life.end() is None:
                return
            self._pending = False
            ctx = self._ctx
            self._changed.notify_all()
        self._stop_waiting.set()
        self._connected.set()
        if ctx is not None:
            self._cancel(ctx, "closed")
        if not join_unless_current(self._thread, timeout):
            log.warning(
                "selector %s: take_leadership did not return within %g s of close(); "
                "its node is deleted when it does",
                self.path,
                timeout,
            )
        self.client.remove_listener(self._on_state)

    def __enter__(self) -> LeaderSelector:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def has_leadership(self) -> bool:
        """True while ``take_leadership`` runs, not cancelled, on a node we hold for sure."""
        ctx = self._ctx
        if ctx is None or ctx.cancelled.is_set():
            return False
        if self.error_policy is ErrorPolicy.STANDARD:
            return self._mutex.is_held()
        hold = self._mutex._hold
        return hold is not None and is_valid(self.client, hold)

    def participants(self) -> list[Participant]:
        """Every candidate in line, leader first (ids from node data, as in Curator)."""
        return read_participants(self._queue)

    def leader(self) -> Participant | None:
        participants = self.participants()
        return participants[0] if participants else None

    def statistics(self) -> LeaderSelectorStatistics:
        """A snapshot of this selector (see LeaderSelectorStatistics)."""
        return LeaderSelectorStatistics(
            path=self.path,
            state=self._life.phase.value,
            leading=self.has_leadership(),
            queued=self._pending or self._acquiring,
            terms=self._terms,
            cancellations=self._cancellations,
        )

    def __repr__(self) -> str:
        if not self._life.started:
            state = self._life.phase.value
        elif self.has_leadership():
            state = "leading"
        elif self._ctx is not None:
            state = "cancelled, still running"
        elif self._pending or self._acquiring:
            state = "queued"
        else:
            state = "idle"
        ident = f" id={self.identifier!r}" if self.identifier else ""
        return f"<LeaderSelector {self.path}{ident} {state}>"

    # -- the worker thread -------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and self._life.started:
                    self._changed.wait()
                if not self._life.started:
                    return
                self._pending = False
                self._acquiring = True
            try:
                acquired = self._acquire()
            finally:
                with self._guard:
                    self._acquiring = False
            if not acquired:
                if not self._life.started or not self.client.is_started:
                    return
                continue
            self._lead()
            with self._guard:
                if self.auto_requeue and self._life.started:
                    self._pending = True

    def _acquire(self) -> bool:
        """Take the mutex, retrying across connection trouble; False when closed."""
        while self._life.started and self.client.is_started:
            try:
                if not self._mutex.acquire():
                    return False  # close() ended the wait
            except ClientStateError:
                return False
            except (ConnectionLostError, ZkTimeoutError, SessionLost, RetriesExhaustedError) as exc:
                log.info("selector %s: %r; trying again once connected", self.path, exc)
                self._wait_connected()
                continue
            if not self._running():
                self._release()
                return False
            return True
        return False

    def _running(self) -> bool:
        return self._life.started

    def _wait_connected(self) -> None:
        while self._life.started and self.client.is_started:
            self._connected.clear()
            state = self.client.state
            if state is not None and state.is_connected:
                return
            self._connected.wait(1.0)

    def _lead(self) -> None:
        mutex = self._mutex
        node = mutex.node or ""
        with self._guard:
            self._terms += 1
            ctx = LeadershipContext(self, mutex.fencing_token, node, self._terms)
            self._ctx = ctx
            closed = not self._life.started
        # The context is published before these checks, so a state change (or the
        # mutex's loss) from here on reaches it through _on_state / _mutex_lost.
        hold = mutex._hold
        if closed:
            self._cancel(ctx, "closed")
        elif hold is None or not is_valid(self.client, hold):
            self._cancel(ctx, "LOST")
        elif self.error_policy is ErrorPolicy.STANDARD and not mutex.is_held():
            self._cancel(ctx, "SUSPENDED")
        else:
            self._watch_node(ctx)
        with self._guard:
            ctx._began = not ctx.cancelled.is_set()
        if ctx._began:
            log.info(
                "selector %s: leading, term %d",
                self.path,
                ctx.term,
                extra=self._fields("leader.gained", ctx),
            )
            sink = _metrics.sink
            if sink is not None:
                sink.leadership("LeaderSelector", self.path, True)
        try:
            if ctx._began:
                self._take_leadership(ctx)
        except Exception:
            log.exception("selector %s: take_leadership raised; leadership given up", self.path)
        finally:
            with self._guard:
                self._ctx = None
            self._release()

    def _release(self) -> None:
        try:
            self._mutex.release()
        except ClientStateError:
            pass  # the client is closed: the server deleted the node with the session
        except Exception:
            log.warning("selector %s: releasing the lock failed", self.path, exc_info=True)

    def _watch_node(self, ctx: LeadershipContext) -> None:
        """Cancel the term if someone deletes our node (someone else would lead).

        kazoo drops the watch on a disconnect (NONE): it is armed again then,
        and on every RECONNECTED (see _on_state), for as long as the term runs.
        """

        def deleted(event: WatchEvent) -> None:
            if self._ctx is not ctx:
                return  # our own release deletes it too, after the term ended
            if event.type is WatchEventType.DELETED:
                self._cancel(ctx, "node deleted")
            else:
                # NONE (kazoo dropped the watch with the connection) or CHANGED: watch
                # again, off kazoo's thread.
                self._executor.submit(lambda: self._rearm(ctx))

        try:
            self.client.get_async(ctx.node, watch=deleted).result(
                self.client.settings.connection_timeout
            )
        except NoNodeError:
            self._cancel(ctx, "node deleted")
        except (ConnectionLostError, ZkTimeoutError, SessionLost, ClientStateError):
            pass  # the state listener decides, and re-arms on RECONNECTED

    def _rearm(self, ctx: LeadershipContext) -> None:
        if self._ctx is ctx and not ctx.cancelled.is_set():
            state = self.client.state
            if state is not None and state.is_connected:
                self._watch_node(ctx)

    def _mutex_lost(self, _mutex: object) -> None:
        ctx = self._ctx
        if ctx is not None:
            self._cancel(ctx, "LOST")

    def _on_state(self, change: StateChange) -> None:
        if change.state.is_connected:
            self._connected.set()
        ctx = self._ctx
        if ctx is None:
            return
        if change.state is ConnectionState.CLOSED:
            self._cancel(ctx, "closed")
        elif change.state is ConnectionState.LOST:
            self._cancel(ctx, "LOST")
        elif change.state is ConnectionState.SUSPENDED:
            if self.error_policy is ErrorPolicy.STANDARD:
                self._cancel(ctx, "SUSPENDED")
        else:
            hold = self._mutex._hold
            if hold is None or not is_valid(self.client, hold):
                self._cancel(ctx, "LOST")
            else:
                self._rearm(ctx)  # kazoo dropped the node watch with the connection

    def _cancel(self, ctx: LeadershipContext, reason: str) -> None:
        if not ctx._cancel(reason):
            return
        with self._guard:
            self._cancellations += 1
            began = ctx._began
        chosen = reason != "closed"
        log.info(
            "selector %s: term %d cancelled (%s)",
            self.path,
            ctx.term,
            reason,
            extra={
                **self._fields("leader.lost" if chosen else "leader.ended", ctx),
                "zk_reason": reason,
            },
        )
        sink = _metrics.sink
        if sink is not None and began and chosen:
            sink.leadership("LeaderSelector", self.path, False)
        callback = self._on_cancel
        if callback is not None:
            self._executor.submit(lambda: callback(ctx))

    def _fields(self, event: str, ctx: LeadershipContext) -> dict[str, object]:
        hold = self._mutex._hold
        fields = hold_fields(event, "LeaderSelector", self.path, hold.entry if hold else None)
        fields["zk_token"] = ctx.fencing_token
        return fields
