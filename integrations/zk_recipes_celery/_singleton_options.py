"""A singleton task's options: checked once, when the task is defined, and found from the task.

``SingletonOptions`` is the one place the options' defaults are written;
``options_of(task)`` finds them for either front door (``@singleton_task``
marks the body with ``MARK``, ``SingletonTask`` answers itself), for the
guarded run (``_singleton_run``) and publish dedup (``_publish``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args

from zk_recipes import ConfigurationError
from zk_recipes_celery._keys import KeySpec

#: What a run does when another run holds its key (see ``_singleton``).
ConflictPolicy = Literal["skip", "wait", "retry", "raise"]
#: What a run does when its lock is lost with the session: set ``lost``, or abort.
LostPolicy = Literal["flag", "abort"]
#: The same, for the check of untyped callers' values.
CONFLICT_POLICIES: tuple[str, ...] = get_args(ConflictPolicy)
LOST_POLICIES: tuple[str, ...] = get_args(LostPolicy)


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
