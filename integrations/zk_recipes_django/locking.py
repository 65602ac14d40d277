"""Locks around views and functions: ``@zk_lock("invoice-{pk}")`` and ``with locked("x")``.

Each call takes a new ``zk_recipes.Lock`` on ``<prefix>/locks/<name>`` with
the alias's process client, runs the function while holding it and releases
it in ``finally``. That is the node directory of ``manage.py zklock NAME``
and ``zk-recipes lock NAME``, so the three exclude each other. A new Lock per
call, never a shared one: a Lock object is one contender per process and is
not re-entrant per thread, and async acquires run on threads of their own.

Names: the decorator's name is a ``str.format`` template over the function's
parameters, its values quoted into one node name
(``zk_recipes.cli.LockNameTemplate``). Async functions wait on a thread of
their own and a cancelled waiter leaves no node behind
(``zk_recipes.cli.LockTarget``); Flask's ``@zk.locked`` shares both.

Holding: ``request.zk_lock`` (views) and ``current_lock()`` (a context
variable: the innermost lock held in this thread or task) give the held Lock,
for its ``fencing_token`` and ``check()``. SUSPENDED puts the hold in doubt
and LOST ends it, as for any ``zk_recipes.Lock``; the function is not
interrupted, so it calls ``check()`` before writes or passes the fencing token
to storage. A loss is logged as a warning (logger ``zk_recipes.django``) when
the function returns. No Curator counterpart: this is a framework face of
InterProcessMutex (``zk_recipes.Lock``).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse

from zk_recipes import Lock, LockTimeout, RecipeUsageError, WrongTypeError
from zk_recipes.cli import LockNameTemplate, LockTarget, release_lock_async
from zk_recipes_django import _settings
from zk_recipes_django._clients import get_client

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("zk_recipes.django")

_held: contextvars.ContextVar[tuple[Lock, ...]] = contextvars.ContextVar(
    "zk_recipes_django.held", default=()
)
_ABSENT = object()


def current_lock() -> Lock:
    """The innermost lock that ``@zk_lock`` or ``locked()`` holds in this thread or task.

    For its ``fencing_token`` and ``check()`` deep in the code a view calls.
    Context-local: other threads and tasks see their own locks (code run
    through ``sync_to_async``/``async_to_sync`` or ``asyncio.to_thread``
    carries the context along; a bare ``threading.Thread`` does not).
    RecipeUsageError when none is held.
    """
    held = _held.get()
    if not held:
        raise RecipeUsageError(
            "current_lock(): no lock is held in this context; call it inside a function "
            "decorated with @zk_lock or inside a `with locked(...)` block (a thread started "
            "there does not inherit the context: pass it the lock)"
        )
    return held[-1]


def zk_lock(
    name: str,
    *,
    timeout: float | None = 0.0,
    on_busy: int | Callable[..., Any] = 423,
    alias: str = _settings.DEFAULT_ALIAS,
    identifier: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Run the decorated view or function only while holding the lock ``name``.

    ``name`` is a ``str.format`` template over the function's parameters
    (``"invoice-{pk}"`` on ``def view(request, pk)``), its values quoted for a
    znode name. ``timeout``: seconds to wait, 0 (default) not to wait, None
    without limit. When not acquired in time, ``on_busy`` decides: a status
    code (default 423 Locked) answers a view with that status and a short
    plain-text body and makes a plain function raise ``LockTimeout``; a
    callable is called with the same arguments and its result (awaited if
    awaitable, in an async view) is returned. 423 Locked says what happened
    (the request was fine, the resource is locked, try again later) and
    nothing else in Django answers with it; 409 Conflict is a fine choice too.

    Sync and async functions alike. The lock is released when the view
    returns, before the body of a ``StreamingHttpResponse`` is produced. See
    the module docstring and docs/integrations/django.md.
    """
    if not isinstance(name, str):
        raise WrongTypeError(
            f"zk_lock needs a lock name first, like @zk_lock('invoice-{{pk}}'), got {name!r}"
        )
    wait = LockTarget.check_timeout(timeout)
    if isinstance(on_busy, bool) or not (
        callable(on_busy) or (isinstance(on_busy, int) and 100 <= on_busy <= 599)
    ):
        raise WrongTypeError(
            f"on_busy must be an HTTP status (like 423 or 409) or a callable, got {on_busy!r}"
        )
    _check_str("alias", alias)
    if identifier is not None:
        _check_str("identifier", identifier)

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if not callable(func):
            raise WrongTypeError(f"zk_lock decorates a function or a view, got {func!r}")
        template = LockNameTemplate(name, func)
        plan = _Plan(template, wait, on_busy, alias, identifier)
        _note_use(alias, template.where)
        if iscoroutinefunction(func):
            return _async_wrapper(func, plan)
        return _sync_wrapper(func, plan)

    return decorate


def locked(
    name: str,
    *,
    timeout: float | None = None,
    alias: str = _settings.DEFAULT_ALIAS,
    identifier: str | None = None,
) -> _Locked:
    """``with locked("nightly-report") as lock:`` (or ``async with``): hold a lock for a block.

    ``name`` is taken literally (no template). Waits up to ``timeout`` seconds
    (None: without limit, 0: not at all) and raises ``LockTimeout`` if not
    acquired in time. Yields the held ``zk_recipes.Lock`` (``fencing_token``,
    ``check()``), which ``current_lock()`` also returns inside the block. The
    async form waits on a thread of its own. One block per call.
    """
    if not isinstance(name, str):
        raise WrongTypeError(
            f"locked() needs a lock name, like locked('nightly-report'), got {name!r}"
        )
    wait = LockTarget.check_timeout(timeout)
    _check_str("alias", alias)
    if identifier is not None:
        _check_str("identifier", identifier)
    caller = sys._getframe(1)
    code = caller.f_code
    where = f"{caller.f_globals.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"
    _note_use(alias, where)
    return _Locked(name, wait, alias, identifier, where)


class _Holding:
    """What holding sets up and takes down: ``current_lock()`` and ``request.zk_lock``."""

    def __init__(self, lock: Lock, where: str, request: HttpRequest | None = None) -> None:
        self.lock = lock
        self._where = where
        self._request = request
        self._token = _held.set((*_held.get(), lock))
        if request is not None:
            self._before = request.__dict__.get("zk_lock", _ABSENT)
            request.zk_lock = lock

    def end(self) -> Lock:
        _held.reset(self._token)
        if self._request is not None:
            if self._before is _ABSENT:
                self._request.__dict__.pop("zk_lock", None)
            else:
                self._request.zk_lock = self._before
        if self.lock.lost.is_set():
            log.warning(
                "lock %s was lost while %s held it: another process may have held it "
                "meanwhile (check the fencing token or lock.check() before writes)",
                self.lock.path,
                self._where,
            )
        return self.lock


class _Plan:
    """A decorated function's lock: its template, wait and answer when busy."""

    def __init__(
        self,
        template: LockNameTemplate,
        timeout: float | None,
        on_busy: int | Callable[..., Any],
        alias: str,
        identifier: str | None,
    ) -> None:
        self.template = template
        self.timeout = timeout
        self.on_busy = on_busy
        self.alias = alias
        self.identifier = identifier or template.where
        self.where = template.where

    def target(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> LockTarget:
        name = self.template.render(args, kwargs)
        return _lock_target(name, self.alias, self.identifier, self.timeout)

    def busy(self, target: LockTarget, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if not isinstance(self.on_busy, int):
            return self.on_busy(*args, **kwargs)
        if _request_in(args) is not None:
            response = HttpResponse(status=self.on_busy, content_type="text/plain; charset=utf-8")
            # Who holds it is nobody's business outside: the body says busy, nothing more.
            response.content = f"{response.reason_phrase}: busy, try again shortly.\n"
            return response
        raise LockTimeout(target.refusal())


def _sync_wrapper(func: Callable[P, R], plan: _Plan) -> Callable[P, R]:
    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        target = plan.target(args, kwargs)
        lock = target.acquire()
        if lock is None:
            return plan.busy(target, args, kwargs)  # type: ignore[no-any-return]
        holding = _Holding(lock, plan.where, _request_in(args))
        try:
            return func(*args, **kwargs)
        finally:
            holding.end().release()

    return wrapper


def _async_wrapper(func: Callable[P, Any], plan: _Plan) -> Callable[P, Any]:
    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
        target = plan.target(args, kwargs)
        lock = await target.acquire_async()
        if lock is None:
            answer = plan.busy(target, args, kwargs)
            return await answer if inspect.isawaitable(answer) else answer
        holding = _Holding(lock, plan.where, _request_in(args))
        try:
            return await func(*args, **kwargs)
        finally:
            holding.end()
            await release_lock_async(lock)

    return wrapper


class _Locked:
    """The block ``locked()`` returns: ``with`` and ``async with``, once."""

    def __init__(
        self, name: str, timeout: float | None, alias: str, identifier: str | None, where: str
    ) -> None:
        self._name = name
        self._timeout = timeout
        self._alias = alias
        self._identifier = identifier
        self._where = where
        self._used = False
        self._holding: _Holding | None = None

    def _target(self) -> LockTarget:
        if self._used:
            raise RecipeUsageError(
                f"{self!r} was entered already: locked() makes one block, so write "
                "`with locked(...)` at each place, each time"
            )
        self._used = True
        return _lock_target(self._name, self._alias, self._identifier, self._timeout)

    def __enter__(self) -> Lock:
        target = self._target()
        lock = target.acquire()
        if lock is None:
            raise LockTimeout(target.refusal())
        self._holding = _Holding(lock, self._where)
        return lock

    def __exit__(self, *exc_info: object) -> None:
        self._end().release()

    async def __aenter__(self) -> Lock:
        target = self._target()
        lock = await target.acquire_async()
        if lock is None:
            raise LockTimeout(target.refusal())
        self._holding = _Holding(lock, self._where)
        return lock

    async def __aexit__(self, *exc_info: object) -> None:
        await release_lock_async(self._end())

    def _end(self) -> Lock:
        holding, self._holding = self._holding, None
        if holding is None:
            raise RecipeUsageError(f"{self!r} is not held: exit without a successful enter")
        return holding.end()

    def __repr__(self) -> str:
        if self._holding is not None:
            state = f"held, token={self._holding.lock.fencing_token}"
        else:
            state = "done" if self._used else "not entered"
        return f"<locked {self._name!r} alias={self._alias!r} {state}>"


def _lock_target(
    name: str, alias: str, identifier: str | None, timeout: float | None
) -> LockTarget:
    """The lock ``name`` of ``alias``: its prefix now, its client on the waiting thread."""
    prefix = _settings.config(alias).prefix
    client = functools.partial(get_client, alias)
    return LockTarget(name, client, prefix=prefix, identifier=identifier, timeout=timeout)


def _check_str(what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise WrongTypeError(f"{what} must be a non-empty string, got {value!r}")


def _request_in(args: Sequence[Any]) -> HttpRequest | None:
    """The request when the call is a view's: first argument, or second after self."""
    for arg in args[:2]:
        if isinstance(arg, HttpRequest):
            return arg
    return None


_noted: set[tuple[str, str]] = set()
_noted_guard = threading.Lock()


def _note_use(alias: str, where: str) -> None:
    # method_decorator decorates anew on every request: note each place once.
    with _noted_guard:
        if (alias, where) in _noted:
            return
        _noted.add((alias, where))
    _settings.note_use(alias, where)
