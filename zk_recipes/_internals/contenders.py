"""The contender queue: sequential-ephemeral nodes, first in line wins.

Shared by every lock-like recipe (Lock, RLock, both halves of ReadWriteLock,
the semaphores' internal mutex and leases) and by leader election. Curator's
LockInternals + StandardLockInternalsDriver, same wire layout, so Java and
Python contenders queue in one directory:

1. **Enter**: a protected EPHEMERAL_SEQUENTIAL node ``<dir>/_c_<uuid>-<token><seq>``
   under CONTAINER parents, *pipelined* with the read of the directory's
   children (one round trip; the list already holds our node). Once our node
   exists, nothing on this path raises without deleting it: a contender of
   our live session left in the queue would block everyone behind it until
   the session ends, since nobody would ever delete it.
2. **Sort** every child by the text after the last occurrence of a queue
   token (the whole name if there is none). Foreign children take part, as
   in Curator (a foreign child that sorts first blocks the queue: CURATOR-43).
3. **Decide** with the recipe's rule: ``rule(sorted_names, our_index)``
   returns None when it is our turn, else the name of the node to wait for
   (a mutex waits for its immediate predecessor: no herd).
4. **Wait** with a getData watch on that node (getData, not exists, so no
   watch is left behind when it is already gone). When it is deleted and it
   was the head of the queue we saw while we were second, it is our turn
   without a re-read: sequence numbers only grow, so nobody can have queued
   ahead of us — provided our node is still ours (its loss epoch, see
   _internals/holding.py). Any other wake-up — another deletion, kazoo's
   NONE event after a disconnect (kazoo drops every watch then), a timeout
   of a request — re-lists and re-decides.
5. **Trust** a node only while its session life lasts (``Entry.epoch`` is the
   client's ``loss_epoch``). If our node is missing from the list, or its
   session was lost, enter again with a new node (Curator does the same).

Faults. A failure to enter (connection lost, session expired, retries
exhausted) is ridden out until the caller's deadline, as Curator's acquire
does, and never escapes ``acquire()``: with no deadline it waits until
connected and tries again. Re-reads ride out disconnects the same way.
SUSPENDED: the wait goes on (requests queue until the connection is back).
LOST: our node is gone; the next re-list (or the epoch) notices and we
re-enter. A wait that times out, is cancelled (``Cancellation``) or fails
deletes its own node (guaranteed delete) so nobody is blocked by it (kazoo
#732).

Sequence wrap (a latent flaw Curator shares): the ``%010d`` suffix comes from the
directory's signed 32-bit child counter, which wraps after about 2**31
creates and deletes in a directory that never empties (a CONTAINER that
empties is reaped and starts again at 0). After the wrap new names sort
*first*, so a newcomer would see itself ahead of the holder. Entering
refuses a negative sequence with SequenceOverflowError (and deletes the
node) and warns loudly from ``NEAR_WRAP`` on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Reply, Steps, run_blocking
from zk_recipes._deadline import expired
from zk_recipes._errors import (
    ClientStateError,
    NoNodeError,
    RetriesExhaustedError,
    SequenceOverflowError,
)
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.patience import Expired, patient_steps
from zk_recipes._internals.waits import WaitDeleted
from zk_recipes._types import CreateMode

log = logging.getLogger("zk_recipes.contenders")

#: ``rule(sorted_names, our_index) -> name to wait for, or None when it is our turn``.
Rule = Callable[[list[str], int], "str | None"]

#: From this sequence number on, entering warns that the directory nears the wrap.
NEAR_WRAP = 2**31 - 2**26  # ~67 million cycles left: days at hundreds of cycles/s


def sort_key(name: str, tokens: Sequence[str]) -> str:
    """Curator's fixForSorting: the text after the last occurrence of a token."""
    for token in tokens:
        index = name.rfind(token)
        if index >= 0:
            return name[index + len(token) :]
    return name


def sequence_of(name: str, tokens: Sequence[str]) -> int | None:
    """The sequence number in a contender's name (None for a name without one)."""
    key = sort_key(name, tokens)
    if key == name:
        return None
    try:
        return int(key)
    except ValueError:
        return None


def first_in_line(max_leases: int = 1) -> Rule:
    """The mutex rule: our turn while fewer than ``max_leases`` are ahead of us."""

    def rule(names: list[str], index: int) -> str | None:
        return None if index < max_leases else names[index - max_leases]

    return rule


@dataclasses.dataclass(frozen=True)
class Entry:
    """Our node in the queue."""

    #: Path of our node, relative to the client's namespace.
    path: str
    name: str
    #: The node's creation zxid: strictly increasing across the ensemble (fencing token).
    czxid: int
    #: The session that owns the node.
    session_id: int
    #: The loss epoch of that session when the node was made (None: already not live).
    epoch: int | None


def is_live(client: ZkClient, entry: Entry) -> bool:
    """Whether ``entry``'s session life lasts (see _internals/holding.py)."""
    return entry.epoch is not None and entry.epoch == client.loss_epoch


class ContenderQueue:
    """Contenders in one directory, ordered by sequence number."""

    def __init__(
        self,
        client: ZkClient,
        path: str,
        token: str,
        *,
        sort_tokens: Sequence[str] | None = None,
    ) -> None:
        self.client = client
        self.path = _paths.validate_writable_path(path)
        self.token = token
        self.sort_tokens = tuple(sort_tokens) if sort_tokens else (token,)
        self._warned_near_wrap = False
        #: True when the newest ``acquire()`` that gave up did so unable to queue
        #: or to read the queue (ZooKeeper unreachable), not behind another contender.
        self.unreached = False

    def sort(self, children: Sequence[str]) -> list[str]:
        return sorted(children, key=lambda name: sort_key(name, self.sort_tokens))

    def node_path(self, name: str) -> str:
        return _paths.join(self.path, name)

    def participants(self) -> list[str]:
        """Names of all children, in queue order."""
        try:
            return self.sort(self.client.get_children(self.path))
        except NoNodeError:
            return []

    def enter(
        self, data: bytes, token: str | None = None, timeout: float | None = None
    ) -> tuple[Entry, list[str] | None]:
        """Create our node and read the queue in one round trip; the queue comes sorted.

        The list is None when it could not be read (our node exists all the
        same: re-read it). Raises SequenceOverflowError, our node deleted,
        when the directory's sequence numbers have wrapped. ``timeout``
        bounds the wait for the create (``ZkClient.create_and_list``).
        """
        return run_blocking(self.enter_steps(data, token, timeout))

    def enter_steps(
        self, data: bytes, token: str | None = None, timeout: float | None = None
    ) -> Steps[tuple[Entry, list[str] | None]]:
        """``enter()`` as steps (_client/steps.py)."""
        created, children = yield from self.client.create_and_list_steps(
            _paths.join(self.path, token or self.token),
            data,
            mode=CreateMode.EPHEMERAL_SEQUENTIAL,
            protected=True,
            parents=True,
            timeout=timeout,
        )
        owner = created.stat.ephemeral_owner
        entry = Entry(
            created.path,
            _paths.name_of(created.path),
            created.stat.czxid,
            owner,
            self.client.session_epoch(owner),
        )
        yield from self._check_sequence_steps(entry)
        return entry, (self.sort(children) if children is not None else None)

    def _check_sequence(self, entry: Entry) -> None:
        """SequenceOverflowError, our node deleted, when the sequence wrapped; warns near it."""
        run_blocking(self._check_sequence_steps(entry))

    def _check_sequence_steps(self, entry: Entry) -> Steps[None]:
        """``_check_sequence`` as steps (_client/steps.py)."""
        wrapped = self._wrapped(entry)
        if wrapped is not None:
            yield from self._forget_steps(entry)
            raise wrapped

    def _wrapped(self, entry: Entry) -> SequenceOverflowError | None:
        """The error to raise (after deleting our node) when the sequence wrapped; warns near it."""
        sequence = sequence_of(entry.name, self.sort_tokens)
        if sequence is None:
            return None
        if sequence < 0:
            full = self.client.namespace + self.path
            message = (
                f"the sequence numbers in {self.path} have wrapped around (our new node is "
                f"{entry.name}): ZooKeeper's 32-bit child counter of this directory overflowed, "
                "so new contenders now sort ahead of older ones and queueing here could give "
                "two holders. Stop every process that uses this path, delete the directory "
                f"(zkCli.sh: deleteall {full}) and start them again: a new directory counts "
                "from 0."
            )
            log.error(message)
            return SequenceOverflowError(message, self.path)
        if sequence >= NEAR_WRAP and not self._warned_near_wrap:
            self._warned_near_wrap = True
            log.warning(
                "the sequence numbers in %s are at %d, near the 32-bit wrap at 2147483647: "
                "before they wrap, stop every process that uses this path and delete the "
                "directory (it starts again at 0); after the wrap it refuses new contenders",
                self.path,
                sequence,
            )
        return None

    def leave(self, entry: Entry) -> None:
        """Delete our node; if the connection fails, keep trying in the background.

        As its holder: on the session that made it only (once that session has
        ended, the node went with it, or goes when the client closes it on the
        server).
        """
        run_blocking(self.leave_steps(entry))

    def leave_steps(self, entry: Entry) -> Steps[None]:
        """``leave()`` as steps (_client/steps.py)."""
        yield from self.client.delete_steps(
            entry.path, guaranteed=True, session=entry.session_id, czxid=entry.czxid
        )

    def acquire(
        self,
        data: bytes,
        deadline: float | None,
        rule: Rule,
        *,
        token: str | None = None,
        head_shortcut: bool = True,
        cancel: Cancellation | None = None,
    ) -> Entry | None:
        """Queue up and wait for our turn; None if ``deadline`` (monotonic) passed first.

        On timeout, cancellation or error our node is deleted. ``head_shortcut``:
        the rule is plain FIFO, so the head's deletion alone makes the second
        in line first (no re-read). ``cancel``: when set, give up as on a timeout.
        """
        return run_blocking(
            self.acquire_steps(
                data, deadline, rule, token=token, head_shortcut=head_shortcut, cancel=cancel
            )
        )

    def acquire_steps(
        self,
        data: bytes,
        deadline: float | None,
        rule: Rule,
        *,
        token: str | None = None,
        head_shortcut: bool = True,
        cancel: Cancellation | None = None,
    ) -> Steps[Entry | None]:
        """``acquire()`` as steps (_client/steps.py), for the blocking and asyncio drivers."""
        entry: Entry | None = None
        self.unreached = False
        try:
            names: list[str] | None = None
            while True:
                if entry is None:
                    entered = yield from self._enter_patiently(data, token, deadline, cancel)
                    if entered is None:
                        self.unreached = True
                        return None
                    (entry, names), entered = entered, None
                if names is None:
                    names = yield from self._relist(deadline, cancel)
                    if names is None:
                        gone, entry = entry, None
                        yield from self._forget_steps(gone)
                        self.unreached = True
                        return None
                if not is_live(self.client, entry) or entry.name not in names:
                    # Our session was lost while we waited: our node is gone (or going).
                    gone, entry, names = entry, None, None
                    yield from self._forget_steps(gone)
                    if _expired(deadline, cancel):
                        self.unreached = True
                        return None
                    log.info("our node in %s was lost with its session; queueing again", self.path)
                    continue
                index = names.index(entry.name)
                waiting_for = rule(names, index)
                if waiting_for is None:
                    return entry
                if _expired(deadline, cancel):
                    gone, entry = entry, None
                    yield from self._forget_steps(gone)
                    return None
                shortcut = head_shortcut and index == 1 and waiting_for == names[0]
                # Not kept while we wait: with N contenders queued at once, N listings
                # of up to N names each would stay alive (O(N^2) memory).
                names = None
                deleted = yield WaitDeleted(
                    self.client, self.node_path(waiting_for), deadline, cancel
                )
                if deleted and shortcut and is_live(self.client, entry):
                    return entry
        except GeneratorExit:
            if entry is not None:  # abandoned by its driver: no more steps can run
                self._forget(entry)
            raise
        except BaseException:
            if entry is not None:
                gone, entry = entry, None
                yield from self._forget_steps(gone)
            raise

    def _enter_patiently(
        self, data: bytes, token: str | None, deadline: float | None, cancel: Cancellation | None
    ) -> Steps[tuple[Entry, list[str] | None] | None]:
        """``enter()``, riding out connection trouble until the deadline (None: gave up)."""
        try:
            return (
                yield from patient_steps(
                    self.client,
                    deadline,
                    lambda limit: self.enter_steps(data, token, limit),
                    cancel=cancel,
                    also=(RetriesExhaustedError,),
                    what=f"queueing in {self.path}",
                )
            )
        except Expired:
            log.info("could not queue in %s before the deadline", self.path)
            return None

    def _relist(
        self, deadline: float | None, cancel: Cancellation | None
    ) -> Steps[list[str] | None]:
        """The queue, read again across disconnects; None once the deadline passed."""
        client = self.client

        def send(limit: float) -> Steps[list[str]]:
            try:
                names: list[str] = yield Reply(client.get_children_async(self.path), limit)
            except NoNodeError:
                return []  # the container went with our node: our session was lost
            return names

        try:
            children = yield from patient_steps(client, deadline, send, cancel=cancel)
        except Expired:
            return None
        return self.sort(children)

    def _forget(self, entry: Entry) -> None:
        run_blocking(self._forget_steps(entry))

    def _forget_steps(self, entry: Entry) -> Steps[None]:
        """Delete our node (``leave``); a failure is logged, never raised."""
        try:
            yield from self.leave_steps(entry)
        except ClientStateError:
            pass  # a closed client: its session, and so our ephemeral node, is gone
        except Exception:
            log.warning("could not delete contender node %s", entry.path, exc_info=True)


def _expired(deadline: float | None, cancel: Cancellation | None = None) -> bool:
    return (cancel is not None and cancel.is_set()) or expired(deadline)
