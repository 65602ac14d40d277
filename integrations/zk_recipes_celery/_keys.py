"""Singleton keys: which calls of a task share one lock.

A call's key is bound to the task function's signature with defaults applied,
so ``f(1)``, ``f(x=1)`` and ``f(1, y=<default>)`` agree, and a bound task's
``self`` never counts (celery-once#58/#93 and celery-singleton#27 were keys
that differed between calls meaning the same). The key's canonical JSON
(sorted keys, no whitespace) is hashed with SHA-256 into a znode name; values
without a canonical JSON form are refused rather than ``repr``-ed, since a
repr can hold a memory address that differs in every process.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import inspect
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from zk_recipes import ConfigurationError, RecipeUsageError
from zk_recipes.frameworks import bind_arguments, unknown_parameters

#: The key segment of a lock per task name (no key).
NAME_ONLY_KEY = "task"

KeySpec = Sequence[str] | Callable[..., object] | None


def _json_default(value: object) -> object:
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, decimal.Decimal)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(
        f"a singleton key value of type {type(value).__name__} has no canonical JSON form; "
        "use key=[...] to pick JSON-serialisable arguments, or key=callable returning a str"
    )


def key_arguments(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """Bind a call to ``fn``'s signature with defaults applied, so f(1) and f(x=1) agree.

    The frameworks' one binding (``zk_recipes.frameworks.bind_arguments``): names
    caught by ``**kwargs`` appear under their own names, and only when the call
    passed them: an absent one is not there at all, which differs from None.
    """
    try:
        return bind_arguments(inspect.signature(fn), args, kwargs)
    except TypeError as exc:
        raise RecipeUsageError(f"singleton key: cannot bind the call's arguments: {exc}") from exc


def key_segment(
    key: KeySpec, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """The lock's last path segment for one call (``task`` when the key is the task name)."""
    if key is None:
        return NAME_ONLY_KEY
    if callable(key):
        value: object = key(*args, **kwargs)
    else:
        arguments = key_arguments(fn, args, kwargs)
        value = {name: arguments[name] for name in key if name in arguments}
    try:
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError) as exc:
        raise RecipeUsageError(str(exc)) from exc
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_key_names(key: KeySpec, fn: Callable[..., Any]) -> None:
    """Refuse, when the task is defined, key names that no call could ever supply."""
    if key is None or callable(key):
        return
    unknown = unknown_parameters(inspect.signature(fn), key)
    if unknown:
        raise ConfigurationError(
            f"singleton key names {unknown} are not parameters of {fn.__qualname__}"
            f"{inspect.signature(fn)}"
        )
