"""The command faces' arguments, checked before anything connects.

Why a module of its own: ``zk-recipes`` and ``flask zk`` (click) and
``manage.py zklock`` / ``zkleader`` / ``zkstatus`` (argparse) take the same
NAME, PATH and seconds, and a bad one must end the same way in each: one line
that says what is wrong and what to give instead, and exit 2
(``ExitCode.USAGE``); never a traceback, never exit 1, which the exit-code
table does not have. The checks here raise ``ConfigurationError``; each face
turns it into its own usage error (click's ``BadParameter``, argparse's
``ArgumentTypeError``, Django's ``CommandError(returncode=2)``).

A lock or leader NAME is checked by the framework kit's ``lock_path`` /
``leader_path``, against the settings' prefix: the settings are read first,
so a bad setting is exit 78 and a bad argument exit 2.
"""

from __future__ import annotations

import math

from zk_recipes import DEFAULT_PREFIX, ConfigurationError, InvalidPathError, validate_path


def parse_seconds(value: object) -> float:
    """A finite number of seconds >= 0, from the command line (text or a number).

    ``nan`` and ``inf`` are refused: neither is a time to wait, and leaving the
    option out already means "as long as it takes".
    """
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"must be a number of seconds, like 30 or 0.5; got {value!r}"
        ) from None
    if not math.isfinite(number) or number < 0:
        raise ConfigurationError(f"must be a finite number of seconds >= 0, got {value!r}")
    return number


def check_path(path: str, what: str = "PATH", *, example: str = DEFAULT_PREFIX) -> str:
    """A path to read under the namespace, as typed (``holders PATH``, ``zkstatus --path``)."""
    try:
        return validate_path(path, what=what)
    except InvalidPathError as exc:
        raise InvalidPathError(
            f"{exc}; give a path under the namespace, like {example}/locks (or / for all)"
        ) from None
