"""@singleton_task: at most one run of a task (per key) at a time, cluster-wide.

The lock is taken when the task RUNS, by the process that runs it, with its
own ZooKeeper session: a Lock (Curator InterProcessMutex layout) on

    <prefix>/singleton/<task name>/<key>       CONTAINER parents
        _c_<uuid>-lock-<seq>                   EPHEMERAL_SEQUENTIAL, data: owner JSON with
                                               the task id as "id"

``<key>`` is ``task`` for one lock per task name, or the SHA-256 of the
canonical JSON of the key's arguments. The parents are containers, so the
server removes a key's directory once its last run is over: millions of keys
leave nothing behind.

Why at run time: a lock taken at publish belongs to the publisher (a web
process, beat), not to the worker that later runs the task, so it cannot die
with that worker and needs a TTL to guess (the top complaint of celery-once
and celery-singleton). Ours is released in every exit path of the run
(return, exception, ``self.retry()``, ``Reject``, soft time limit); SIGTERM
(``revoke(terminate=True)``) closes the session first (see _lifecycle); kill
-9, OOM and the hard time limit end the session, and the lock goes when the
server expires it: within the session timeout, no TTL to guess.

A redelivered copy of the SAME task id (``acks_late`` after a worker died)
finds the dead run's node, whose owner data carries that task id: it waits
for that session to expire instead of being skipped, so the work is not lost.

On conflict: ``skip`` (return ``skip_result``; never breaks a chord, unlike
``Ignore``), ``wait`` (up to ``wait_timeout``), ``retry`` (``self.retry`` with
a jittered countdown) or ``raise`` (SingletonBusy).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import dataclasses
import functools
import inspect
import logging
import random
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any, TypeVar, overload

import celery
from celery import current_task

from zk_recipes import (
    ConfigurationError,
    Lock,
    LockLost,
    RecipeUsageError,
    ZkRecipesError,
)
from zk_recipes_celery import _metrics
from zk_recipes_celery._keys import KeySpec, check_key_names, key_segment
from zk_recipes_celery._lifecycle import app_state

log = logging.getLogger("zk_recipes.celery.singleton")

F = TypeVar("F", bound=Callable[..., Any])

CONFLICT_POLICIES = ("skip", "wait", "retry", "raise")
LOST_POLICIES = ("flag", "abort")
_MARK = "__zk_recipes_singleton__"


class SingletonBusy(ZkRecipesError):
    """Another run holds this task's key (``on_conflict="raise"``, or a wait timed out)."""

    def __init__(self, message: str = "", *, holder: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.holder = holder or {}


class SingletonAborted(LockLost):
    """Raised inside a run with ``on_lost="abort"`` when its session was lost."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "the singleton lock of this task run was lost with its ZooKeeper session; "
            "another run may be executing now, so this one was aborted (on_lost='abort')"
        )


@dataclasses.dataclass(frozen=True)
class SingletonOptions:
    """How a singleton task locks; checked once, when the task is defined."""

    key: KeySpec = None
    on_conflict: str = "skip"
    wait_timeout: float = 60.0
    retry_countdown: float = 5.0
    max_retries: int | None = None
    skip_result: Any = None
    on_lost: str = "flag"
    redelivery_wait: float | None = None

    def __post_init__(self) -> None:
        if self.on_conflict not in CONFLICT_POLICIES:
            raise ConfigurationError(
                f"on_conflict must be one of {CONFLICT_POLICIES}, got {self.on_conflict!r}"
            )
        if self.on_lost not in LOST_POLICIES:
            raise ConfigurationError(
                f"on_lost must be one of {LOST_POLICIES}, got {self.on_lost!r}"
            )
        for name in ("wait_timeout", "retry_countdown"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ConfigurationError(f"{name} must be seconds >= 0, got {value!r}")
        if self.redelivery_wait is not None and not (
            isinstance(self.redelivery_wait, (int, float)) and self.redelivery_wait >= 0
        ):
            raise ConfigurationError(
                f"redelivery_wait must be seconds >= 0 or None, got {self.redelivery_wait!r}"
            )
        key = self.key
        if (key is not None and not callable(key)) and (
            isinstance(key, str) or not all(isinstance(k, str) for k in key)
        ):
            raise ConfigurationError(
                f"key must be a list of argument names or a callable, got {key!r} "
                "(for one argument write key=['name'])"
            )


class SingletonRun:
    """What the running task sees: ``current_singleton()`` with its token and ``lost`` flag."""

    def __init__(self, lock: Lock, task_id: str | None, key_path: str) -> None:
        self._lock = lock
        self.task_id = task_id
        #: The lock's path: ``<prefix>/singleton/<task name>/<key>``.
        self.key_path = key_path
        #: The lock node's czxid: strictly increasing per key across the cluster.
        #: Pass it to storage that can refuse writes with an older token.
        self.fencing_token = lock.fencing_token

    @property
    def lost(self) -> bool:
        """True once the session was lost during the run: another run may hold the key now."""
        return self._lock.lost.is_set()

    @property
    def held(self) -> bool:
        """True while the lock is held for sure (False while the connection is SUSPENDED)."""
        return self._lock.is_held()

    def check(self) -> None:
        """Raise LockLost if the lock was lost; call it before exclusive side effects."""
        self._lock.check()

    def __repr__(self) -> str:
        return (
            f"<SingletonRun {self.key_path} task_id={self.task_id} "
            f"token={self.fencing_token} lost={self.lost}>"
        )


_current: contextvars.ContextVar[SingletonRun | None] = contextvars.ContextVar(
    "zk_recipes_singleton_run", default=None
)


def current_singleton() -> SingletonRun:
    """The singleton run of the task executing in this thread; RecipeUsageError outside one."""
    run = _current.get()
    if run is None:
        raise RecipeUsageError(
            "current_singleton() is only available inside the body of a singleton task"
        )
    return run


# -- the guarded run ----------------------------------------------------------
class _Interrupter:
    """Raises SingletonAborted in the thread running the task, at its next bytecode.

    Armed only while the body runs: ``disarm()`` also withdraws an exception
    not delivered yet, so it can never land in Celery's tracer or a later task.
    """

    def __init__(self) -> None:
        self._thread_id = threading.get_ident()
        self._guard = threading.Lock()
        self._armed = True

    def fire(self, _lock: object = None) -> None:
        with self._guard:
            if self._armed:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(self._thread_id), ctypes.py_object(SingletonAborted)
                )

    def disarm(self) -> None:
        with self._guard:
            if self._armed:
                self._armed = False
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id), None)


def _holder(lock: Lock) -> dict[str, Any] | None:
    try:
        for contender in lock.contenders():
            if contender.is_holder:
                return contender.owner
    except ZkRecipesError:
        log.debug("reading the holder of %s failed", lock.path, exc_info=True)
    return None


def run_guarded(
    task: Any,
    options: SingletonOptions,
    key_fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    call: Callable[[], Any],
) -> Any:
    """Run ``call()`` holding the singleton lock of this call's key, per ``options``."""
    request = task.request
    state = app_state(task.app)
    config = state.config
    direct = bool(getattr(request, "called_directly", True)) or bool(
        getattr(request, "is_eager", False)
    )
    if direct and config.singleton_eager == "bypass":
        return call()
    task_id: str | None = getattr(request, "id", None)
    name_segment = urllib.parse.quote(task.name, safe="")
    path = (
        f"{config.singleton_root}/{name_segment}/{key_segment(options.key, key_fn, args, kwargs)}"
    )
    client = state.clients.get()
    lock = Lock(client, path, identifier=task_id)
    acquired = lock.acquire(blocking=False)
    holder: dict[str, Any] | None = None
    if not acquired:
        holder = _holder(lock)
        if task_id is not None and holder is not None and holder.get("id") == task_id:
            # The same task id holds it: a redelivery after its worker died (the dead
            # session expires soon), or a retry published before our last attempt let go.
            wait = options.redelivery_wait
            if wait is None:
                wait = 2 * config.client.session_timeout + 1.0
            log.info(
                "singleton %s: task %s is redelivered while its earlier run still holds %s; "
                "waiting up to %.1fs for that run's session to end",
                task.name,
                task_id,
                path,
                wait,
            )
            acquired = lock.acquire(timeout=wait)
            holder = None if acquired else _holder(lock)
    if not acquired:
        _metrics.count("singleton_conflicts", task=task.name, policy=options.on_conflict)
        acquired = _on_conflict(task, options, lock, path, task_id, holder, direct)
        if not acquired:
            return options.skip_result
    return _run_holding(task, options, lock, path, task_id, call)


def _on_conflict(
    task: Any,
    options: SingletonOptions,
    lock: Lock,
    path: str,
    task_id: str | None,
    holder: dict[str, Any] | None,
    direct: bool,
) -> bool:
    """Apply the conflict policy: True if we hold the lock after all, False to skip."""
    who = _describe(holder)
    policy = options.on_conflict
    if policy == "wait":
        if lock.acquire(timeout=options.wait_timeout):
            return True
        raise SingletonBusy(
            f"{task.name}: {path} still held by {who} after waiting {options.wait_timeout:g}s",
            holder=holder,
        )
    busy = SingletonBusy(f"{task.name}: another run holds {path} ({who})", holder=holder)
    if policy == "raise":
        raise busy
    if policy == "retry" and not direct:
        countdown = options.retry_countdown * (1.0 + 0.5 * random.random())
        log.info(
            "singleton %s: %s is busy (%s); retrying in %.1fs", task.name, path, who, countdown
        )
        retry_options: dict[str, Any] = {"countdown": countdown, "exc": busy}
        if options.max_retries is not None:
            retry_options["max_retries"] = options.max_retries
        raise task.retry(**retry_options)
    if policy == "retry":  # eager or direct call: there is no queue to retry through
        raise busy
    log.info("singleton %s: skipped task %s, %s is held by %s", task.name, task_id, path, who)
    _metrics.count("singleton_skipped", task=task.name)
    _metrics.singleton_skipped.send(sender=task, task_id=task_id, key_path=path, holder=holder)
    return False


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "another process"
    parts = [
        f"task {holder['id']}" if holder.get("id") else "",
        str(holder.get("host") or ""),
        f"pid {holder['pid']}" if holder.get("pid") else "",
    ]
    return " ".join(p for p in parts if p) or "another process"


def _run_holding(
    task: Any,
    options: SingletonOptions,
    lock: Lock,
    path: str,
    task_id: str | None,
    call: Callable[[], Any],
) -> Any:
    run = SingletonRun(lock, task_id, path)
    interrupter = _Interrupter() if options.on_lost == "abort" else None
    if interrupter is not None:
        lock.on_lost(interrupter.fire)
    token = _current.set(run)
    request = task.request
    with contextlib.suppress(AttributeError):  # Celery's Context takes any attribute
        request.zk_singleton = run
    try:
        return call()
    finally:
        if interrupter is not None:
            interrupter.disarm()
        _current.reset(token)
        if run.lost:
            log.warning(
                "singleton %s: the lock %s was lost during task %s (session expired); "
                "another run may have overlapped this one",
                task.name,
                path,
                task_id,
            )
        lock.release()


def _is_body_of(task: Any, body: Callable[..., Any]) -> bool:
    """True if ``body`` is what ``task`` runs (autoretry_for keeps it as ``_orig_run``)."""
    for attr in ("run", "_orig_run"):
        fn = getattr(task, attr, None)
        if fn is not None and getattr(fn, "__func__", fn) is body:
            return True
    return False


# -- the two front doors --------------------------------------------------------
@overload
def singleton_task(fn: F) -> F: ...


@overload
def singleton_task(
    fn: None = None,
    *,
    key: KeySpec = None,
    on_conflict: str = "skip",
    wait_timeout: float = 60.0,
    retry_countdown: float = 5.0,
    max_retries: int | None = None,
    skip_result: Any = None,
    on_lost: str = "flag",
    redelivery_wait: float | None = None,
) -> Callable[[F], F]: ...


def singleton_task(
    fn: F | None = None,
    *,
    key: KeySpec = None,
    on_conflict: str = "skip",
    wait_timeout: float = 60.0,
    retry_countdown: float = 5.0,
    max_retries: int | None = None,
    skip_result: Any = None,
    on_lost: str = "flag",
    redelivery_wait: float | None = None,
) -> Any:
    """Make a task run at most once at a time cluster-wide; stack it under ``@app.task``::

        @app.task(bind=True)
        @singleton_task(key=["account_id"])
        def sync_account(self, account_id): ...

    See the module docstring and docs/celery.md for the options.
    """
    options = SingletonOptions(
        key=key,
        on_conflict=on_conflict,
        wait_timeout=wait_timeout,
        retry_countdown=retry_countdown,
        max_retries=max_retries,
        skip_result=skip_result,
        on_lost=on_lost,
        redelivery_wait=redelivery_wait,
    )

    def decorate(func: F) -> F:
        if isinstance(func, celery.Task):
            raise ConfigurationError(
                "@singleton_task goes UNDER @app.task (closer to the function), "
                "or use @app.task(base=SingletonTask)"
            )
        check_key_names(options.key, func)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            task = current_task._get_current_object()
            if task is None or not _is_body_of(task, wrapper):
                raise RecipeUsageError(
                    f"{func.__qualname__} is a singleton task body: call the task "
                    "(task(...), task.delay(...)), not task.run(...)"
                )
            key_args = args
            if args and args[0] is task:  # bind=True: the key never includes self
                key_args = args[1:]
                key_fn: Callable[..., Any] = functools.partial(func, task)
            else:
                key_fn = func
            return run_guarded(
                task, options, key_fn, key_args, kwargs, lambda: func(*args, **kwargs)
            )

        # Celery checks call arguments against getfullargspec(), which ignores
        # __wrapped__ but honours __signature__.
        wrapper.__signature__ = inspect.signature(func)  # type: ignore[attr-defined]
        setattr(wrapper, _MARK, options)
        return wrapper  # type: ignore[return-value]

    if fn is not None:
        return decorate(fn)
    return decorate


class SingletonTask(celery.Task):  # type: ignore[misc]
    """Task base class form: ``@app.task(base=SingletonTask, singleton_key=["account_id"])``.

    Class attributes ``singleton_<option>`` set the options of ``@singleton_task``.
    """

    singleton_key: KeySpec = None
    singleton_on_conflict = "skip"
    singleton_wait_timeout = 60.0
    singleton_retry_countdown = 5.0
    singleton_max_retries: int | None = None
    singleton_skip_result: Any = None
    singleton_on_lost = "flag"
    singleton_redelivery_wait: float | None = None

    _singleton_options: SingletonOptions | None = None

    def _options(self) -> SingletonOptions:
        options = self._singleton_options
        if options is None:
            options = SingletonOptions(
                key=self.singleton_key,
                on_conflict=self.singleton_on_conflict,
                wait_timeout=self.singleton_wait_timeout,
                retry_countdown=self.singleton_retry_countdown,
                max_retries=self.singleton_max_retries,
                skip_result=self.singleton_skip_result,
                on_lost=self.singleton_on_lost,
                redelivery_wait=self.singleton_redelivery_wait,
            )
            check_key_names(options.key, self.run)
            if hasattr(self.run, _MARK):
                raise ConfigurationError(
                    f"{self.name} uses both base=SingletonTask and @singleton_task: pick one"
                )
            type(self)._singleton_options = options
        return options

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return run_guarded(
            self,
            self._options(),
            self.run,
            args,
            kwargs,
            lambda: super(SingletonTask, self).__call__(*args, **kwargs),
        )

    @property
    def singleton(self) -> SingletonRun:
        """The current run's lock: ``self.singleton.fencing_token`` in a bound task."""
        return current_singleton()
