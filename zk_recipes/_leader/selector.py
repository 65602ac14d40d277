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
- Also cancelled when our node is deleted by someone, and on ``close()``.

The client declares LOST before the server can expire the session, so a
partitioned leader is told before anybody else can be elected; how long its
``take_leadership`` then takes to return is up to it. Guard external writes
with ``ctx.fencing_token`` (our node's czxid) so storage can refuse a leader
that did not stop in time.

Curator: ``org.apache.curator.framework.recipes.leader.LeaderSelector``
(5.4, whose requeue after interrupts or expiry can stop for good:
CURATOR-518, CURATOR-671; here a failed attempt is retried once connected).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
from collections.abc import Callable

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.kazoo import WatchEvent, WatchEventType
from zk_recipes._client.states import ConnectionState, SerialExecutor, StateChange
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    NoNodeError,
    RecipeUsageError,
    RetriesExhaustedError,
    ZkTimeoutError,
)
from zk_recipes._internals.contenders import Cancellation, ContenderQueue, Entry
from zk_recipes._leader.latch import ErrorPolicy, Participant, read_participants
from zk_recipes._locks.lock import LOCK_TOKEN, Lock

log = logging.getLogger("zk_recipes.leader")

TakeLeadership = Callable[["LeadershipContext"], object]
CancelCallback = Callable[["LeadershipContext"], object]


class LeadershipContext:
    """One term of leadership, handed to ``take_leadership(ctx)``.

    Check ``ctx.cancelled`` (or wait on it) and return soon once it is set;
    ``ctx.reason`` says why ("SUSPENDED", "LOST", "node deleted", "closed").
    """

    __slots__ = ("_reason", "_session", "cancelled", "fencing_token", "node", "selector", "term")

    def __init__(
        self, selector: LeaderSelector, fencing_token: int, node: str, term: int, session: int
    ) -> None:
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
        self._session = session

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
    path: str
    state: str
    leading: bool
    queued: bool
    terms: int
    cancellations: int


class _State(enum.Enum):
    LATENT = "latent"
    STARTED = "started"
    CLOSED = "closed"


class _SelectorLock(Lock):
    """The selector's mutex: Curator's node data (the id) and a wait that close() can end."""

    _kind = "LeaderSelector lock"

    def __init__(self, client: ZkClient, path: str, data: bytes, cancel: Cancellation) -> None:
        super().__init__(client, path)
        self._node_data = data
        self._cancel = cancel

    def _take(self, deadline: float | None) -> Entry | None:
        return self._queue.acquire(
            self._node_data,
            deadline,
            self._rule(),
            head_shortcut=self._head_shortcut,
            cancel=self._cancel,
        )


class LeaderSelector:
    """Run ``take_leadership(ctx)`` while this process leads; return from it to give up.

    ``LeaderSelector(client, path, take_leadership, auto_requeue=True).start()``.
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
        if not isinstance(client, ZkClient):
            raise TypeError(f"LeaderSelector needs a ZkClient, got {client!r}")
        if not callable(take_leadership):
            raise TypeError(f"take_leadership must be callable, got {take_leadership!r}")
        if on_cancel is not None and not callable(on_cancel):
            raise TypeError(f"on_cancel must be callable or None, got {on_cancel!r}")
        if not isinstance(identifier, str):
            raise TypeError(f"identifier must be a str, got {identifier!r}")
        if not isinstance(error_policy, ErrorPolicy):
            raise TypeError(f"error_policy must be an ErrorPolicy, got {error_policy!r}")
        self.client = client
        self.path = _paths.validate_writable_path(path)
        self.identifier = identifier
        self.auto_requeue = bool(auto_requeue)
        self.error_policy = error_policy
        self._take_leadership = take_leadership
        self._on_cancel = on_cancel
        self._stop_waiting = Cancellation()
        self._mutex = _SelectorLock(
            client, self.path, identifier.encode("utf-8"), self._stop_waiting
        )
        self._queue = ContenderQueue(client, self.path, LOCK_TOKEN)
        self._guard = threading.Lock()
        self._changed = threading.Condition(self._guard)
        self._state = _State.LATENT
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
            if self._state is not _State.LATENT:
                raise RecipeUsageError(
                    f"{self!r} was already {self._state.value}: a selector starts once; "
                    "use requeue() to compete again, or create a new LeaderSelector"
                )
            self.client._usable()  # fail fast when the client is closed or forked
            self._state = _State.STARTED
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
            if self._state is not _State.STARTED:
                raise RecipeUsageError(f"requeue() of {self!r}: it is not started")
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
            if self._state is _State.CLOSED:
                return
            self._state = _State.CLOSED
            self._pending = False
            ctx = self._ctx
            self._changed.notify_all()
        self._stop_waiting.set()
        self._connected.set()
        if ctx is not None:
            self._cancel(ctx, "closed")
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
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
        state = self.client.state
        return (
            not self._mutex.lost.is_set()
            and ctx._session == self.client.session_id
            and state is not None
            and state is not ConnectionState.LOST
        )

    def participants(self) -> list[Participant]:
        """Every candidate in line, leader first (ids from node data, as in Curator)."""
        return read_participants(self._queue)

    def leader(self) -> Participant | None:
        participants = self.participants()
        return participants[0] if participants else None

    def statistics(self) -> LeaderSelectorStatistics:
        return LeaderSelectorStatistics(
            path=self.path,
            state=self._state.value,
            leading=self.has_leadership(),
            queued=self._pending or self._acquiring,
            terms=self._terms,
            cancellations=self._cancellations,
        )

    def __repr__(self) -> str:
        if self._state is not _State.STARTED:
            state = self._state.value
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
                while not self._pending and self._state is _State.STARTED:
                    self._changed.wait()
                if self._state is not _State.STARTED:
                    return
                self._pending = False
                self._acquiring = True
            try:
                acquired = self._acquire()
            finally:
                with self._guard:
                    self._acquiring = False
            if not acquired:
                if self._state is not _State.STARTED or not self.client.is_started:
                    return
                continue
            self._lead()
            with self._guard:
                if self.auto_requeue and self._state is _State.STARTED:
                    self._pending = True

    def _acquire(self) -> bool:
        """Take the mutex, retrying across connection trouble; False when closed."""
        while self._state is _State.STARTED and self.client.is_started:
            try:
                if not self._mutex.acquire():
                    return False  # close() ended the wait
            except ClientStateError:
                return False
            except (ConnectionLostError, ZkTimeoutError, RetriesExhaustedError) as exc:
                log.info("selector %s: %r; trying again once connected", self.path, exc)
                self._wait_connected()
                continue
            if not self._running():
                self._release()
                return False
            return True
        return False

    def _running(self) -> bool:
        return self._state is _State.STARTED

    def _wait_connected(self) -> None:
        while self._state is _State.STARTED and self.client.is_started:
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
            ctx = LeadershipContext(
                self, mutex.fencing_token, node, self._terms, self.client.session_id
            )
            self._ctx = ctx
            closed = self._state is not _State.STARTED
        # The context is published before these checks, so a state change from
        # here on reaches it through _on_state.
        if closed:
            self._cancel(ctx, "closed")
        elif mutex.lost.is_set():
            self._cancel(ctx, "LOST")
        elif self.error_policy is ErrorPolicy.STANDARD and not mutex.is_held():
            self._cancel(ctx, "SUSPENDED")
        else:
            self._watch_node(ctx)
        try:
            if not ctx.cancelled.is_set():
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
        """Cancel the term if someone deletes our node (someone else would lead)."""

        def deleted(event: WatchEvent) -> None:
            # Our own release deletes it too, after the term ended: not a cancellation.
            if event.type is WatchEventType.DELETED and self._ctx is ctx:
                self._cancel(ctx, "node deleted")

        try:
            self.client.get_async(ctx.node, watch=deleted).result(
                self.client.settings.connection_timeout
            )
        except NoNodeError:
            self._cancel(ctx, "node deleted")
        except (ConnectionLostError, ZkTimeoutError):
            pass  # the state listener decides

    def _on_state(self, change: StateChange) -> None:
        if change.state.is_connected:
            self._connected.set()
        ctx = self._ctx
        if ctx is None:
            return
        if change.state is ConnectionState.LOST:
            self._cancel(ctx, "LOST")
        elif change.state is ConnectionState.SUSPENDED:
            if self.error_policy is ErrorPolicy.STANDARD:
                self._cancel(ctx, "SUSPENDED")
        elif change.session_id != ctx._session:
            self._cancel(ctx, "LOST")

    def _cancel(self, ctx: LeadershipContext, reason: str) -> None:
        if not ctx._cancel(reason):
            return
        with self._guard:
            self._cancellations += 1
        log.info("selector %s: term %d cancelled (%s)", self.path, ctx.term, reason)
        callback = self._on_cancel
        if callback is not None:
            self._executor.submit(lambda: callback(ctx))
