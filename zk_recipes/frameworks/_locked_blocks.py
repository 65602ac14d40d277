"""A block under a lock: ``with zk.lock("nightly"):`` / ``async with``, entered once.

Django's ``locked()``, Flask's ``zk.lock()`` and the Starlette face's
``zk.lock()`` and lock dependency hold their lock around a block with a
``LockedBlock``, on the same ``HeldLocks`` as the decorated calls
(``_locked_calls.py``): ``with`` takes a sync ``Lock`` on the calling thread,
``async with`` an ``aio.Lock`` on the loop. ``lock_block`` is a face's
``zk.lock(name)`` with its arguments checked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar, cast, overload

from zk_recipes import Lock, LockTimeout, RecipeUsageError, UnavailableError, WrongTypeError, aio
from zk_recipes.frameworks._lock_target import HeldLock, LockTarget, release_lock_async
from zk_recipes.frameworks._locked_calls import (
    HeldLocks,
    Holding,
    check_identifier,
    check_on_unavailable,
    ran_unguarded,
)

#: What a block's ``with`` gives its ``as`` target: the held Lock, or None too with
#: ``"run"``; its ``async with`` gives the ``aio.Lock`` twin of the same.
L = TypeVar("L", bound="Lock | None")


class LockedBlock(Generic[L]):
    """One block under a lock: ``with`` or ``async with``, entered once.

    ``make_target()`` is called at the enter; ``label`` names the block in
    messages (``<label state>``) and ``call`` is how the user wrote it
    (``locked()``, ``zk.lock()``), for the message of a second enter.
    ``on_unavailable``: "raise" (``UnavailableError``), "run" (the block runs
    without the lock and gets None), or a status that ``unavailable(status,
    error)`` turns into the exception to raise (a face's HTTP error).
    """

    def __init__(
        self,
        make_target: Callable[[], LockTarget],
        held: HeldLocks,
        where: str,
        *,
        label: str,
        call: str,
        on_unavailable: int | Literal["raise", "run"] = "raise",
        unavailable: Callable[[int, UnavailableError], BaseException] | None = None,
    ) -> None:
        self._make_target = make_target
        self._held = held
        self._where = where
        self._label = label
        self._call = call
        self._on_unavailable = on_unavailable
        self._unavailable = unavailable
        self._used = False
        self._holding: Holding | None = None

    def _target(self) -> LockTarget:
        if self._used:
            raise RecipeUsageError(
                f"{self!r} was entered already: {self._call} makes one block, so write "
                f"`with {self._call[:-1]}...)` at each place, each time"
            )
        self._used = True
        return self._make_target()

    def _entered(self, target: LockTarget, lock: HeldLock | None) -> HeldLock:
        if lock is None:
            raise LockTimeout(target.refusal())
        self._holding = self._held.hold(lock, self._where)
        return lock

    def _outage(self, exc: UnavailableError) -> None:
        """Returns for "run" (warned: the block gets None); else the error, or the
        face's for a status, is raised."""
        choice = self._on_unavailable
        if choice == "run":
            ran_unguarded(self._held._log, self._where, exc)
            return None
        if isinstance(choice, int) and self._unavailable is not None:
            error = self._unavailable(choice, exc)
            if error is not exc:
                raise error from exc
        raise exc

    def __enter__(self) -> L:
        target = self._target()
        try:
            lock = target.acquire()
        except UnavailableError as exc:
            self._outage(exc)
            return cast(L, None)
        return cast(L, self._entered(target, lock))

    def __exit__(self, *exc_info: object) -> None:
        if self._holding is not None or self._on_unavailable != "run":
            lock = self._end()
            if isinstance(lock, Lock):
                lock.release()
            else:  # entered with async with
                raise RecipeUsageError(
                    f"{self!r} was entered with `async with`: leave it with `async with` too"
                )

    @overload
    async def __aenter__(self: LockedBlock[Lock]) -> aio.Lock: ...
    @overload
    async def __aenter__(self: LockedBlock[Lock | None]) -> aio.Lock | None: ...
    async def __aenter__(self) -> aio.Lock | None:
        """The held ``aio.Lock`` (it waited on the loop), or None with ``"run"``."""
        target = self._target()
        try:
            lock = await target.acquire_async()
        except UnavailableError as exc:
            self._outage(exc)
            return None
        return cast(aio.Lock, self._entered(target, lock))

    async def __aexit__(self, *exc_info: object) -> None:
        if self._holding is not None or self._on_unavailable != "run":
            await release_lock_async(self._end())

    def _end(self) -> HeldLock:
        holding, self._holding = self._holding, None
        if holding is None:
            raise RecipeUsageError(f"{self!r} is not held: exit without a successful enter")
        return holding.end()

    def __repr__(self) -> str:
        if self._holding is not None:
            state = f"held, token={self._holding.lock.fencing_token}"
        else:
            state = "done" if self._used else "not entered"
        return f"<{self._label} {state}>"


def lock_block(
    make_target: Callable[[str, str | None, float | None], LockTarget],
    held: HeldLocks,
    name: object,
    *,
    timeout: object,
    on_unavailable: object,
    identifier: object,
    where: str,
    unavailable: Callable[[int, UnavailableError], BaseException] | None = None,
) -> LockedBlock[Any]:
    """A face's ``zk.lock(name)`` block, its arguments checked with fix-it errors.

    ``make_target(name, identifier, timeout)`` gives the block's ``LockTarget``
    at the enter; ``on_unavailable`` is a status (``unavailable`` turns it into
    the face's error), "raise" or "run", never a callable (a block has no
    function to answer in its place).
    """
    if not isinstance(name, str):
        raise WrongTypeError(f"zk.lock() needs a lock name, like zk.lock('nightly'), got {name!r}")
    wait = LockTarget.check_timeout(timeout)
    if callable(on_unavailable):
        raise WrongTypeError(
            'zk.lock(on_unavailable=) is a status (like 503), "raise" or "run": a block '
            "has no function to call in its place"
        )
    check_on_unavailable(on_unavailable)
    check_identifier(identifier)
    return LockedBlock(
        functools.partial(make_target, name, cast("str | None", identifier), wait),
        held,
        where,
        label=f"zk.lock {name!r}",
        call="zk.lock()",
        on_unavailable=cast('int | Literal["raise", "run"]', on_unavailable),
        unavailable=unavailable,
    )


__all__ = ["LockedBlock", "lock_block"]
