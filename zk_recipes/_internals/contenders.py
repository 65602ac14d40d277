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

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._deadline import expired, remaining, request_timeout
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    NoNodeError,
    RetriesExhaustedError,
    SequenceOverflowError,
    SessionLost,
    ZkTimeoutError,
)
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._internals.patience import Expired, patient
from zk_recipes._types import CreateMode, WatchEvent, WatchEventType, mark_inline

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


@dataclasses.dataclass
class _Wake:
    event: threading.Event = dataclasses.field(default_factory=threading.Event)
    deleted: bool = False
    #: The watch itself fired (not a close or a cancel setting the event).
    fired: bool = False

    def __call__(self, watch_event: WatchEvent) -> None:
        self.deleted = watch_event.type is WatchEventType.DELETED
        self.fired = True
        self.event.set()


# It only records and sets an event: run it on the connection thread, one hop sooner.
mark_inline(_Wake)


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
        created, children = self.client.create_and_list(
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
        self._check_sequence(entry)
        return entry, (self.sort(children) if children is not None else None)

    def _check_sequence(self, entry: Entry) -> None:
        sequence = sequence_of(entry.name, self.sort_tokens)
        if sequence is None:
            return
        if sequence < 0:
            self._forget(entry)
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
            raise SequenceOverflowError(message, self.path)
        if sequence >= NEAR_WRAP and not self._warned_near_wrap:
            self._warned_near_wrap = True
            log.warning(
                "the sequence numbers in %s are at %d, near the 32-bit wrap at 2147483647: "
                "before they wrap, stop every process that uses this path and delete the "
                "directory (it starts again at 0); after the wrap it refuses new contenders",
                self.path,
                sequence,
            )

    def leave(self, entry: Entry) -> None:
        """Delete our node; if the connection fails, keep trying in the background.

        As its holder: on the session that made it only (once that session has
        ended, the node went with it, or goes when the client closes it on the
        server).
        """
        self.client.delete(entry.path, guaranteed=True, session=entry.session_id, czxid=entry.czxid)

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
        entry: Entry | None = None
        self.unreached = False
        try:
            names: list[str] | None = None
            while True:
                if entry is None:
                    entered = self._enter_patiently(data, token, deadline, cancel)
                    if entered is None:
                        self.unreached = True
                        return None
                    entry, names = entered
                if names is None:
                    names = self._relist(deadline, cancel)
                    if names is None:
                        self._forget(entry)
                        self.unreached = True
                        return None
                if not is_live(self.client, entry) or entry.name not in names:
                    # Our session was lost while we waited: our node is gone (or going).
                    self._forget(entry)
                    entry, names = None, None
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
                    self._forget(entry)
                    return None
                shortcut = head_shortcut and index == 1 and waiting_for == names[0]
                deleted = self._wait_for_delete(self.node_path(waiting_for), deadline, cancel)
                if deleted and shortcut and is_live(self.client, entry):
                    return entry
                names = None
        except BaseException:
            if entry is not None:
                self._forget(entry)
            raise

    def _enter_patiently(
        self, data: bytes, token: str | None, deadline: float | None, cancel: Cancellation | None
    ) -> tuple[Entry, list[str] | None] | None:
        """``enter()``, riding out connection trouble until the deadline (None: gave up)."""
        try:
            return patient(
                self.client,
                deadline,
                lambda limit: self.enter(data, token, limit),
                cancel=cancel,
                also=(RetriesExhaustedError,),
                what=f"queueing in {self.path}",
            )
        except Expired:
            log.info("could not queue in %s before the deadline", self.path)
            return None

    def _wait_for_delete(
        self, path: str, deadline: float | None, cancel: Cancellation | None = None
    ) -> bool:
        """Wait until ``path`` is deleted (True) or something else happens (False)."""
        wake = _Wake()
        try:
            self.client.get_async(path, watch=wake).result(
                request_timeout(self.client.settings.connection_timeout, deadline)
            )
        except NoNodeError:
            return True
        except (ConnectionLostError, ZkTimeoutError, SessionLost):
            return False
        with (
            self.client.wake_on_close(wake.event),
            cancel.wakes(wake.event) if cancel is not None else contextlib.nullcontext(),
        ):
            wake.event.wait(remaining(deadline))
        if not wake.fired:
            # Timed out, cancelled or closed: the watch would stay on the server until
            # the predecessor changes. (A close drops it with the connection anyway.)
            self.client.remove_data_watch(path, wake)
        return wake.deleted

    def _relist(self, deadline: float | None, cancel: Cancellation | None) -> list[str] | None:
        """The queue, read again across disconnects; None once the deadline passed."""
        client = self.client

        def send(limit: float) -> list[str]:
            try:
                return client.get_children_async(self.path).result(limit)
            except NoNodeError:
                return []  # the container went with our node: our session was lost

        try:
            children = patient(client, deadline, send, cancel=cancel)
        except Expired:
            return None
        return self.sort(children)

    def _forget(self, entry: Entry) -> None:
        try:
            self.leave(entry)
        except ClientStateError:
            pass  # a closed client: its session, and so our ephemeral node, is gone
        except Exception:
            log.warning("could not delete contender node %s", entry.path, exc_info=True)


def _expired(deadline: float | None, cancel: Cancellation | None = None) -> bool:
    return (cancel is not None and cancel.is_set()) or expired(deadline)
