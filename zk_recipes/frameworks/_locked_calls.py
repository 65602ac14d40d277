"""What every framework's lock decorator and lock block share: hold, run, release, remember.

Django's ``@zk_lock`` / ``locked()`` and Flask's ``@zk.locked`` / ``zk.lock()``
differ in three things only: where the client and the prefix come from (an
alias, the current app), how a busy lock answers a request (a response, an
HTTP exception) and where the held lock is shown to the view
(``request.zk_lock``, ``g.zk_lock``). Those come in as callables; the rest is
here, once:

- ``HeldLocks``: the innermost held lock of this thread or task
  (``current_lock()``), a context variable stack, and the warning logged when
  a lock was lost while a function held it;
- ``LockPlan`` + ``locked_call``: the decorated call, sync or async: render
  the name, take the lock (``LockTarget``: a sync ``Lock`` for sync code, an
  ``aio.Lock`` waiting on the loop for async code), answer when busy or when
  ZooKeeper is unavailable, run, release in ``finally``;
- the block (``with`` / ``async with`` around a block, entered once) is
  ``_locked_blocks.py``'s, on the same ``HeldLocks``.

Unavailable is not busy. When ``LockTarget`` raises ``UnavailableError``
(the client is not connected, or ZooKeeper did not answer the attempt),
``on_unavailable`` decides, at once: an HTTP status (503 by default: the
face answers it with a ``Retry-After`` of ``RETRY_AFTER`` seconds),
``"raise"`` (the ``UnavailableError`` goes to the caller), ``"run"`` (the
function or block runs without the lock, and a warning says so: only for
work that is safe to run twice at once), or a callable answering in the
function's place. "Busy" (``on_busy``) stays for a lock someone else holds.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, ParamSpec, TypeVar

from zk_recipes import RecipeUsageError, UnavailableError, WrongTypeError
from zk_recipes.frameworks._lock_names import LockNameTemplate
from zk_recipes.frameworks._lock_target import HeldLock, LockTarget, release_lock_async

P = ParamSpec("P")
R = TypeVar("R")

#: Shows a held lock to the call (``request.zk_lock = lock``); returns the undo.
Attach = Callable[[HeldLock], Callable[[], None]]
#: What a locked call or block does when ZooKeeper is unavailable (module docstring).
OnUnavailable = int | Literal["raise", "run"] | Callable[..., Any]
#: The ``Retry-After`` (seconds) of a face's 503: about a reconnect's time, not a promise.
RETRY_AFTER = 5


class HeldLocks:
    """The locks a framework's decorators and blocks hold in this thread or task.

    ``missing`` is the message of ``current()`` when none is held; ``log``
    takes the warning when a lock was lost while it was held.
    """

    def __init__(self, name: str, log: logging.Logger, missing: str) -> None:
        self._held: contextvars.ContextVar[tuple[HeldLock, ...]] = contextvars.ContextVar(
            name, default=()
        )
        self._log = log
        self._missing = missing

    def current(self) -> HeldLock:
        """The innermost held lock; RecipeUsageError when none is held."""
        held = self._held.get()
        if not held:
            raise RecipeUsageError(self._missing)
        return held[-1]

    def hold(self, lock: HeldLock, where: str, attach: Attach | None = None) -> Holding:
        """Make ``lock`` the innermost held lock (and ``attach`` it) until ``end()``."""
        return Holding(self, lock, where, attach)


class Holding:
    """One hold: ``current()`` returns its lock, and ``attach`` shows it, until ``end()``."""

    def __init__(self, held: HeldLocks, lock: HeldLock, where: str, attach: Attach | None) -> None:
        self.lock = lock
        self._held = held
        self._where = where
        self._token = held._held.set((*held._held.get(), lock))
        self._detach = attach(lock) if attach is not None else None

    def end(self) -> HeldLock:
        """Undo what the hold set up; warn if the lock was lost meanwhile. The lock."""
        self._held._held.reset(self._token)
        if self._detach is not None:
            self._detach()
        if self.lock.lost.is_set():
            self._held._log.warning(
                "lock %s was lost while %s held it: another process may have held it "
                "meanwhile (check the fencing token or lock.check() before writes)",
                self.lock.path,
                self._where,
            )
        return self.lock


def check_on_busy(on_busy: object) -> None:
    """An HTTP status (100-599) or a callable; WrongTypeError otherwise."""
    if isinstance(on_busy, bool) or not (
        callable(on_busy) or (isinstance(on_busy, int) and 100 <= on_busy <= 599)
    ):
        raise WrongTypeError(
            f"on_busy must be an HTTP status (like 423 or 409) or a callable, got {on_busy!r}"
        )


def check_on_unavailable(on_unavailable: object, *, statuses: bool = True) -> None:
    """An HTTP status (when ``statuses``), "raise", "run" or a callable; else WrongTypeError."""
    if on_unavailable in ("raise", "run") or (callable(on_unavailable) and statuses):
        return
    is_status = isinstance(on_unavailable, int) and not isinstance(on_unavailable, bool)
    if statuses and is_status and 100 <= on_unavailable <= 599:  # type: ignore[operator]
        return
    choices = (
        'an HTTP status (like 503), "raise", "run" or a callable'
        if statuses
        else '"raise" or "run" (a block cannot answer a request with a status: decorate '
        "the view, or catch UnavailableError)"
    )
    raise WrongTypeError(f"on_unavailable must be {choices}, got {on_unavailable!r}")


def check_identifier(value: object) -> None:
    """None (the face names the holder), or a non-empty string; WrongTypeError otherwise."""
    if value is not None and (not isinstance(value, str) or not value):
        raise WrongTypeError(f"identifier must be a non-empty string, got {value!r}")


def ran_unguarded(log: logging.Logger, where: str, exc: UnavailableError) -> None:
    """The warning of an ``on_unavailable="run"`` call: it ran without its lock."""
    log.warning(
        "%s ran WITHOUT its lock (on_unavailable='run'): %s",
        where,
        exc,
        extra={"zk_event": "lock.unguarded"},
    )


@dataclasses.dataclass
class LockPlan:
    """A decorated function's lock, and the framework's answers.

    ``make_target(name, identifier, timeout)`` gives the call's ``LockTarget``;
    ``refuse(status, target, args)`` answers a busy lock when ``on_busy`` is a
    status; ``attach(args)`` shows the held lock to the call (or None);
    ``unavailable(status, error, args)`` answers an unreachable ZooKeeper when
    ``on_unavailable`` is a status (None: the error is raised instead).
    """

    template: LockNameTemplate
    timeout: float | None
    on_busy: int | Callable[..., Any]
    identifier: str | None
    held: HeldLocks
    make_target: Callable[[str, str, float | None], LockTarget]
    refuse: Callable[[int, LockTarget, Sequence[Any]], Any]
    attach: Callable[[Sequence[Any]], Attach | None]
    on_unavailable: OnUnavailable = 503
    unavailable: Callable[[int, UnavailableError, Sequence[Any]], Any] | None = None

    @property
    def where(self) -> str:
        return self.template.where

    def target(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> LockTarget:
        name = self.template.render(args, kwargs)
        return self.make_target(name, self.identifier or self.where, self.timeout)

    def busy(self, target: LockTarget, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if not isinstance(self.on_busy, int):
            return self.on_busy(*args, **kwargs)
        return self.refuse(self.on_busy, target, args)

    def hold(self, lock: HeldLock, args: Sequence[Any]) -> Holding:
        return self.held.hold(lock, self.where, self.attach(args))

    def runs_unguarded(self, exc: UnavailableError) -> bool:
        """True (and warned) when ``on_unavailable="run"``: the call runs without the lock."""
        if self.on_unavailable != "run":
            return False
        ran_unguarded(self.held._log, self.where, exc)
        return True

    def answer_unavailable(
        self, exc: UnavailableError, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Any:
        """The answer when ZooKeeper is unavailable (not "run": see ``runs_unguarded``)."""
        choice = self.on_unavailable
        if callable(choice):
            return choice(*args, **kwargs)
        if isinstance(choice, int) and self.unavailable is not None:
            return self.unavailable(choice, exc, args)
        raise exc


def locked_call(func: Callable[P, R], plan: LockPlan, *, is_async: bool) -> Callable[P, R]:
    """``func`` run only while holding ``plan``'s lock; ``is_async`` for coroutine functions."""
    if is_async:
        return _async_call(func, plan)
    return _sync_call(func, plan)


def _sync_call(func: Callable[P, R], plan: LockPlan) -> Callable[P, R]:
    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        target = plan.target(args, kwargs)
        try:
            lock = target.acquire()
        except UnavailableError as exc:
            if plan.runs_unguarded(exc):
                return func(*args, **kwargs)
            return plan.answer_unavailable(exc, args, kwargs)  # type: ignore[no-any-return]
        if lock is None:
            return plan.busy(target, args, kwargs)  # type: ignore[no-any-return]
        holding = plan.hold(lock, args)
        try:
            return func(*args, **kwargs)
        finally:
            holding.end()
            lock.release()

    return wrapper


def _async_call(func: Callable[P, Any], plan: LockPlan) -> Callable[P, Any]:
    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        target = plan.target(args, kwargs)
        try:
            lock = await target.acquire_async()
        except UnavailableError as exc:
            if plan.runs_unguarded(exc):
                return await func(*args, **kwargs)
            answer = plan.answer_unavailable(exc, args, kwargs)
            return await answer if inspect.isawaitable(answer) else answer
        if lock is None:
            answer = plan.busy(target, args, kwargs)
            return await answer if inspect.isawaitable(answer) else answer
        holding = plan.hold(lock, args)
        try:
            return await func(*args, **kwargs)
        finally:
            holding.end()
            await release_lock_async(lock)

    return wrapper


__all__ = [
    "RETRY_AFTER",
    "Attach",
    "HeldLock",
    "HeldLocks",
    "Holding",
    "LockPlan",
    "OnUnavailable",
    "check_identifier",
    "check_on_busy",
    "check_on_unavailable",
    "locked_call",
    "ran_unguarded",
]
