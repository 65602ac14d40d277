"""Locked routes: ``Depends(zk_lock("invoice-{id}"))``, ``@zk.locked(...)``, ``zk.lock(...)``.

Each request takes a new lock on ``<prefix>/locks/<name>``
(``zk_recipes.frameworks.lock_path`` with the ``prefix`` setting), the
directory of ``zk-recipes lock NAME``, ``manage.py zklock NAME`` and the
Django and Flask decorators, so they all exclude each other (and Curator's
InterProcessMutex on the same path). Async routes wait on the event loop
(``aio.Lock``: no thread per waiting request; a cancelled request, a client
gone away, deletes its node first); sync routes, which Starlette runs on its
thread pool, block that thread (a sync ``Lock``).

The name is a ``str.format`` template (``LockNameTemplate``): over the
route's path parameters for the dependency and for a Starlette endpoint
that takes the ``Request``; over the function's parameters for a FastAPI
endpoint. Each value is quoted into one node name.

Busy (held elsewhere past ``timeout``, 0 by default): ``LockBusy``, an
``HTTPException`` (423 by default) that is also a ``LockTimeout``; its body
says "busy" and names nobody. ZooKeeper unreachable (the client not
connected, or no answer to the attempt): ``LockUnavailable`` at once, 503
with ``Retry-After`` by default, also an ``UnavailableError``; never "busy",
never after a connection timeout. ``on_unavailable="run"`` runs WITHOUT the
lock, with a warning (work safe to run twice at once only).

Holding: the dependency's value, ``request.state.zk_lock`` (a Starlette
endpoint's request) and ``current_lock()`` give the held lock, for its
``fencing_token``, ``check()`` and ``lost``. The route is not interrupted
when the hold is lost: check before writes, or pass the token to storage.
Shared with the other faces through the kit: ``LockPlan`` / ``locked_call``
(the decorator), ``LockedBlock`` (the dependency and the block),
``LockTarget`` (taking the lock, outages), ``HeldLocks``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal, ParamSpec, TypeVar

from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request

from zk_recipes import (
    ConfigurationError,
    LockTimeout,
    RecipeUsageError,
    UnavailableError,
    WrongTypeError,
    aio,
)
from zk_recipes.frameworks import (
    RETRY_AFTER,
    HeldLock,
    HeldLocks,
    LockedBlock,
    LockNameTemplate,
    LockPlan,
    LockTarget,
    OnUnavailable,
    check_identifier,
    check_on_busy,
    check_on_unavailable,
    lock_block,
    locked_call,
    qualified_name,
)
from zk_recipes_starlette._state import state_of

P = ParamSpec("P")
R = TypeVar("R")

log = logging.getLogger("zk_recipes.starlette")

_held = HeldLocks(
    "zk_recipes_starlette.held",
    log,
    "current_lock(): no lock is held in this context; call it in a route that depends on "
    "zk_lock(...), is decorated with @zk.locked, or inside `async with zk.lock(...)`",
)
#: Set on a function ``@zk.locked`` wrapped: its lock's name. Found as a route's
#: endpoint itself (the decorator above the route's), it would run unlocked.
LOCKED_MARK = "__zk_recipes_locked__"
#: Makes the lock of one call: ``(name, identifier, timeout) -> LockTarget``.
MakeTarget = Callable[[str, str | None, float | None], LockTarget]
#: The body of a busy answer and of an unavailable one: neither names the lock.
BUSY = "busy, try again shortly."
UNAVAILABLE = "try again shortly."


def current_lock() -> HeldLock:
    """The innermost lock a locked route or block holds in this task.

    An ``aio.Lock`` in async routes, a ``Lock`` in sync ones. Context-local:
    other requests see their own. RecipeUsageError when none is held.
    """
    return _held.current()


class LockBusy(LockTimeout, HTTPException):
    """A locked route refused a request: the lock is held elsewhere (423 by default).

    An ``HTTPException``: Starlette answers it with its ``status_code`` and a
    short plain-text body, FastAPI with ``{"detail": "busy, try again
    shortly."}``; neither names the lock or its holder. An app's exception
    handler for ``LockBusy`` (or 423) renders its own. A ``LockTimeout`` too,
    whose message names the lock, for logs and for code that catches it.
    """

    def __init__(self, message: str, status_code: int = 423) -> None:
        Exception.__init__(self, message)
        self.status_code = status_code
        self.detail = BUSY
        self.headers: Mapping[str, str] | None = None

    def __str__(self) -> str:
        return Exception.__str__(self)

    def __repr__(self) -> str:
        return f"<LockBusy {self.status_code}: {self}>"


class LockUnavailable(UnavailableError, HTTPException):
    """ZooKeeper is unreachable, in a locked route: 503 with ``Retry-After`` by default.

    An ``HTTPException`` answered at once with a body that says no more than
    busy's; an ``UnavailableError`` too, whose message names the ensemble and
    the problem, for logs and for code that catches it.
    """

    def __init__(self, message: str, problem: str | None = None, status_code: int = 503) -> None:
        UnavailableError.__init__(self, message, problem)
        self.status_code = status_code
        self.detail = UNAVAILABLE
        self.headers = {"Retry-After": str(RETRY_AFTER)} if status_code == 503 else None

    def __str__(self) -> str:
        return UnavailableError.__str__(self)

    def __repr__(self) -> str:
        return f"<LockUnavailable {self.status_code}: {self}>"


def _refuse(status: int, target: LockTarget, args: Sequence[Any]) -> Any:
    raise LockBusy(target.refusal(), status)


def _unavailable(status: int, exc: UnavailableError, args: Sequence[Any]) -> Any:
    raise _unavailable_error(status, exc)


def _unavailable_error(status: int, exc: UnavailableError) -> UnavailableError:
    return LockUnavailable(str(exc), exc.problem, status)


def _request_in(values: Sequence[Any]) -> HTTPConnection | None:
    return next((v for v in values if isinstance(v, HTTPConnection)), None)


def _attach_to_request(args: Sequence[Any]) -> Callable[[HeldLock], Callable[[], None]] | None:
    """``request.state.zk_lock`` while a Starlette endpoint holds its lock."""
    request = _request_in(args)
    if request is None:
        return None

    def attach(lock: HeldLock) -> Callable[[], None]:
        request.state.zk_lock = lock
        return lambda: delattr(request.state, "zk_lock")

    return attach


def _path_parameters(**path_params: Any) -> None:
    """What a template over a route's path parameters is checked against: any name."""


class RouteName(LockNameTemplate):
    """A locked route's lock name: over the function's parameters (FastAPI's view of a
    route), or over the request's path parameters when the function takes the
    ``Request`` and a field is none of its parameters (a Starlette endpoint)."""

    def __init__(self, text: str, func: Callable[..., Any]) -> None:
        where = qualified_name(func)
        try:
            super().__init__(text, func, where)
            self._from_path = False
        except ConfigurationError:
            if not _takes_request(func):
                raise
            super().__init__(text, _path_parameters, where)
            self._from_path = True

    def render(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        if not self._from_path:
            return super().render(args, kwargs)
        request = _request_in((*args, *kwargs.values()))
        if request is None:
            raise RecipeUsageError(
                f"lock name {self.text!r} of {self.where} is filled from the request's path "
                "parameters, and this call was given no Request"
            )
        return super().render((), request.path_params)


def _takes_request(func: Callable[..., Any]) -> bool:
    params = inspect.signature(func).parameters.values()
    return any(p.name == "request" or p.annotation in (Request, "Request") for p in params)


def locked(
    make_target: MakeTarget,
    name: str,
    *,
    timeout: float | None = 0.0,
    on_busy: int | Callable[..., Any] = 423,
    on_unavailable: OnUnavailable = 503,
    identifier: str | None = None,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``ZkRecipes.locked``: see its docstring and the module's."""
    if not isinstance(name, str):
        raise WrongTypeError(
            f"zk.locked needs a lock name first, like @zk.locked('invoice-{{id}}'), got {name!r}"
        )
    wait = LockTarget.check_timeout(timeout)
    check_on_busy(on_busy)
    check_on_unavailable(on_unavailable)
    check_identifier(identifier)

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if not callable(func):
            raise WrongTypeError(f"zk.locked decorates a route's function, got {func!r}")
        plan = LockPlan(
            RouteName(name, func),
            wait,
            on_busy,
            identifier,
            _held,
            make_target=make_target,
            refuse=_refuse,
            attach=_attach_to_request,
            on_unavailable=on_unavailable,
            unavailable=_unavailable,
        )
        wrapper = locked_call(func, plan, is_async=inspect.iscoroutinefunction(func))
        setattr(func, LOCKED_MARK, name)  # after wrapping: the wrapper must not carry it
        return wrapper

    return decorate


def block(
    make_target: MakeTarget,
    name: str,
    *,
    timeout: float | None = None,
    on_unavailable: int | Literal["raise", "run"] = 503,
    identifier: str | None = None,
    where: str = "?",
) -> LockedBlock[Any]:
    """``ZkRecipes.lock`` and the dependency's hold: the kit's block with this face's answers."""
    return lock_block(
        make_target,
        _held,
        name,
        timeout=timeout,
        on_unavailable=on_unavailable,
        identifier=identifier,
        where=where,
        unavailable=_unavailable_error,
    )


def zk_lock(
    name: str,
    *,
    timeout: float | None = 0.0,
    on_busy: int = 423,
    on_unavailable: int | Literal["raise", "run"] = 503,
    identifier: str | None = None,
) -> Callable[[Request], AsyncIterator[aio.Lock | None]]:
    """A FastAPI dependency that holds the lock ``name`` while the route runs.

    ``lock: aio.Lock = Depends(zk_lock("invoice-{id}"))``: the name is a
    template over the route's path parameters. ``timeout``: seconds to wait,
    0 (default) not to wait, None without limit; then ``on_busy`` (a status,
    423 by default) answers the request. ZooKeeper unreachable:
    ``on_unavailable`` (503 with ``Retry-After`` by default, at once;
    ``"raise"``; ``"run"`` WITHOUT the lock, the dependency giving None, with
    a warning). Released when FastAPI ends the dependency, after the route
    returned. ``identifier`` goes into the lock node (default: the route's
    function). The app's ``ZkRecipes`` is the one its lifespan started
    (``state_of``).
    """
    if not isinstance(name, str):
        raise WrongTypeError(
            f"zk_lock needs a lock name, like Depends(zk_lock('invoice-{{id}}')), got {name!r}"
        )
    template = LockNameTemplate(name, _path_parameters, f"zk_lock({name!r})")
    wait = LockTarget.check_timeout(timeout)
    if callable(on_busy) or not isinstance(on_busy, int):
        raise WrongTypeError(
            f"zk_lock(on_busy=) is an HTTP status (like 423 or 409), got {on_busy!r}: a "
            "dependency cannot answer in the route's place (use @zk.locked for that)"
        )
    check_on_busy(on_busy)
    if callable(on_unavailable):
        raise WrongTypeError(
            'zk_lock(on_unavailable=) is a status (like 503), "raise" or "run", got a callable'
        )
    check_on_unavailable(on_unavailable)
    check_identifier(identifier)

    async def hold_lock(request: Request) -> AsyncIterator[aio.Lock | None]:
        state = state_of(request.app)
        rendered = template.render((), request.path_params)
        endpoint = request.scope.get("endpoint")
        where = qualified_name(endpoint) if endpoint is not None else template.where
        held = block(
            state.make_target,
            rendered,
            timeout=wait,
            on_unavailable=on_unavailable,
            identifier=identifier or where,
            where=where,
        )
        try:
            lock = await held.__aenter__()
        except LockBusy:
            raise
        except LockTimeout as exc:  # not acquired in time: the route answers busy
            raise LockBusy(str(exc), on_busy) from None
        try:
            yield lock
        finally:
            await held.__aexit__(None, None, None)

    hold_lock.__qualname__ = f"zk_lock({name!r})"
    return hold_lock
