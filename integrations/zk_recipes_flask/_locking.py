"""Locks around views and code: ``@zk.locked("invoice-{id}")`` and ``with zk.lock("x")``.

Each call takes a new ``zk_recipes.Lock`` on ``<prefix>/locks/<name>``
(``zk_recipes.cli.lock_path`` with the app's ``ZK_RECIPES_PREFIX``) with the
app's process client, runs the function while holding it and releases it in
``finally``. That is the node directory of ``flask zk lock NAME`` and
``zk-recipes lock NAME``, so they exclude each other. A new Lock per call,
never a shared one: a Lock is one contender per process and is not
re-entrant per thread. The app is the current one, looked up at each call, so
one decorated view serves every app it is registered on.

Shared with Django's ``@zk_lock``: the name template (``LockNameTemplate``:
``str.format`` over the function's parameters, so a view's URL variables,
each value quoted into one node name) and the acquire (``LockTarget``:
blocking on the calling thread for sync code; for async views, which Flask
runs on an event loop of their own through asgiref, on a thread of its own,
so the loop goes on, and a cancelled waiter leaves no node).

Busy: a status code answers a request by raising ``LockBusy``, an
``HTTPException`` that is also a ``LockTimeout``: Flask turns it into the
status with a short plain-text body (or the app's error handler), from the
view or from any function the view calls, and code that catches
``LockTimeout`` catches it too. Outside a request it is a plain
``LockTimeout``. The message names the lock; the body names nobody.

Holding: ``g.zk_lock`` (set by the decorator) and ``current_lock()`` (a
context variable: the innermost lock held in this thread or task) give the
held Lock, for its ``fencing_token`` and ``check()``. SUSPENDED puts the hold
in doubt and LOST ends it, as for any ``zk_recipes.Lock``; the function is
not interrupted, so it calls ``check()`` before writes or passes the fencing
token to storage. A loss is logged as a warning (logger ``zk_recipes.flask``)
when the function returns. No Curator counterpart: a framework face of
InterProcessMutex (``zk_recipes.Lock``).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from flask import g, has_app_context, has_request_context
from werkzeug.exceptions import HTTPException, default_exceptions

from zk_recipes import Lock, LockTimeout, RecipeUsageError, WrongTypeError
from zk_recipes.cli import LockNameTemplate, LockTarget, release_lock_async

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

    from zk_recipes_flask._extension import ZkRecipes

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("zk_recipes.flask")

_held: contextvars.ContextVar[tuple[Lock, ...]] = contextvars.ContextVar(
    "zk_recipes_flask.held", default=()
)
_ABSENT = object()


def current_lock() -> Lock:
    """The innermost lock that ``@zk.locked`` or ``zk.lock()`` holds in this thread or task.

    For its ``fencing_token`` and ``check()`` deep in the code a view calls.
    Context-local: other requests, threads and tasks see their own locks
    (``asyncio.to_thread`` and asgiref carry the context along; a bare
    ``threading.Thread`` does not). RecipeUsageError when none is held.
    """
    held = _held.get()
    if not held:
        raise RecipeUsageError(
            "current_lock(): no lock is held in this context; call it inside a function "
            "decorated with @zk.locked or inside a `with zk.lock(...)` block (a thread started "
            "there does not inherit the context: pass it the lock)"
        )
    return held[-1]


class LockBusy(LockTimeout, HTTPException):
    """``@zk.locked`` refused a call in a request: the lock is held elsewhere.

    An ``HTTPException``: unless caught, Flask answers the request with its
    ``code`` (the decorator's ``on_busy``, 423 Locked by default) and a short
    plain-text body that names neither the lock nor its holder; an app's
    ``@app.errorhandler(LockBusy)`` (or ``errorhandler(423)``) renders its
    own. A ``LockTimeout`` too, whose message names the lock, for logs and
    for code that catches it.
    """

    code = 423
    description = "busy, try again shortly."
    response = None

    def get_body(
        self, environ: WSGIEnvironment | None = None, scope: dict[str, Any] | None = None
    ) -> str:
        return f"{self.name}: {self.description}\n"

    def get_headers(
        self, environ: WSGIEnvironment | None = None, scope: dict[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        return [("Content-Type", "text/plain; charset=utf-8")]

    def __repr__(self) -> str:
        return f"<LockBusy {self.code}: {self}>"


@functools.cache
def _busy_class(status: int) -> type[LockBusy]:
    """The LockBusy raised for ``status``: a subclass per status, of werkzeug's class too.

    Flask finds an ``errorhandler(423)`` by the exception's class: its code,
    and werkzeug's class for the code (``Locked``) among its bases.
    """
    known = default_exceptions.get(status)
    bases: tuple[type, ...] = (LockBusy,) if known is None else (LockBusy, known)
    namespace = {"code": status, "__module__": LockBusy.__module__, "__qualname__": "LockBusy"}
    return type("LockBusy", bases, namespace)


def locked(
    extension: ZkRecipes,
    name: str,
    *,
    timeout: float | None = 0.0,
    on_busy: int | Callable[..., Any] = 423,
    identifier: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``ZkRecipes.locked``: see its docstring and the module's."""
    if not isinstance(name, str):
        raise WrongTypeError(
            f"zk.locked needs a lock name first, like @zk.locked('invoice-{{id}}'), got {name!r}"
        )
    wait = LockTarget.check_timeout(timeout)
    if isinstance(on_busy, bool) or not (
        callable(on_busy) or (isinstance(on_busy, int) and 100 <= on_busy <= 599)
    ):
        raise WrongTypeError(
            f"on_busy must be an HTTP status (like 423 or 409) or a callable, got {on_busy!r}"
        )
    if identifier is not None:
        _check_identifier(identifier)

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if not callable(func):
            raise WrongTypeError(f"zk.locked decorates a function or a view, got {func!r}")
        plan = _Plan(extension, LockNameTemplate(name, func), wait, on_busy, identifier)
        if inspect.iscoroutinefunction(func):
            return _async_wrapper(func, plan)
        return _sync_wrapper(func, plan)

    return decorate


def lock(
    extension: ZkRecipes,
    name: str,
    *,
    timeout: float | None = None,
    identifier: str | None = None,
    where: str = "?",
) -> LockBlock:
    """``ZkRecipes.lock``: see its docstring."""
    if not isinstance(name, str):
        raise WrongTypeError(f"zk.lock() needs a lock name, like zk.lock('nightly'), got {name!r}")
    wait = LockTarget.check_timeout(timeout)
    if identifier is not None:
        _check_identifier(identifier)
    return LockBlock(extension, name, wait, identifier, where)


def _target(
    extension: ZkRecipes, name: str, identifier: str | None, timeout: float | None
) -> LockTarget:
    """The lock ``name`` of the current app: its prefix now, its client on the waiting thread."""
    state = extension.state()
    return LockTarget(
        name,
        state.clients.get,
        prefix=state.config.prefix,
        identifier=identifier,
        timeout=timeout,
    )


class _Holding:
    """What holding sets up and takes down: ``current_lock()`` and ``g.zk_lock``."""

    def __init__(self, lock: Lock, where: str, on_g: bool = False) -> None:
        self.lock = lock
        self._where = where
        self._token = _held.set((*_held.get(), lock))
        self._on_g = on_g and has_app_context()
        if self._on_g:
            self._before = g.get("zk_lock", _ABSENT)
            g.zk_lock = lock

    def end(self) -> Lock:
        _held.reset(self._token)
        if self._on_g:
            if self._before is _ABSENT:
                g.pop("zk_lock", None)
            else:
                g.zk_lock = self._before
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
        extension: ZkRecipes,
        template: LockNameTemplate,
        timeout: float | None,
        on_busy: int | Callable[..., Any],
        identifier: str | None,
    ) -> None:
        self.extension = extension
        self.template = template
        self.timeout = timeout
        self.on_busy = on_busy
        self.identifier = identifier or template.where
        self.where = template.where

    def target(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> LockTarget:
        name = self.template.render(args, kwargs)
        return _target(self.extension, name, self.identifier, self.timeout)

    def busy(self, target: LockTarget, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if not isinstance(self.on_busy, int):
            return self.on_busy(*args, **kwargs)
        if has_request_context():
            raise _busy_class(self.on_busy)(target.refusal())
        raise LockTimeout(target.refusal())


def _sync_wrapper(func: Callable[P, R], plan: _Plan) -> Callable[P, R]:
    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        target = plan.target(args, kwargs)
        lock = target.acquire()
        if lock is None:
            return plan.busy(target, args, kwargs)  # type: ignore[no-any-return]
        holding = _Holding(lock, plan.where, on_g=True)
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
        holding = _Holding(lock, plan.where, on_g=True)
        try:
            return await func(*args, **kwargs)
        finally:
            holding.end()
            await release_lock_async(lock)

    return wrapper


class LockBlock:
    """What ``zk.lock()`` returns: one block, ``with`` or ``async with``."""

    def __init__(
        self,
        extension: ZkRecipes,
        name: str,
        timeout: float | None,
        identifier: str | None,
        where: str,
    ) -> None:
        self._extension = extension
        self._name = name
        self._timeout = timeout
        self._identifier = identifier
        self._where = where
        self._used = False
        self._holding: _Holding | None = None

    def _target(self) -> LockTarget:
        if self._used:
            raise RecipeUsageError(
                f"{self!r} was entered already: zk.lock() makes one block, so write "
                "`with zk.lock(...)` at each place, each time"
            )
        self._used = True
        return _target(self._extension, self._name, self._identifier, self._timeout)

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
        return f"<zk.lock {self._name!r} {state}>"


def _check_identifier(value: object) -> None:
    if not isinstance(value, str) or not value:
        raise WrongTypeError(f"identifier must be a non-empty string, got {value!r}")
