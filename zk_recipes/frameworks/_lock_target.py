"""Taking the lock of one call: on the calling thread, or on a thread of its own for async code.

The frameworks' lock decorators and blocks (Django's ``@zk_lock`` and
``locked()``, Flask's ``@zk.locked`` and ``zk.lock()``) describe each call's
lock as a ``LockTarget``: its name, its node directory, whom the node names,
how long to wait, and where the client comes from. The client is asked for
only when the lock is made, on the thread that waits, so async code does not
block its loop while the client connects either. A new ``Lock`` per call: a
Lock is one contender per process and is not re-entrant per thread.

An outage is not "busy". Given the process's ``ProcessClient``, the target
takes the lock only with a connected client (``ProcessClient.available()``:
a process's first call waits up to a second for the first connection; a
SUSPENDED, LOST or never-reached ensemble raises ``UnavailableError`` at
once), and an acquire that gave up unable to reach ZooKeeper
(``LockStatistics.refusal == "unreachable"``: a paused server, a connection
that broke during the attempt) raises ``UnavailableError`` too, so a face
answers "busy" only when it saw another contender ahead of it. The wait is
the lock's own ``timeout``; a request that goes unanswered gets at least a
second before it counts as unreachable (``patient``'s first try), so a
non-blocking call waits about that long for a server that stopped answering
while the connection still looked fine.

Async code waits on a daemon thread of its own, one per waiting call, not on
the loop's default executor. A long wait must not take a slot that
``sync_to_async``/``run_in_executor`` and the releases need (waiters filling
the executor would keep the holder from releasing), nor hold up interpreter
exit.

Cancellation: when the awaiting task is cancelled, the acquire is called off
(``Lock.cancel()``) and the task waits for the thread to end, then releases
what the thread got, so no node outlives the cancellation. ``Lock.cancel()``
ends only acquires already waiting, and the thread may be a few steps short
of its acquire when it comes, so the call-off is repeated until the thread
ends. A release is waited for the same way: a cancellation never cuts it short.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from zk_recipes import (
    DEFAULT_PREFIX,
    ConfigurationError,
    Lock,
    ProcessClient,
    UnavailableError,
    WrongTypeError,
    ZkClient,
)
from zk_recipes.frameworks._lock_paths import lock_path

T = TypeVar("T")

#: Seconds between repeated ``Lock.cancel()`` calls for a cancelled async waiter
#: whose thread had not reached its acquire when the first one came.
RECALL = 0.05
#: Seconds a write may go unanswered before a target with a short wait (or none)
#: takes the server for silent: as long as a first request is given at the least.
UNANSWERED = 1.0


class LockTarget:
    """The lock of one call: ``LockTarget("invoice-7", process_client, prefix="/shop")``.

    ``client`` is the process's ``ProcessClient`` (its connected client now,
    or ``UnavailableError`` at once), or a callable called on the waiting
    thread for a connected client; the lock is ``lock_path(name, prefix)``;
    ``identifier`` goes into the node's owner data; ``timeout``: seconds to
    wait, 0 not to wait, None without limit. ``acquire()`` / ``await
    acquire_async()`` give the held ``Lock``, None when another contender
    kept it from us until the timeout, and raise ``UnavailableError`` when
    ZooKeeper could not be reached; ``refusal()`` says "not acquired" in
    words, for a ``LockTimeout``. ``release_lock_async(lock)`` releases from
    async code.
    """

    def __init__(
        self,
        name: str,
        client: ProcessClient | Callable[[], ZkClient],
        *,
        prefix: str = DEFAULT_PREFIX,
        identifier: str | None = None,
        timeout: float | None = None,
    ) -> None:
        if not (isinstance(client, ProcessClient) or callable(client)):
            raise WrongTypeError(
                "client must be a ProcessClient, or a callable that returns a connected "
                f"ZkClient, got {client!r}"
            )
        self.name = name
        self.path = lock_path(name, prefix)
        self.identifier = identifier
        self.timeout = self.check_timeout(timeout)
        self._client = client

    @staticmethod
    def check_timeout(timeout: object) -> float | None:
        """A lock wait checked: seconds >= 0 as a float, or None (no limit); fix-it errors."""
        if timeout is None:
            return None
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise WrongTypeError(
                f"timeout must be seconds (a number >= 0), or None to wait without limit; "
                f"got {timeout!r}"
            )
        if math.isnan(timeout) or timeout < 0:
            raise ConfigurationError(
                f"timeout must be >= 0 seconds (0: do not wait), or None; got {timeout!r}"
            )
        return float(timeout)

    def __repr__(self) -> str:
        return f"<LockTarget {self.path} timeout={self.timeout!r}>"

    def connected_client(self) -> ZkClient:
        """The client, connected now; UnavailableError (at once) when it is not.

        Nor when a write has gone unanswered for longer than the target would
        wait (``UNANSWERED`` seconds at the least; the connection timeout for a
        wait without limit): a paused server keeps the connection open and
        answers nothing, and the client says SUSPENDED only at its next missed
        ping (two thirds of the session timeout); each request in between would
        wait for a reply that is not coming.
        """
        source = self._client
        if isinstance(source, ProcessClient):
            client = source.available()
        else:
            client = source()
            state = client.state
            if state is None or not state.is_connected:
                problem = client.connection_problem
                raise UnavailableError(
                    f"the connection to ZooKeeper at {client.connect_string} is "
                    f"{state.name if state is not None else 'not made yet'}"
                    f"{f' ({problem})' if problem else ''}",
                    problem,
                )
        silent = client.unanswered_for
        if self.timeout is None:
            patience = client.settings.connection_timeout
        else:
            patience = max(UNANSWERED, self.timeout)
        if silent > patience:
            problem = f"no reply to a request sent {silent:.1f} s ago"
            raise UnavailableError(
                f"ZooKeeper at {client.connect_string} is not answering ({problem})", problem
            )
        return client

    def new_lock(self) -> Lock:
        """A new ``Lock`` on the target's path, with a connected client (else UnavailableError)."""
        return Lock(self.connected_client(), self.path, identifier=self.identifier)

    def take(self, lock: Lock) -> bool:
        """Acquire ``lock`` as the target says; True if held, False if another has it.

        UnavailableError when the acquire gave up unable to reach ZooKeeper:
        nobody was seen holding the lock, so it is not "busy".
        """
        if lock.acquire(blocking=self.timeout != 0, timeout=self.timeout or None):
            return True
        if lock.statistics().refusal == "unreachable":
            client = lock.client
            problem = client.connection_problem
            raise UnavailableError(
                f"ZooKeeper at {client.connect_string} did not answer while taking the lock "
                f"{self.name!r} ({self.path}){f': {problem}' if problem else ''}",
                problem,
            )
        return False

    def refusal(self) -> str:
        """Why the lock was not acquired, naming it (for ``LockTimeout``)."""
        if self.timeout == 0:
            return f"lock {self.name!r} ({self.path}) is held elsewhere"
        if self.timeout is None:
            return f"lock {self.name!r} ({self.path}) was not acquired"
        return f"lock {self.name!r} ({self.path}) not acquired within {self.timeout:g}s"

    def acquire(self) -> Lock | None:
        """The held lock, or None when not acquired in time; blocks the calling thread."""
        lock = self.new_lock()
        return lock if self.take(lock) else None

    async def acquire_async(self) -> Lock | None:
        """``acquire()`` for async code: the wait runs on a thread, the loop goes on.

        Cancelled while waiting, it calls the acquire off and leaves no node.
        """
        attempt = _Attempt(self)
        future = _in_thread(attempt.run, f"zk-recipes lock {self.name}")
        cancelled = await _outlast(future, attempt.call_off)
        if cancelled is None:
            return future.result()
        if future.exception() is None:
            got = future.result()
            if got is not None:  # acquired before the call-off reached the thread
                await release_lock_async(got)
        raise cancelled


class _Attempt:
    """One acquire on a thread of its own that the awaiting task can call off."""

    def __init__(self, target: LockTarget) -> None:
        self._target = target
        self._guard = threading.Lock()
        self._called_off = threading.Event()
        self._lock: Lock | None = None

    def run(self) -> Lock | None:
        lock = self._target.new_lock()
        with self._guard:
            if self._called_off.is_set():
                return None
            self._lock = lock
        if not self._target.take(lock):
            return None
        with self._guard:
            if not self._called_off.is_set():
                return lock
        lock.release()
        return None

    def call_off(self) -> None:
        with self._guard:
            self._called_off.set()
            lock = self._lock
        if lock is not None:
            lock.cancel()


def _in_thread(fn: Callable[[], T], name: str) -> asyncio.Future[T]:
    """``fn()`` on a new daemon thread, as a future of the running loop."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not done.set_running_or_notify_cancel():
            return
        try:
            done.set_result(fn())
        except BaseException as exc:  # handed to the awaiting task
            done.set_exception(exc)

    future = asyncio.wrap_future(done)
    threading.Thread(target=run, name=name, daemon=True).start()
    return future


async def _outlast(
    future: asyncio.Future[Any], on_cancel: Callable[[], None] | None = None
) -> asyncio.CancelledError | None:
    """Wait until ``future`` is done, even through cancellation; the cancellation, if one came.

    ``on_cancel`` runs when it comes and again every ``RECALL`` seconds while
    the thread runs on: ``Lock.cancel()`` ends only acquires already waiting,
    and the thread may be a few steps short of its acquire.
    """
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait((future,), timeout=None if cancelled is None else RECALL)
        except asyncio.CancelledError as exc:
            cancelled = exc
        if cancelled is not None and on_cancel is not None and not future.done():
            on_cancel()
    return cancelled


async def release_lock_async(lock: Lock) -> None:
    """``lock.release()`` on a thread, finished even when the awaiting task is cancelled."""
    future = _in_thread(lock.release, f"zk-recipes release {lock.path}")
    cancelled = await _outlast(future)
    if cancelled is not None:
        future.exception()  # retrieved: the cancellation is what the caller hears of
        raise cancelled
    future.result()
