"""Locks around views and functions: ``@zk_lock("invoice-{pk}")`` and ``with locked("x")``.

Each call takes a new ``zk_recipes.Lock`` on ``<prefix>/locks/<name>`` with
the alias's process client, runs the function while holding it and releases
it in ``finally``. That is the node directory of ``manage.py zklock NAME``
and ``zk-recipes lock NAME``, so the three exclude each other. A new Lock per
call, never a shared one: a Lock object is one contender per process and is
not re-entrant per thread.

Names: the decorator's name is a ``str.format`` template over the function's
parameters, its values quoted into one node name
(``zk_recipes.frameworks.LockNameTemplate``). Async functions wait on the
event loop with an ``aio.Lock`` (no thread per waiting request), and a
cancelled waiter leaves no node behind (``zk_recipes.frameworks.LockTarget``).
The hold, run and release themselves are the framework kit's
(``zk_recipes.frameworks.locked_call``, ``LockedBlock``), shared with Flask's
``@zk.locked``; this module adds Django's answers: the alias, the response
when busy, ``request.zk_lock``.

Holding: ``request.zk_lock`` (views) and ``current_lock()`` (a context
variable: the innermost lock held in this thread or task) give the held Lock,
for its ``fencing_token`` and ``check()``. SUSPENDED puts the hold in doubt
and LOST ends it, as for any ``zk_recipes.Lock``; the function is not
interrupted, so it calls ``check()`` before writes or passes the fencing token
to storage. A loss is logged as a warning (logger ``zk_recipes.django``) when
the function returns. No Curator counterpart: this is a framework face of
InterProcessMutex (``zk_recipes.Lock``).

Outages: while the alias's client is not connected (never reached,
SUSPENDED, LOST and reconnecting), or ZooKeeper does not answer the attempt,
a decorated view answers at once with ``on_unavailable`` (503 with
``Retry-After`` by default; "raise", "run" or a callable), never "busy" and
never after a connection timeout; a plain function raises
``UnavailableError``. ``locked()`` raises it (or, with "run", runs the
block without the lock). See ``zk_recipes.frameworks.LockTarget``.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal, ParamSpec, TypeVar, overload

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse

from zk_recipes import Lock, LockTimeout, UnavailableError, WrongTypeError
from zk_recipes.frameworks import (
    RETRY_AFTER,
    HeldLock,
    HeldLocks,
    LockedBlock,
    LockNameTemplate,
    LockPlan,
    LockTarget,
    OnUnavailable,
    check_on_busy,
    check_on_unavailable,
    locked_call,
)
from zk_recipes_django import _settings
from zk_recipes_django._clients import process_client

P = ParamSpec("P")
R = TypeVar("R")

_held = HeldLocks(
    "zk_recipes_django.held",
    logging.getLogger("zk_recipes.django"),
    "current_lock(): no lock is held in this context; call it inside a function "
    "decorated with @zk_lock or inside a `with locked(...)` block (a thread started "
    "there does not inherit the context: pass it the lock)",
)
_ABSENT = object()


def current_lock() -> HeldLock:
    """The innermost lock that ``@zk_lock`` or ``locked()`` holds in this thread or task.

    For its ``fencing_token`` and ``check()`` deep in the code a view calls.
    Context-local: other threads and tasks see their own locks (code run
    through ``sync_to_async``/``async_to_sync`` or ``asyncio.to_thread``
    carries the context along; a bare ``threading.Thread`` does not).
    RecipeUsageError when none is held.
    """
    return _held.current()


def zk_lock(
    name: str,
    *,
    timeout: float | None = 0.0,
    on_busy: int | Callable[..., Any] = 423,
    on_unavailable: OnUnavailable = 503,
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

    When ZooKeeper is unavailable (the client is not connected, or did not
    answer the attempt), ``on_unavailable`` decides, at once: a status
    (default 503 Service Unavailable, with ``Retry-After``) for a view and
    ``UnavailableError`` for a plain function; ``"raise"``; ``"run"`` (runs
    WITHOUT the lock, with a warning: only for work that is safe to run
    twice at once); or a callable, as ``on_busy``'s.

    Sync and async functions alike. The lock is released when the view
    returns, before the body of a ``StreamingHttpResponse`` is produced. See
    the module docstring and docs/integrations/django.md.
    """
    if not isinstance(name, str):
        raise WrongTypeError(
            f"zk_lock needs a lock name first, like @zk_lock('invoice-{{pk}}'), got {name!r}"
        )
    wait = LockTarget.check_timeout(timeout)
    check_on_busy(on_busy)
    check_on_unavailable(on_unavailable)
    _check_str("alias", alias)
    if identifier is not None:
        _check_str("identifier", identifier)

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        if not callable(func):
            raise WrongTypeError(f"zk_lock decorates a function or a view, got {func!r}")
        template = LockNameTemplate(name, func)
        plan = LockPlan(
            template,
            wait,
            on_busy,
            identifier,
            _held,
            make_target=functools.partial(_lock_target, alias=alias),
            refuse=_refuse,
            attach=_attach_to_request,
            on_unavailable=on_unavailable,
            unavailable=_unavailable,
        )
        _settings.note_use(alias, template.where)
        return locked_call(func, plan, is_async=iscoroutinefunction(func))

    return decorate


@overload
def locked(
    name: str,
    *,
    timeout: float | None = None,
    on_unavailable: Literal["raise"] = "raise",
    alias: str = _settings.DEFAULT_ALIAS,
    identifier: str | None = None,
) -> LockedBlock[Lock]: ...


@overload
def locked(
    name: str,
    *,
    timeout: float | None = None,
    on_unavailable: Literal["run"],
    alias: str = _settings.DEFAULT_ALIAS,
    identifier: str | None = None,
) -> LockedBlock[Lock | None]: ...


def locked(
    name: str,
    *,
    timeout: float | None = None,
    on_unavailable: Literal["raise", "run"] = "raise",
    alias: str = _settings.DEFAULT_ALIAS,
    identifier: str | None = None,
) -> LockedBlock[Lock] | LockedBlock[Lock | None]:
    """``with locked("nightly-report") as lock:`` (or ``async with``): hold a lock for a block.

    ``name`` is taken literally (no template). Waits up to ``timeout`` seconds
    (None: without limit, 0: not at all) and raises ``LockTimeout`` if not
    acquired in time. Yields the held ``zk_recipes.Lock`` (``fencing_token``,
    ``check()``), which ``current_lock()`` also returns inside the block. The
    async form waits on the loop and gives an ``aio.Lock``. One block per call.

    When ZooKeeper is unavailable it raises ``UnavailableError`` at once
    (``on_unavailable="raise"``); with ``"run"`` the block runs WITHOUT the
    lock and gets None, with a warning.
    """
    if not isinstance(name, str):
        raise WrongTypeError(
            f"locked() needs a lock name, like locked('nightly-report'), got {name!r}"
        )
    wait = LockTarget.check_timeout(timeout)
    check_on_unavailable(on_unavailable, statuses=False)
    _check_str("alias", alias)
    if identifier is not None:
        _check_str("identifier", identifier)
    caller = sys._getframe(1)
    code = caller.f_code
    where = f"{caller.f_globals.get('__name__', '?')}.{getattr(code, 'co_qualname', code.co_name)}"
    _settings.note_use(alias, where)
    return LockedBlock(
        functools.partial(_lock_target, name, identifier, wait, alias=alias),
        _held,
        where,
        label=f"locked {name!r} alias={alias!r}",
        call="locked()",
        on_unavailable=on_unavailable,
    )


def _lock_target(
    name: str, identifier: str | None, timeout: float | None, *, alias: str
) -> LockTarget:
    """The lock ``name`` of ``alias``: its prefix now, its client on the waiting thread."""
    prefix = _settings.config(alias).prefix
    client = process_client(alias)
    return LockTarget(name, client, prefix=prefix, identifier=identifier, timeout=timeout)


def _refuse(status: int, target: LockTarget, args: Sequence[Any]) -> HttpResponse:
    """A view answers ``status``; any other function raises LockTimeout."""
    if _request_in(args) is None:
        raise LockTimeout(target.refusal())
    response = HttpResponse(status=status, content_type="text/plain; charset=utf-8")
    # Who holds it is nobody's business outside: the body says busy, nothing more.
    response.content = f"{response.reason_phrase}: busy, try again shortly.\n"
    return response


def _unavailable(status: int, exc: UnavailableError, args: Sequence[Any]) -> HttpResponse:
    """A view answers ``status`` with ``Retry-After``; any other function raises the error."""
    if _request_in(args) is None:
        raise exc
    response = HttpResponse(status=status, content_type="text/plain; charset=utf-8")
    response.content = f"{response.reason_phrase}: try again shortly.\n"
    if status == 503:
        response["Retry-After"] = str(RETRY_AFTER)
    return response


def _attach_to_request(args: Sequence[Any]) -> Callable[[HeldLock], Callable[[], None]] | None:
    """``request.zk_lock`` while a view holds its lock (the previous value put back after)."""
    request = _request_in(args)
    if request is None:
        return None

    def attach(lock: HeldLock) -> Callable[[], None]:
        before = request.__dict__.get("zk_lock", _ABSENT)
        request.zk_lock = lock

        def detach() -> None:
            if before is _ABSENT:
                request.__dict__.pop("zk_lock", None)
            else:
                request.zk_lock = before

        return detach

    return attach


def _check_str(what: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise WrongTypeError(f"{what} must be a non-empty string, got {value!r}")


def _request_in(args: Sequence[Any]) -> HttpRequest | None:
    """The request when the call is a view's: first argument, or second after self."""
    for arg in args[:2]:
        if isinstance(arg, HttpRequest):
            return arg
    return None
