"""A singleton task's run: its options, errors, and the run guarded by the lock.

``run_guarded`` takes the key's Lock (Curator InterProcessMutex layout) for
one run, applies the conflict policy when another run holds it, and lets the
body see its ``SingletonRun`` (fencing token, ``lost`` flag) through
``current_singleton()``. The front doors (``@singleton_task`` and
``SingletonTask``) in _singleton call it; the semantics are described there.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import random
import urllib.parse
from collections.abc import Callable
from typing import Any, Literal, get_args

from celery.exceptions import Retry

from zk_recipes import (
    ConfigurationError,
    Lock,
    LockTimeout,
    Owner,
    RecipeUsageError,
    ZkClient,
    ZkRecipesError,
    holders,
)
from zk_recipes_celery import _metrics
from zk_recipes_celery._abort import Interrupter, disarm_for_cleanup, pending
from zk_recipes_celery._keys import KeySpec, key_segment
from zk_recipes_celery._lifecycle import app_state
from zk_recipes_celery._queued_marker import QueuedMarker

log = logging.getLogger("zk_recipes.celery.singleton")

#: What a run does when another run holds its key (see ``_singleton``).
ConflictPolicy = Literal["skip", "wait", "retry", "raise"]
#: What a run does when its lock is lost with the session: set ``lost``, or abort.
LostPolicy = Literal["flag", "abort"]
#: The same, for the check of untyped callers' values.
CONFLICT_POLICIES: tuple[str, ...] = get_args(ConflictPolicy)
LOST_POLICIES: tuple[str, ...] = get_args(LostPolicy)


class SingletonBusy(LockTimeout):
    """Another run holds this task's key (``on_conflict="raise"``, or a wait timed out).

    A ``LockTimeout``, as "busy" is in every face (Django's and Flask's locked
    blocks raise one too), so ``except LockTimeout`` means the same everywhere.
    """

    def __init__(self, message: str = "", *, holder: Owner | None = None) -> None:
        super().__init__(message)
        #: Who holds the key (an empty Owner when it could not be read).
        self.holder = holder if holder is not None else Owner()


@dataclasses.dataclass(frozen=True)
class SingletonOptions:
    """How a singleton task locks; checked once, when the task is defined.

    The one place the options' defaults are written: ``@singleton_task(...)``
    and ``SingletonTask``'s ``singleton_<option>`` attributes pass only what the
    user gave.
    """

    key: KeySpec = None
    on_conflict: ConflictPolicy = "skip"
    wait_timeout: float = 60.0
    retry_countdown: float = 5.0
    max_retries: int | None = None
    skip_result: Any = None
    on_lost: LostPolicy = "flag"
    redelivery_wait: float | None = None
    #: Publish-time deduplication (``_publish``): a second publish of a queued or running
    #: key sends nothing and returns the first task's AsyncResult.
    unique_on_publish: bool = False
    #: With ``unique_on_publish``: raise ``DuplicateTask`` instead of returning that result.
    raise_on_duplicate: bool = False
    #: With ``unique_on_publish``: seconds after which a marker nobody cleared stops counting.
    publish_expiry: float = 3600.0

    @classmethod
    def from_options(cls, where: str, options: dict[str, Any]) -> SingletonOptions:
        """Build from keyword options; an unknown name is a ConfigurationError naming ``where``."""
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown option(s) {unknown}; the options are "
                f"{[f.name for f in dataclasses.fields(cls)]}"
            )
        return cls(**options)

    def __post_init__(self) -> None:
        # Literal types catch typos at the call site under mypy; untyped callers get this.
        on_conflict: object = self.on_conflict
        if on_conflict not in CONFLICT_POLICIES:
            raise ConfigurationError(
                f"on_conflict must be one of {CONFLICT_POLICIES}, got {on_conflict!r}"
            )
        on_lost: object = self.on_lost
        if on_lost not in LOST_POLICIES:
            raise ConfigurationError(f"on_lost must be one of {LOST_POLICIES}, got {on_lost!r}")
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
        for name in ("unique_on_publish", "raise_on_duplicate"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(
                    f"{name} must be True or False, got {getattr(self, name)!r}"
                )
        expiry = self.publish_expiry
        if isinstance(expiry, bool) or not isinstance(expiry, (int, float)) or not expiry > 0:
            raise ConfigurationError(f"publish_expiry must be seconds > 0, got {expiry!r}")
        if self.raise_on_duplicate and not self.unique_on_publish:
            raise ConfigurationError(
                "raise_on_duplicate=True needs unique_on_publish=True: without it nothing is "
                "deduplicated at publish"
            )
        key = self.key
        if (key is not None and not callable(key)) and (
            isinstance(key, str) or not all(isinstance(k, str) for k in key)
        ):
            raise ConfigurationError(
                f"key must be a list of argument names or a callable, got {key!r} "
                "(for one argument write key=['name'])"
            )


#: The attribute ``@singleton_task`` sets on the task body: its ``SingletonOptions``.
MARK = "__zk_recipes_singleton__"


def options_of(task: Any) -> SingletonOptions | None:
    """The singleton options of ``task`` (either front door), or None for another task."""
    for attr in ("_orig_run", "run"):
        fn = getattr(task, attr, None)
        found = getattr(getattr(fn, "__func__", fn), MARK, None)
        if isinstance(found, SingletonOptions):
            return found
    of_class = getattr(task, "_singleton_publish_options", None)
    return of_class() if callable(of_class) else None


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
def _holder(lock: Lock) -> Owner | None:
    """Who holds ``lock`` now, as ``zk-recipes holders`` reads it (None: nobody, or unreadable)."""
    try:
        for recipe in holders(lock.client, lock.path):
            if recipe.path == lock.path and recipe.holders:
                return recipe.holders[0].owner
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
    key = key_segment(options.key, key_fn, args, kwargs)
    path = f"{config.singleton_root}/{name_segment}/{key}"
    client = state.process_client.get()
    queued = None
    if options.unique_on_publish and task_id is not None and not direct:
        queued = QueuedMarker(client, f"{config.queued_root}/{name_segment}/{key}", task_id)
    try:
        return _guarded(task, options, client, path, task_id, direct, call, queued)
    except Retry:
        if queued is not None:
            queued.keep()  # the retry is queued under this task id: the marker is its
        raise
    finally:
        if queued is not None:
            queued.clear()


def _guarded(
    task: Any,
    options: SingletonOptions,
    client: ZkClient,
    path: str,
    task_id: str | None,
    direct: bool,
    call: Callable[[], Any],
    queued: QueuedMarker | None,
) -> Any:
    """Take the lock, or apply the conflict policy; then run ``call()`` holding it."""
    config = app_state(task.app).config
    lock = Lock(client, path, identifier=task_id)
    acquired = lock.acquire(blocking=False)
    holder: Owner | None = None
    if not acquired:
        holder = _holder(lock)
        if task_id is not None and holder is not None and holder.id == task_id:
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
    return _run_holding(task, options, lock, path, task_id, call, queued)


def _on_conflict(
    task: Any,
    options: SingletonOptions,
    lock: Lock,
    path: str,
    task_id: str | None,
    holder: Owner | None,
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


def _describe(holder: Owner | None) -> str:
    """``host:pid (task id)`` (Owner's str); "another process" when the holder wrote none."""
    return str(holder) if holder else "another process"


def _run_holding(
    task: Any,
    options: SingletonOptions,
    lock: Lock,
    path: str,
    task_id: str | None,
    call: Callable[[], Any],
    queued: QueuedMarker | None = None,
) -> Any:
    """Run ``call()`` (which reaches the body through ``_abort.in_body``), then release.

    The queued marker (publish-time deduplication) is cleared before the lock
    is let go: a publish once the body has returned queues a new run.
    """
    run = SingletonRun(lock, task_id, path)
    interrupter = None
    if options.on_lost == "abort":
        # As soon as we hold the lock: a loss from now on is recorded, and acted on
        # when (and only while) the body runs; see _abort.
        interrupter = Interrupter(lock)
        lock.on_lost(interrupter.fire)
    token = _current.set(run)
    request = task.request
    with contextlib.suppress(AttributeError):  # Celery's Context takes any attribute
        request.zk_singleton = run
    try:
        _metrics.singleton_acquired.send(sender=task, task_id=task_id, key_path=path, run=run)
        with pending(interrupter):
            return call()
    except Retry:
        if queued is not None:
            queued.keep()
        raise
    finally:
        if interrupter is not None:
            disarm_for_cleanup(interrupter)  # in_body did; this is for a body never reached
        _current.reset(token)
        if run.lost:
            log.warning(
                "singleton %s: the lock %s was lost during task %s (session expired); "
                "another run may have overlapped this one",
                task.name,
                path,
                task_id,
            )
        if queued is not None:
            queued.clear()
        lock.release()
