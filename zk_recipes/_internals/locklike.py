"""The lock-like contract, written once (STYLE habit 3), and the verbs derived from it.

``LockLike`` is what every lock-like recipe offers — Lock, RLock, both halves
of ReadWriteLock, Semaphore, SemaphoreMutex, MultiLock — and what MultiLock,
the contract tests and the benchmarks take: ``acquire(blocking=True,
timeout=None) -> bool`` and ``release()`` as ``threading.Lock`` has them,
``is_held()``, ``check()``, ``fencing_token``, ``lost`` and ``on_lost``,
``cancel()`` (from another thread) and ``contenders()``.

``LockVerbs`` derives the context forms from acquire/release: ``with lock:``
(waits as long as it takes) and ``with lock.acquired(timeout):``, which
raises LockTimeout because a ``with`` block cannot return False.
``AsyncLockVerbs`` is its twin for the asyncio forms (``zk_recipes.aio``):
``async with lock:`` and ``async with lock.acquired(timeout):``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from zk_recipes._errors import LockTimeout

if TYPE_CHECKING:
    from typing_extensions import Self

    from zk_recipes._client.client import ZkClient
    from zk_recipes._types import Contender


class _AcquireRelease(Protocol):
    """What ``LockVerbs`` needs of the class it is mixed into (trio's _HasAcquireRelease)."""

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool: ...
    def release(self) -> None: ...


_L = TypeVar("_L", bound=_AcquireRelease)


class _AsyncAcquireRelease(Protocol):
    """What ``AsyncLockVerbs`` needs of the class it is mixed into."""

    async def acquire(self, timeout: float | None = None, *, blocking: bool = True) -> bool: ...

    async def release(self) -> None: ...


_A = TypeVar("_A", bound=_AsyncAcquireRelease)


class LockLike(Protocol):
    """What every lock-like recipe offers, MultiLock included."""

    #: Set when something held was lost with its session (cleared by the next acquire).
    lost: threading.Event

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take it; False only if not acquired in time (or at once, non-blocking)."""
        ...

    def release(self) -> None:
        """Give it back."""
        ...

    def is_held(self) -> bool:
        """True while held for sure (not in doubt, not lost)."""
        ...

    def check(self) -> None:
        """Raise LockLost if what is held was lost; call it before exclusive side effects."""
        ...

    @property
    def fencing_token(self) -> int:
        """The czxid of the node held: storage can refuse writes with older tokens."""
        ...

    def on_lost(self, callback: Callable[[Self], object]) -> None:
        """Call ``callback(recipe)`` (on a thread of the recipe's) when something held is lost."""
        ...

    def cancel(self) -> None:
        """End every ``acquire()`` waiting on this object now: each returns False."""
        ...

    def contenders(self) -> list[Contender]:
        """Who is queued (holders first, marked), with owner metadata."""
        ...

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc_info: object) -> object: ...
    def acquired(self, timeout: float) -> contextlib.AbstractContextManager[Any]: ...


class PathLock(LockLike, Protocol):
    """A lock-like on one path of one client: what MultiLock takes as members."""

    #: The client the recipe uses.
    client: ZkClient
    #: The recipe's path, relative to the client's namespace.
    path: str


class LockVerbs:
    """Mixin: the context forms of a recipe that defines ``acquire`` and ``release``.

    ``self`` is typed against ``_AcquireRelease``, so a class that mixes it in
    without defining both is a type error, not a runtime ``NotImplementedError``.
    """

    def __enter__(self: _L) -> _L:
        self.acquire()
        return self

    def __exit__(self: _AcquireRelease, *exc_info: object) -> None:
        self.release()

    @contextlib.contextmanager
    def acquired(self: _L, timeout: float) -> Iterator[_L]:
        """``with lock.acquired(timeout=5):`` — raises LockTimeout if not acquired in time."""
        if not self.acquire(timeout=timeout):
            raise LockTimeout(f"{_label(self)} not acquired within {timeout:g} s")
        try:
            yield self
        finally:
            self.release()


class AsyncLockVerbs:
    """Mixin: ``LockVerbs`` for the asyncio forms, from their ``acquire`` and ``release``."""

    async def __aenter__(self: _A) -> _A:
        await self.acquire()
        return self

    async def __aexit__(
        self: _AsyncAcquireRelease,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

    @contextlib.asynccontextmanager
    async def acquired(self: _A, timeout: float | None = None) -> AsyncIterator[_A]:
        """``async with lock.acquired(timeout=5):`` — LockTimeout if not acquired in time."""
        if not await self.acquire(timeout=timeout):
            raise LockTimeout(f"{self!r} not acquired within {timeout:g} s")
        try:
            yield self
        finally:
            await self.release()


def _label(recipe: object) -> str:
    kind = getattr(recipe, "_kind", type(recipe).__name__)
    path = getattr(recipe, "path", None)
    return f"{kind} {path}" if isinstance(path, str) else repr(recipe)
