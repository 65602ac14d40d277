"""DoubleBarrier: Curator's DistributedDoubleBarrier.

 ``member_qty`` processes enter together and leave together.
Znodes (Curator's layout, so Java members share the barrier)::

    <path>/<uuid>   EPHEMERAL, one per member, the name fixed per instance
    <path>/ready    PERSISTENT, created when enough members are there

- *enter*: create our member node, then loop { ``exists(ready, watch)``; a
  ``ready`` created after our node → we are in; else list the children (with
  a watch) and count the members of the coming round; enough → create
  ``ready``; else wait for any event }. Every wake-up re-checks that
  ``ready`` exists: a spurious one (kazoo's NONE on disconnect, another
  child coming or going) never lets us in early (Curator 5.4 does: GH-1290).
- *rounds*: a round is the members whose nodes existed when its ``ready``
  was created. A ``ready`` older than our node belongs to an earlier round
  (one still running, or one whose members crashed before deleting it): it
  does not let us in, and the members that came after it count; once there
  are enough, the old ``ready`` is replaced by a new one. The members of the
  round (node name and czxid) are recorded when we get in, so a later
  round's nodes — even one reusing a name — never hold up our ``leave``.
- *leave*: the ZooKeeper recipe over the recorded round. The lowest name
  waits for the highest to go; every other member deletes its node and waits
  for the lowest; the lowest deletes its node only when it is the last.
  Done once none of the round's nodes is left; then the round's ``ready`` is
  deleted — only if it is still the round's own (by czxid) and no member
  node older than it is left (see below).
- *timeouts*: a timed-out ``enter`` deletes our member node (Curator 5.4
  leaves it, and it counts for everybody else: CURATOR-80) and returns
  False; a timed-out ``leave`` deletes it too (we did call leave, so the
  others' guarantee holds) and returns False.
- *stale members*: member nodes are ephemeral, so a crashed member's node
  goes when the server expires its session. Until then a crashed *waiting*
  member still counts (nothing tells it from a slow live one), and the
  ``leave`` of the round it completed waits for its expiry. A crashed member
  of a round (its node older than that round's ``ready``) never counts for a
  later round: that ``ready`` stays while such nodes linger, so the next
  arrivals see a ``ready`` older than themselves and count only the members
  that came after it.
  Foreign children count as members, as in Curator (CURATOR-318).

SUSPENDED: waits go on; kazoo drops every watch on a disconnect and fires
NONE, which is a re-check like any other wake-up; requests that fail while
disconnected are retried until the deadline. LOST: our member node is gone
with the session. In ``enter`` it is created again (the round we waited for
keeps us); in ``leave`` it counts as left. ``close()`` of the client wakes a
waiter, which then raises ClientStateError.

Size: over the house limit (tests/test_module_sizes.py): one recipe, whose enter
and leave are steps (the asyncio form awaits them) over one record of the round;
Curator's DistributedDoubleBarrier.java is of the same size.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import final

from zk_recipes import _paths
from zk_recipes._barriers._common import check_data, exists_steps, waker
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Call, Reply, Steps, run_blocking
from zk_recipes._deadline import expired, remaining, wait_deadline
from zk_recipes._errors import (
    BadVersionError,
    ClientStateError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    RecipeUsageError,
    RetriesExhaustedError,
    SessionLost,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client, require_int
from zk_recipes._internals.patience import Expired, patient, patient_steps
from zk_recipes._internals.waits import NewWake, Sleep
from zk_recipes._types import CreateMode, WatchEvent, ZnodeStat

log = logging.getLogger("zk_recipes.barrier")

READY_NODE = "ready"


_IDLE, _ENTERING, _INSIDE, _LEAVING = "idle", "entering", "inside", "leaving"


@final
class DoubleBarrier:
    """``member_qty`` members enter together and leave together (Curator's double barrier).

    ``DoubleBarrier(client, "/barriers/job", member_qty=3, data=b"")``: one
    instance is one member; ``enter(timeout)`` waits until ``member_qty``
    members are there, ``leave(timeout)`` until all of its round have left
    (``with barrier:`` does both; ``entered(timeout)`` raises on a timeout).
    Rounds alternate with the same member node name; Curator members on the
    same path take part. See docs/recipes/barrier.md.
    """

    def __init__(self, client: ZkClient, path: str, member_qty: int, *, data: bytes = b"") -> None:
        self.client = require_client(client, "DoubleBarrier")
        self.path = _paths.validate_writable_path(path)
        self.member_qty = require_int(member_qty, "member_qty", minimum=1)
        self.data = check_data(data)
        #: Our member node's name: a random UUID, as Curator's.
        self.member_id = str(uuid.uuid4())
        self.member_path = _paths.join(self.path, self.member_id)
        self.ready_path = _paths.join(self.path, READY_NODE)
        self._guard = threading.Lock()
        self._state = _IDLE
        #: The round we are in: member name -> czxid of its node.
        self._round: dict[str, int] = {}
        self._ready_czxid = 0
        #: Loss epoch of the session that owns our member node (None: not live).
        self._own_epoch: int | None = None
        #: Our member node's session and czxid (0, 0 before the first): whose node to delete.
        self._own: tuple[int, int] = (0, 0)

    # -- public API ------------------------------------------------------
    def enter(self, timeout: float | None = None) -> bool:
        """Wait until ``member_qty`` members are there; False (and our node gone) on timeout."""
        return run_blocking(self.enter_steps(timeout))

    def enter_steps(self, timeout: float | None = None) -> Steps[bool]:
        """``enter()`` as steps (_client/steps.py): what the asyncio form awaits."""
        deadline = wait_deadline(timeout)
        self._begin(_IDLE, _ENTERING, "enter() while already entered; call leave() first")
        try:
            entered = yield from self._enter_steps(deadline)
        except GeneratorExit:
            raise
        except BaseException:
            yield Call(self._delete_own)
            self._state = _IDLE
            raise
        if not entered:
            log.info(
                "enter of double barrier %s timed out; member node %s removed",
                self.path,
                self.member_id,
            )
            yield Call(self._delete_own)
            self._state = _IDLE
            return False
        self._state = _INSIDE
        return True

    def leave(self, timeout: float | None = None) -> bool:
        """Wait until every member of our round has left; False on timeout.

        Either way our member node is gone afterwards and the instance can
        ``enter`` again.
        """
        return run_blocking(self.leave_steps(timeout))

    def leave_steps(self, timeout: float | None = None) -> Steps[bool]:
        """``leave()`` as steps (_client/steps.py): what the asyncio form awaits."""
        deadline = wait_deadline(timeout)
        self._begin(_INSIDE, _LEAVING, "leave() without a successful enter()")
        try:
            done = yield from self._leave_steps(deadline)
            if done:
                yield Call(self._delete_ready)
            else:
                log.info("leave of double barrier %s timed out", self.path)
                yield Call(self._delete_own)
        except GeneratorExit:
            raise
        except BaseException:
            yield Call(self._delete_own)
            raise
        finally:
            self._state = _IDLE
            self._round = {}
        return done

    def is_entered(self) -> bool:
        """True between a successful ``enter()`` and the next ``leave()``."""
        return self._state in (_INSIDE, _LEAVING)

    def __enter__(self) -> DoubleBarrier:
        self.enter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.leave()

    @contextlib.contextmanager
    def entered(self, timeout: float) -> Iterator[DoubleBarrier]:
        """``with barrier.entered(timeout=30):`` — enter and leave, each within ``timeout``.

        Raises ZkTimeoutError when either does not complete in time.
        """
        if not self.enter(timeout):
            raise ZkTimeoutError(
                f"double barrier {self.path}: {self.member_qty} members did not arrive "
                f"within {timeout:g} s"
            )
        try:
            yield self
        finally:
            if not self.leave(timeout):
                raise ZkTimeoutError(
                    f"double barrier {self.path}: the other members did not leave "
                    f"within {timeout:g} s"
                )

    def members(self) -> list[str]:
        """Names of the member nodes there now (every child but ``ready``), sorted."""
        try:
            children = self.client.retry(lambda: self.client.get_children(self.path))
        except NoNodeError:
            return []
        return sorted(c for c in children if c != READY_NODE)

    def __repr__(self) -> str:
        state = self._state
        if self._round:
            state += f" round={len(self._round)}"
        return f"<DoubleBarrier {self.path} member={self.member_id} qty={self.member_qty} {state}>"

    # -- entering --------------------------------------------------------
    def _begin(self, expected: str, new: str, message: str) -> None:
        with self._guard:
            if self._state != expected:
                if self._state in (_ENTERING, _LEAVING):
                    message = f"another thread is in {self._state[:-3]}() on {self!r}"
                raise RecipeUsageError(f"{message} ({self!r})")
            self._state = new

    def _create_own(self) -> int:
        """Create our member node, or take ours back; its czxid.

        The delete of an earlier round's node, still pending while the
        connection was down, must not take it now that this round counts on
        it (review 3, D1's shape): it is cancelled first (an attempt under way
        is waited for).
        """
        self.client.cancel_pending_delete(self.member_path)
        try:
            created = self.client.create(
                self.member_path,
                self.data,
                mode=CreateMode.EPHEMERAL,
                parents=True,
                replace_stale=True,
            )
            stat = created.stat
        except NodeExistsError:
            found = self.client.exists(self.member_path)
            if found is None or self.client.session_epoch(found.ephemeral_owner) is None:
                raise
            stat = found  # ours already (a reply lost, or an earlier round's node)
        self._own_epoch = self.client.session_epoch(stat.ephemeral_owner)
        self._own = (stat.ephemeral_owner, stat.czxid)
        return stat.czxid

    def _enter_steps(self, deadline: float | None) -> Steps[bool]:
        client = self.client
        own: int = yield Call(self._create_own)
        joined = own  # kept when the node is made again after a session loss
        older = 0  # czxid of the newest 'ready' of an earlier round seen
        while True:
            wake = yield NewWake()
            watch = waker(wake)
            try:
                ready = yield from patient_steps(
                    client, deadline, exists_steps(client, self.ready_path, watch)
                )
                if ready is not None and ready.czxid > joined:
                    self._round = yield Call(
                        functools.partial(self._round_members, deadline, older, ready.czxid, own)
                    )
                    self._ready_czxid = ready.czxid
                    return True
                children = yield from patient_steps(
                    client, deadline, functools.partial(self._list_steps, watch=watch)
                )
                if self.member_id not in children or self._own_epoch != client.loss_epoch:
                    log.info("member node %s was lost with its session; creating it again", own)
                    own = yield Call(self._create_own)
                    continue
                members = [c for c in children if c != READY_NODE]
                if ready is None:
                    count = len(members)
                else:
                    older = max(older, ready.czxid)
                    stats = yield from self._stats_steps(deadline, members)
                    count = sum(1 for st in stats.values() if st.czxid > ready.czxid)
            except Expired:
                return False
            if count >= self.member_qty:
                yield Call(functools.partial(self._raise_ready, ready))
                continue  # the next look sees the new 'ready'
            if expired(deadline):
                return False
            with client.wake_on_close(wake):
                yield Sleep(wake, remaining(deadline))

    def _list(self, limit: float, watch: Callable[[WatchEvent], None] | None = None) -> list[str]:
        return run_blocking(self._list_steps(limit, watch))

    def _list_steps(
        self, limit: float, watch: Callable[[WatchEvent], None] | None = None
    ) -> Steps[list[str]]:
        try:
            children: list[str] = yield Reply(
                self.client.get_children_async(self.path, watch=watch), limit
            )
        except NoNodeError:
            return []  # the container went with the last member node
        return children

    def _stats(self, deadline: float | None, names: list[str]) -> dict[str, ZnodeStat]:
        return run_blocking(self._stats_steps(deadline, names))

    def _stats_steps(self, deadline: float | None, names: list[str]) -> Steps[dict[str, ZnodeStat]]:
        """Stats of the member nodes ``names`` that still exist, requests pipelined."""

        def send(limit: float) -> Steps[dict[str, ZnodeStat]]:
            pending = [(n, self.client.exists_async(_paths.join(self.path, n))) for n in names]
            found: dict[str, ZnodeStat] = {}
            for name, request in pending:
                stat = yield Reply(request, limit)
                if stat is not None:
                    found[name] = stat
            return found

        return (yield from patient_steps(self.client, deadline, send))

    def _round_members(
        self, deadline: float | None, after: int, ready_czxid: int, own: int
    ) -> dict[str, int]:
        """The members of the round that ``ready`` started: nodes between the two readies."""
        try:
            children = patient(self.client, deadline, self._list)
            stats = self._stats(deadline, [c for c in children if c != READY_NODE])
        except Expired:
            stats = {}  # in anyway; leave then waits for ourselves only
        members = {
            name: st.czxid
            for name, st in stats.items()
            if after < st.czxid < ready_czxid and st.ephemeral_owner != 0
        }
        members[self.member_id] = own
        return members

    def _raise_ready(self, old: ZnodeStat | None) -> None:
        if old is not None:
            # The old round's 'ready' (version-checked; its data never changes, so a
            # replacement racing us may go too: the waiters then count again).
            with contextlib.suppress(BadVersionError):
                self.client.retry(lambda: self.client.delete(self.ready_path, old.version))
        with contextlib.suppress(NodeExistsError):
            self.client.create(self.ready_path, self.data, parents=True)

    # -- leaving ---------------------------------------------------------
    def _leave_steps(self, deadline: float | None) -> Steps[bool]:
        client = self.client
        own = self.member_id
        own_gone = False
        while True:
            try:
                stats = yield from self._stats_steps(deadline, list(self._round))
            except Expired:
                return False
            present = sorted(n for n, st in stats.items() if st.czxid == self._round[n])
            if own not in present:
                own_gone = True  # lost with the session (or already deleted)
            if not present:
                return True
            if present == [own]:
                yield Call(self._delete_own)
                continue
            lowest = not own_gone and present[0] == own
            target = present[-1] if lowest else present[0]
            wake = yield NewWake()
            target_path = _paths.join(self.path, target)
            try:
                stat = yield from patient_steps(
                    client, deadline, exists_steps(client, target_path, waker(wake))
                )
            except Expired:
                return False
            if not own_gone and not lowest:
                yield Call(self._delete_own)
                own_gone = True
            if stat is None or stat.czxid != self._round[target]:
                continue
            if expired(deadline):
                return False
            with client.wake_on_close(wake):
                yield Sleep(wake, remaining(deadline))

    def _delete_own(self) -> None:
        session, czxid = self._own
        try:
            # As the holder of our node only: after its session, the path may be another's.
            self.client.delete(self.member_path, guaranteed=True, session=session, czxid=czxid)
        except ClientStateError:
            pass  # closed client: its session, and so our ephemeral node, is gone
        except Exception:
            log.warning("could not delete member node %s", self.member_path, exc_info=True)

    def _delete_ready(self) -> None:
        """Delete the round's ``ready`` once no member node older than it is left.

        Not a later round's ``ready`` that replaced it. And while nodes of
        crashed members older than it linger (until their sessions expire),
        it stays: later arrivals then see a ``ready`` older than themselves
        and count only the members that came after it, never the crashed ones.
        """
        try:
            stat = self.client.retry(lambda: self.client.exists(self.ready_path))
            if stat is None or stat.czxid != self._ready_czxid:
                return
            deadline = time.monotonic() + self.client.settings.connection_timeout
            children = patient(self.client, deadline, self._list)
            stats = self._stats(deadline, [c for c in children if c != READY_NODE])
            if any(st.czxid < stat.czxid for st in stats.values()):
                log.info("keeping %s: nodes of members of earlier rounds remain", self.ready_path)
                return
            self.client.retry(lambda: self.client.delete(self.ready_path, stat.version))
        except (NoNodeError, BadVersionError, ClientStateError):
            pass
        except (Expired, ConnectionLostError, ZkTimeoutError, SessionLost, RetriesExhaustedError):
            log.warning("could not delete %s after the round", self.ready_path, exc_info=True)
