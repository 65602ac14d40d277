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
import logging
import random
import urllib.parse
from collections.abc import Callable
from typing import Any

from celery.exceptions import Retry

from zk_recipes import (
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
from zk_recipes_celery._keys import key_segment
from zk_recipes_celery._lifecycle import app_state
from zk_recipes_celery._queued_marker import RunMarker
from zk_recipes_celery._singleton_options import SingletonOptions

log = logging.getLogger("zk_recipes.celery.singleton")


class SingletonBusy(LockTimeout):
    """Another run holds this task's key (``on_conflict="raise"``, or a wait timed out).

    A ``LockTimeout``, as "busy" is in every face (Django's and Flask's locked
    blocks raise one too), so ``except LockTimeout`` means the same everywhere.
    """

    def __init__(self, message: str = "", *, holder: Owner | None = None) -> None:
        super().__init__(message)
        #: Who holds the key (an empty Owner when it could not be read).
        self.holder = holder if holder is not None else Owner()


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
        marker = f"{config.queued_root}/{name_segment}/{key}"
        queued = RunMarker(client, marker, task.name, task_id)
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
    queued: RunMarker | None,
) -> Any:
    """Take the lock, or apply the conflict policy; then run ``call()`` holding it."""
    config = app_state(task.app).config
    # Ours: the queued marker names this run (bound to this worker's session from now on).
    ours = queued is not None and queued.bind()
    lock = Lock(client, path, identifier=task_id)
    acquired = lock.acquire(blocking=False)
    holder: Owner | None = None
    if not acquired:
        holder = _holder(lock)
        wait = options.redelivery_wait
        if wait is None:
            wait = 2 * config.client.session_timeout + 1.0
        if task_id is not None and holder is not None and holder.id == task_id:
            # The same task id holds it: a redelivery after its worker died (the dead
            # session expires soon), or a retry published before our last attempt let go.
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
        elif ours and options.on_conflict != "wait":
            # Our marker names us, so the holder's was gone when we were published: that
            # run had ended its body (its lock node outlives it for a release's round
            # trip, or until the reconnect when the release met a blip), or it had no
            # marker. Accepted at publish, this run must not be skipped for it.
            log.info(
                "singleton %s: task %s was published after the run holding %s ended its "
                "body; waiting up to %.1fs for its lock to go",
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
    queued: RunMarker | None = None,
) -> Any:
    """Run ``call()`` (which reaches the body through ``_abort.in_body``), then release.

    The queued marker (publish-time deduplication) is cleared after the lock
    is let go: a publish while it is there gets this run's result; one once
    it is gone queues a new run, which finds the lock free (or, when the lock
    node outlives the release, waits for it: ``_guarded``).
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
        try:
            lock.release()
        finally:
            if queued is not None:
                queued.clear()
