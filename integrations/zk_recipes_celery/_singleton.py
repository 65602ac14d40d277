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

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

import celery
from celery import current_task

from zk_recipes import ConfigurationError, RecipeUsageError
from zk_recipes_celery._abort import in_body
from zk_recipes_celery._hooks import install_once
from zk_recipes_celery._keys import KeySpec, check_key_names
from zk_recipes_celery._singleton_options import (
    MARK,
    ConflictPolicy,
    LostPolicy,
    SingletonOptions,
)
from zk_recipes_celery._singleton_run import SingletonRun, current_singleton, run_guarded

F = TypeVar("F", bound=Callable[..., Any])


def _is_body_of(task: Any, body: Callable[..., Any]) -> bool:
    """True if ``body`` is what ``task`` runs (autoretry_for keeps it as ``_orig_run``)."""
    for attr in ("run", "_orig_run"):
        fn = getattr(task, attr, None)
        if fn is not None and getattr(fn, "__func__", fn) is body:
            return True
    return False


# The defaults live in SingletonOptions alone; the overloads give the types.
@overload
def singleton_task(fn: F) -> F: ...


@overload
def singleton_task(
    fn: None = None,
    *,
    key: KeySpec = ...,
    on_conflict: ConflictPolicy = ...,
    wait_timeout: float = ...,
    retry_countdown: float = ...,
    max_retries: int | None = ...,
    skip_result: Any = ...,
    on_lost: LostPolicy = ...,
    redelivery_wait: float | None = ...,
    unique_on_publish: bool = ...,
    raise_on_duplicate: bool = ...,
    publish_expiry: float = ...,
) -> Callable[[F], F]: ...


def singleton_task(fn: F | None = None, **options: Any) -> Any:
    """Make a task run at most once at a time cluster-wide; stack it under ``@app.task``:

        @app.task(bind=True)
        @singleton_task(key=["account_id"])
        def sync_account(self, account_id): ...

    Options (defaults in ``SingletonOptions``): ``key``, ``on_conflict``
    (``"skip"``, ``"wait"``, ``"retry"``, ``"raise"``), ``wait_timeout``,
    ``retry_countdown``, ``max_retries``, ``skip_result``, ``on_lost``
    (``"flag"``, ``"abort"``), ``redelivery_wait``; publish-time deduplication:
    ``unique_on_publish``, ``raise_on_duplicate``, ``publish_expiry`` (_publish.py).
    See the module docstring and docs/integrations/celery.md.
    """
    checked = SingletonOptions.from_options("@singleton_task", options)

    def decorate(func: F) -> F:
        install_once()
        if isinstance(func, celery.Task):
            raise ConfigurationError(
                "@singleton_task goes UNDER @app.task (closer to the function), "
                "or use @app.task(base=SingletonTask)"
            )
        check_key_names(checked.key, func)

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
                task, checked, key_fn, key_args, kwargs, lambda: in_body(func, args, kwargs)
            )

        # Celery checks call arguments against getfullargspec(), which ignores
        # __wrapped__ but honours __signature__.
        wrapper.__signature__ = inspect.signature(func)  # type: ignore[attr-defined]
        setattr(wrapper, MARK, checked)
        return wrapper  # type: ignore[return-value]

    if fn is not None:
        return decorate(fn)
    return decorate


def _as_body(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def body(*args: Any, **kwargs: Any) -> Any:
        return in_body(fn, args, kwargs)

    return body


class SingletonTask(celery.Task):  # type: ignore[misc]
    """Task base class form: ``@app.task(base=SingletonTask, singleton_key=["account_id"])``.

    Class attributes ``singleton_<option>`` set the options of ``@singleton_task``;
    those not set keep ``SingletonOptions``' defaults.
    """

    # Declared, not assigned: an attribute the task does not set takes the default.
    singleton_key: KeySpec
    singleton_on_conflict: ConflictPolicy
    singleton_wait_timeout: float
    singleton_retry_countdown: float
    singleton_max_retries: int | None
    singleton_skip_result: Any
    singleton_on_lost: LostPolicy
    singleton_redelivery_wait: float | None
    singleton_unique_on_publish: bool
    singleton_raise_on_duplicate: bool
    singleton_publish_expiry: float

    _singleton_options: SingletonOptions | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Celery makes a subclass per task (``@app.task(base=SingletonTask)``) when the
        # app is finalized, which a worker does before it sends ``celeryd_init``.
        super().__init_subclass__(**kwargs)
        install_once()
        # The body is ``run``, called by Celery's ``Task.__call__`` inside its own
        # bookkeeping: ``on_lost="abort"`` may interrupt the body, never that.
        run = cls.__dict__.get("run")
        if isinstance(run, staticmethod):
            cls.run = staticmethod(_as_body(run.__func__))
        elif callable(run):
            cls.run = _as_body(run)

    def _options(self) -> SingletonOptions:
        options = self._singleton_options
        if options is None:
            given = {
                name: getattr(self, f"singleton_{name}")
                for name in (f.name for f in dataclasses.fields(SingletonOptions))
                if hasattr(self, f"singleton_{name}")
            }
            options = SingletonOptions.from_options(f"SingletonTask {self.name}", given)
            check_key_names(options.key, self.run)
            if hasattr(self.run, MARK):
                raise ConfigurationError(
                    f"{self.name} uses both base=SingletonTask and @singleton_task: pick one"
                )
            type(self)._singleton_options = options
        return options

    def _singleton_publish_options(self) -> SingletonOptions:
        """The options publish-time deduplication reads (``_singleton_run.options_of``)."""
        return self._options()

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
