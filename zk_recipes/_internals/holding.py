"""Holding a node: one validity model for every lock, lease, read/write part and leadership term.

A *hold* is an ephemeral node of ours that stands for something exclusive
(Lock, RLock, a ReadWriteLock half, a Semaphore lease, a LeaderLatch term,
a LeaderSelector's mutex, a Celery singleton run). Every recipe asks the
same three questions about it, and answers them here, the same way:

- **Still ours?** (``is_valid``) — true exactly while the session that owns
  the node is this client's live session: the hold's *loss epoch* (recorded
  when its node was created, from ``client.session_epoch(owner)``) equals
  ``client.loss_epoch``. The tracker moves the epoch under its lock *before*
  any listener hears of a LOST or a close, so the answer is right at once,
  on any thread, with no listener in between. This is what ``check()``, the
  contender queue's head shortcut, a semaphore's all-there test, a
  selector's term and the read/write downgrade ask. Never compare session
  ids for this: ``client.session_id`` still names a lost session until a
  new one connects, which during a partition may be never.
- **Held for sure?** (``is_sure``) — still ours, and not *in doubt*: the
  connection is up and no SUSPENDED since the hold was taken has been
  cleared yet. ``is_held()`` and STANDARD-policy leadership ask this.
- **What did this state change do to it?** (``apply_change``) — SUSPENDED
  puts it in doubt; LOST or CLOSED loses it; reconnecting on the same
  session clears the doubt once our node is seen still there (someone may
  have deleted it meanwhile). A change older than the hold (``seq`` at or
  below the hold's) is ignored: it was decided before the hold was taken
  (it was queued for an earlier registration of the same listener, and
  applying it would mark a fresh hold lost or in doubt for a past event),
  and the hold's initial state already reflects it.

``HeldNodes`` keeps one recipe object's holds and the one state listener
that follows them, registered while the object holds anything. It registers
the listener under the recipe's own guard and checks the hold again right
after (a LOST published between taking the node and registering the
listener reached nobody: the epoch tells), so no loss is ever missed, even
when a release racing an acquire unregisters the listener while another hold
of the same object is still held. A lost hold's owner is told through
``LossSignal``: its ``lost`` event is set at once, its ``on_lost`` callbacks
run in order on a thread of the signal's own, never on the caller's or kazoo's.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, TypeVar

from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import ConnectionState, StateChange
from zk_recipes._errors import (
    ConnectionLostError,
    NoNodeError,
    SessionLost,
    WrongTypeError,
    ZkTimeoutError,
)
from zk_recipes._internals.contenders import Entry
from zk_recipes._logfields import fields
from zk_recipes._threads import SerialExecutor
from zk_recipes._types import ZnodeStat

log = logging.getLogger("zk_recipes.holding")

R = TypeVar("R")


@dataclasses.dataclass(eq=False)
class Hold:
    """One node this process holds. Recipes subclass it to add their own bookkeeping."""

    entry: Entry
    #: ``client.state_seq`` when the hold was taken: changes up to it are not news.
    seq: int
    in_doubt: bool = False
    lost: bool = False
    #: ``time.monotonic()`` when taken, while metrics are on (0.0: not timed).
    since: float = 0.0


def hold_fields(
    event: str, recipe: str, path: str, entry: Entry | None = None
) -> dict[str, object]:
    """Log fields of an event about a hold on ``path`` (its node, session and token if known)."""
    if entry is None:
        return fields(event, recipe=recipe, path=path)
    return fields(
        event,
        recipe=recipe,
        path=path,
        node=entry.path,
        session_id=entry.session_id,
        token=entry.czxid,
    )


def taken_now(client: ZkClient) -> tuple[int, bool]:
    """``(seq, in_doubt)`` for a hold taken now (one taken while SUSPENDED is in doubt).

    One snapshot: a SUSPENDED published between reading the state and reading
    the seq would give a hold that is not in doubt with that SUSPENDED's seq,
    which ``apply_change`` then skips as older than the hold; the doubt would
    never be recorded, nor verified on RECONNECTED.
    """
    seq, state = client.state_snapshot()
    return seq, state is None or not state.is_connected


def is_valid(client: ZkClient, hold: Hold) -> bool:
    """Still ours: not marked lost, and its session life has not ended."""
    epoch = hold.entry.epoch
    return not hold.lost and epoch is not None and epoch == client.loss_epoch


def is_sure(client: ZkClient, hold: Hold) -> bool:
    """Held for sure: still ours, connected to a read-write server, not in doubt."""
    if hold.in_doubt or not is_valid(client, hold):
        return False
    state = client.state
    return state is not None and state.is_connected and state is not ConnectionState.READ_ONLY


def is_in_doubt(client: ZkClient, hold: Hold) -> bool:
    """Still ours, but not for sure (SUSPENDED, or reconnected and not verified yet)."""
    return is_valid(client, hold) and not is_sure(client, hold)


def apply_change(client: ZkClient, hold: Hold, change: StateChange) -> bool:
    """Apply ``change`` to ``hold``; True when the hold is now lost (the caller reports it)."""
    if hold.lost:
        return False
    if change.seq and change.seq <= hold.seq:
        return False  # decided before the hold was taken
    if change.state.ends_session or not is_valid(client, hold):
        return True
    if change.state in (ConnectionState.SUSPENDED, ConnectionState.READ_ONLY):
        # A read-only server's tree is frozen while the quorum may expire our session:
        # what it says of our node proves nothing, so a hold stays in doubt there.
        hold.in_doubt = True
        return False
    if change.state.is_connected:
        if change.session_id != hold.entry.session_id:
            return True
        if hold.in_doubt:
            try:
                stat = client.exists(hold.entry.path)
            except (ConnectionLostError, ZkTimeoutError, SessionLost):
                return False  # still in doubt; the next state change decides
            if _still_ours(client, hold, stat):
                hold.in_doubt = False
                return False
            return True
    return False


def _still_ours(client: ZkClient, hold: Hold, stat: ZnodeStat | None) -> bool:
    return (
        stat is not None
        and stat.ephemeral_owner == hold.entry.session_id
        and is_valid(client, hold)
    )


class LossSignal(Generic[R]):
    """A recipe object's ``lost`` event and ``on_lost`` callbacks, written once.

    ``fire()`` sets the event at once and runs the callbacks, in order, on a
    thread of the signal's own: never on the thread that noticed the loss
    (it may be the acquiring thread, or a listener thread of the client).
    """

    def __init__(self, owner: R, what: str) -> None:
        self._owner = owner
        self._what = what
        self.event = threading.Event()
        self._callbacks: list[Callable[[R], object]] = []
        self._executor: SerialExecutor | None = None
        self._guard = threading.Lock()
        #: Losses reported so far (for statistics).
        self.count = 0

    def add(self, callback: Callable[[R], object]) -> None:
        if not callable(callback):
            raise WrongTypeError(f"an on_lost callback must be callable, got {callback!r}")
        with self._guard:
            self._callbacks.append(callback)

    def fire(self, losses: int = 1) -> None:
        with self._guard:
            self.count += losses
            callbacks = list(self._callbacks)
            if callbacks and self._executor is None:
                self._executor = SerialExecutor(f"zk-recipes on_lost {self._what}")
            executor = self._executor
        self.event.set()
        if executor is not None and callbacks:
            executor.submit(lambda: self._run(callbacks))

    def _run(self, callbacks: Sequence[Callable[[R], object]]) -> None:
        for callback in callbacks:
            try:
                callback(self._owner)
            except Exception:
                log.exception("error in an on_lost callback of %s", self._what)


H = TypeVar("H", bound=Hold)


class HeldNodes(Generic[H]):
    """The holds of one recipe object, and the one state listener that follows them.

    ``guard`` is the recipe's own lock: holds are added and removed, and the
    listener registered and unregistered, under it (else a release racing an
    acquire could unregister the listener while a hold remains); the list of holds is
    the recipe's one record of what it holds (``held``). ``on_lost(holds)`` is
    called (without the guard) with the holds just found lost, each once;
    they are already marked ``lost`` then.
    """

    def __init__(
        self,
        client: ZkClient,
        guard: threading.Lock,
        on_lost: Callable[[list[H]], None],
    ) -> None:
        self._client = client
        self._guard = guard
        self._on_lost = on_lost
        self._holds: list[H] = []
        self._listening = False

    @property
    def held(self) -> list[H]:
        """The holds followed now, oldest first (read it with the guard held)."""
        return self._holds

    def snapshot(self) -> list[H]:
        with self._guard:
            return list(self._holds)

    def add(self, hold: H) -> None:
        """Follow ``hold`` from now on; it may turn out lost at once (then ``on_lost`` runs)."""
        with self._guard:
            self._holds.append(hold)
            if not self._listening:
                self._listening = True
                self._client.add_listener(self._on_state)
        self.recheck([hold])

    def remove(self, hold: H) -> None:
        """Stop following ``hold`` (call with the guard held, as the recipe forgets it)."""
        self._holds.remove(hold)
        if not self._holds and self._listening:
            self._listening = False
            self._client.remove_listener(self._on_state)

    def recheck(self, holds: Iterable[H]) -> None:
        """Catch what no listener told: a lost session life, or a connection down now."""
        client = self._client
        lost: list[H] = []
        state = client.state
        for hold in holds:
            if hold.lost:
                continue
            if not is_valid(client, hold):
                lost.append(hold)
            elif state is None or not state.is_connected:
                hold.in_doubt = True
        self.mark_lost(lost)

    def mark_lost(self, holds: Iterable[H]) -> None:
        """Mark ``holds`` lost (each once) and report the newly lost ones."""
        with self._guard:
            newly = [h for h in holds if not h.lost]
            for hold in newly:
                hold.lost = True
                hold.in_doubt = False
        if newly:
            self._on_lost(newly)

    def _on_state(self, change: StateChange) -> None:
        client = self._client
        self.mark_lost([h for h in self.snapshot() if apply_change(client, h, change)])


def read_nodes(client: ZkClient, paths: Sequence[str]) -> list[tuple[str, bytes]]:
    """Data of each node in ``paths``, reads pipelined; nodes gone meanwhile are left out."""
    pending = [(path, client.get_async(path)) for path in paths]
    timeout = client.settings.connection_timeout
    found: list[tuple[str, bytes]] = []
    for path, request in pending:
        try:
            data, _ = request.result(timeout)
        except NoNodeError:
            continue
        found.append((path, data))
    return found
