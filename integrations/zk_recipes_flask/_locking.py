"""Locks around views and code: ``@zk.locked("invoice-{id}")`` and ``with zk.lock("x")``.

Each call takes a new ``zk_recipes.Lock`` on ``<prefix>/locks/<name>``
(``zk_recipes.frameworks.lock_path`` with the app's ``ZK_RECIPES_PREFIX``) with the
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
runs on an event loop of their own through asgiref, an ``aio.Lock`` waiting
on that loop, so the loop goes on, and a cancelled waiter leaves no node).

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

Outages: while the app's client is not connected (never reached,
SUSPENDED, LOST and reconnecting), or ZooKeeper does not answer the attempt,
``on_unavailable`` answers at once, never "busy" and never after a
connection timeout: a status (503 by default) raises ``LockUnavailable``
in a request, an ``HTTPException`` with ``Retry-After`` that is also an
``UnavailableError`` (outside a request, a plain ``UnavailableError``);
"raise", "run" (WITHOUT the lock, with a warning) or a callable.

Order: ``@zk.locked`` goes *below* ``@app.route``. Above it, the route
registers the bare function and no request would ever take the lock: the
decorator refuses a function already registered as a view of an app this
extension serves, and a request that reaches such a view fails with the
fix (``check_view``).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

from flask import Flask, g, has_app_context, has_request_context, request
from werkzeug.exceptions import HTTPException, default_exceptions

from zk_recipes import LockTimeout, RecipeUsageError, UnavailableError, WrongTypeError
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
)
from zk_recipes_flask._state import AppState

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

P = ParamSpec("P")
R = TypeVar("R")

_held = HeldLocks(
    "zk_recipes_flask.held",
    logging.getLogger("zk_recipes.flask"),
    "current_lock(): no lock is held in this context; call it inside a function "
    "decorated with @zk.locked or inside a `with zk.lock(...)` block (a thread started "
    "there does not inherit the context: pass it the lock)",
)
_ABSENT = object()
#: Set on a function ``@zk.locked`` wrapped: its lock's name. Registered as a
#: view itself (the decorator above ``@app.route``), it would run unlocked.
LOCKED_MARK = "__zk_recipes_locked__"


def current_lock() -> HeldLock:
    """The innermost lock that ``@zk.locked`` or ``zk.lock()`` holds in this thread or task.

    For its ``fencing_token`` and ``check()`` deep in the code a view calls.
    Context-local: other requests, threads and tasks see their own locks
    (``asyncio.to_thread`` and asgiref carry the context along; a bare
    ``threading.Thread`` does not). RecipeUsageError when none is held.
    """
    return _held.current()


class _PlainAnswer(HTTPException):
    """A refusal's answer: one plain-text line, ``"<status>: <description>"``.

    It names neither the lock nor its holder nor the ensemble (the
    exception's message, for logs, does): a client learns no more than the
    status says.
    """

    def get_body(
        self, environ: WSGIEnvironment | None = None, scope: dict[str, Any] | None = None
    ) -> str:
        return f"{self.name}: {self.description}\n"

    def get_headers(
        self, environ: WSGIEnvironment | None = None, scope: dict[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        return [("Content-Type", "text/plain; charset=utf-8")]


class LockBusy(LockTimeout, _PlainAnswer):
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

    def __repr__(self) -> str:
        return f"<LockBusy {self.code}: {self}>"


class LockUnavailable(UnavailableError, _PlainAnswer):
    """ZooKeeper is unavailable, in a request: an ``HTTPException`` (503 by default).

    Flask answers it with its ``code`` (``on_unavailable``), a short
    plain-text body and, for 503, ``Retry-After``; an app's
    ``@app.errorhandler(LockUnavailable)`` (or ``errorhandler(503)``)
    renders its own. An ``UnavailableError`` too, whose message names the
    ensemble and the problem, for logs and for code that catches it.
    """

    code = 503
    description = "try again shortly."
    response = None

    def __init__(self, message: str, problem: str | None = None) -> None:
        # Not through werkzeug's __init__ (the 503 class would take the message,
        # which names the ensemble, for the body): the body says no more than busy's.
        Exception.__init__(self, message)
        self.problem = problem

    def get_headers(
        self, environ: WSGIEnvironment | None = None, scope: dict[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        headers = super().get_headers(environ, scope)
        if self.code == 503:
            headers.append(("Retry-After", str(RETRY_AFTER)))
        return headers

    def __str__(self) -> str:
        return UnavailableError.__str__(self)

    def __repr__(self) -> str:
        return f"<LockUnavailable {self.code}: {self}>"


@functools.cache
def _unavailable_class(status: int) -> type[LockUnavailable]:
    """The LockUnavailable raised for ``status`` (werkzeug's class for it among its bases)."""
    known = default_exceptions.get(status)
    bases: tuple[type, ...] = (LockUnavailable,) if known is None else (LockUnavailable, known)
    namespace = {
        "code": status,
        "__module__": LockUnavailable.__module__,
        "__qualname__": "LockUnavailable",
    }
    return type("LockUnavailable", bases, namespace)


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


#: The current app's state, as the extension finds it (``ZkRecipes.state``).
StateOf = Callable[[], AppState]


def locked(
    state_of: StateOf,
    name: str,
    *,
    timeout: float | None = 0.0,
    on_busy: int | Callable[..., Any] = 423,
    on_unavailable: OnUnavailable = 503,
    identifier: str | None = None,
    apps: Callable[[], Sequence[Flask]] = tuple,
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``ZkRecipes.locked``: see its docstring and the module's.

    ``apps()`` gives the apps the extension serves, to refuse a function
    already registered as one of their views.
    """
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
            raise WrongTypeError(f"zk.locked decorates a function or a view, got {func!r}")
        for app in apps():
            endpoint = _endpoint_of(app, func)
            if endpoint is not None:
                raise RecipeUsageError(_misordered(name, endpoint))
        plan = LockPlan(
            LockNameTemplate(name, func),
            wait,
            on_busy,
            identifier,
            _held,
            make_target=functools.partial(_target, state_of),
            refuse=_refuse,
            attach=_attach_to_g,
            on_unavailable=on_unavailable,
            unavailable=_unavailable,
        )
        wrapper = locked_call(func, plan, is_async=inspect.iscoroutinefunction(func))
        setattr(func, LOCKED_MARK, name)  # after wrapping: the wrapper must not carry it
        return wrapper

    return decorate


def check_view(app: Flask) -> None:
    """Before a request: refuse it when its view is a function ``@zk.locked`` wrapped.

    That function was registered as the view itself (``@zk.locked`` above
    ``@app.route`` or ``@bp.route``), so the request would run without the lock.
    """
    endpoint = request.endpoint
    view = app.view_functions.get(endpoint) if endpoint is not None else None
    name = getattr(view, LOCKED_MARK, None)
    if name is not None and endpoint is not None:
        raise RecipeUsageError(_misordered(name, endpoint))


def _endpoint_of(app: Flask, func: object) -> str | None:
    for endpoint, view in app.view_functions.items():
        if view is func:
            return endpoint
    return None


def _misordered(name: str, endpoint: str) -> str:
    return (
        f"@zk.locked({name!r}) wraps the view {endpoint!r} after the route registered it, so "
        "requests would run it WITHOUT the lock: put @zk.locked below @app.route (or "
        "@bp.route), nearer the function"
    )


def lock(
    state_of: StateOf,
    name: str,
    *,
    timeout: float | None = None,
    on_unavailable: int | Literal["raise", "run"] = 503,
    identifier: str | None = None,
    where: str = "?",
) -> LockedBlock[Any]:
    """``ZkRecipes.lock``: see its docstring."""
    return lock_block(
        functools.partial(_target, state_of),
        _held,
        name,
        timeout=timeout,
        on_unavailable=on_unavailable,
        identifier=identifier,
        where=where,
        unavailable=_unavailable_error,
    )


def _target(
    state_of: StateOf, name: str, identifier: str | None, timeout: float | None
) -> LockTarget:
    """The lock ``name`` of the current app: its prefix now, its client on the waiting thread."""
    state = state_of()
    return LockTarget(
        name,
        state.process_client,
        prefix=state.config.prefix,
        identifier=identifier,
        timeout=timeout,
    )


def _refuse(status: int, target: LockTarget, args: Sequence[Any]) -> Any:
    """In a request: LockBusy, which Flask answers with ``status``; else LockTimeout."""
    if has_request_context():
        raise _busy_class(status)(target.refusal())
    raise LockTimeout(target.refusal())


def _unavailable(status: int, exc: UnavailableError, args: Sequence[Any]) -> Any:
    """In a request: LockUnavailable, which Flask answers with ``status``; else the error."""
    raise _unavailable_error(status, exc)


def _unavailable_error(status: int, exc: UnavailableError) -> UnavailableError:
    if has_request_context():
        return _unavailable_class(status)(str(exc), exc.problem)
    return exc


def _attach_to_g(args: Sequence[Any]) -> Callable[[HeldLock], Callable[[], None]]:
    """``g.zk_lock`` while a decorated call holds its lock, in an app context."""

    def attach(lock: HeldLock) -> Callable[[], None]:
        if not has_app_context():
            return lambda: None
        before = g.get("zk_lock", _ABSENT)
        g.zk_lock = lock

        def detach() -> None:
            if before is _ABSENT:
                g.pop("zk_lock", None)
            else:
                g.zk_lock = before

        return detach

    return attach
