"""Taking the lock of one call: on the calling thread, or on the event loop for async code.

The frameworks' lock decorators and blocks (Django's ``@zk_lock`` and
``locked()``, Flask's ``@zk.locked`` and ``zk.lock()``, the Starlette face's
dependency, decorator and block) describe each call's lock as a
``LockTarget``: its name, its node directory, whom the node names, how long
to wait, and where the client comes from. The client is asked for only when
the lock is made, and async code never waits for it on its loop (below). A
new lock per call: a lock is one contender per process.

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

Async code waits on the event loop (``zk_recipes.aio.Lock``, the same
contender queue and hold rules as the sync Lock): no thread per waiting
call, so an ASGI worker holds hundreds of waiting requests with a handful of
threads. Only a process's very first call, while its client makes the first
connection (``ProcessClient.available()`` waits up to a second for it), and a
client factory given as a callable, run on a daemon thread of their own so
the loop goes on meanwhile.

Cancellation: when the awaiting task is cancelled, ``aio.Lock`` deletes the
contender node before the CancelledError goes on, so no node outlives the
cancellation. A release is finished the same way: a cancellation never cuts
it short (``release_lock_async``).
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
    aio,
)
from zk_recipes.frameworks._lock_paths import lock_path

T = TypeVar("T")

#: A lock a framework holds for a call: the sync ``Lock`` (sync code) or an
#: ``aio.Lock`` (async code); both give ``fencing_token``, ``check()``, ``is_held()``
#: and ``lost`` (a ``threading.Event`` or an ``asyncio.Event``).
HeldLock = Lock | aio.Lock
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
        client = source.available() if isinstance(source, ProcessClient) else source()
        return self._answering(client)

    def _answering(self, client: ZkClient) -> ZkClient:
        """``client`` if it is connected and answering now; UnavailableError if not."""
        if not isinstance(self._client, ProcessClient):
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
        self._unreachable(lock)
        return False

    def _unreachable(self, lock: HeldLock) -> None:
        """UnavailableError if ``lock``'s refused acquire could not reach ZooKeeper."""
        if lock.statistics().refusal == "unreachable":
            client = lock.client
            problem = client.connection_problem
            raise UnavailableError(
                f"ZooKeeper at {client.connect_string} did not answer while taking the lock "
                f"{self.name!r} ({self.path}){f': {problem}' if problem else ''}",
                problem,
            )

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

    async def acquire_async(self) -> aio.Lock | None:
        """``acquire()`` for async code: an ``aio.Lock`` waits on the loop, no thread.

        Cancelled while waiting, it deletes its node, then the CancelledError goes on.
        """
        client = await self._connected_client_async()
        lock = aio.Lock(client, self.path, identifier=self.identifier)
        if await lock.acquire(timeout=self.timeout or None, blocking=self.timeout != 0):
            return lock
        self._unreachable(lock)
        return None

    async def _connected_client_async(self) -> ZkClient:
        """``connected_client()`` without blocking the loop.

        A process client that has connected before answers at once (connected,
        or UnavailableError); the first connection's wait, and a client factory,
        run on a thread of their own.
        """
        source = self._client
        if isinstance(source, ProcessClient):
            current = source.current()
            if current is not None and current.state is not None:
                return self.connected_client()  # no wait: connected or refused at once
        future = _in_thread(self.connected_client, f"zk-recipes connect {self.name}")
        cancelled = await _outlast(future)
        if cancelled is not None:
            future.exception()  # retrieved: the cancellation is what the caller hears of
            raise cancelled
        return future.result()


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


async def _outlast(future: asyncio.Future[Any]) -> asyncio.CancelledError | None:
    """Wait until ``future`` is done, even through cancellation; the cancellation, if one came."""
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            await asyncio.wait((future,))
        except asyncio.CancelledError as exc:
            cancelled = exc
    return cancelled


async def release_lock_async(lock: HeldLock) -> None:
    """Release ``lock`` from async code, finished even when the awaiting task is cancelled.

    An ``aio.Lock`` releases on the loop (its release runs to its end through a
    cancel, then the CancelledError goes on); a sync ``Lock`` on a thread.
    """
    if isinstance(lock, aio.Lock):
        await lock.release()
        return
    future = _in_thread(lock.release, f"zk-recipes release {lock.path}")
    cancelled = await _outlast(future)
    if cancelled is not None:
        future.exception()  # retrieved: the cancellation is what the caller hears of
        raise cancelled
    future.result()
