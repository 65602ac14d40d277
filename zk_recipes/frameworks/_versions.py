"""The front door's version check: an integration refuses a framework older than it supports.

sentry-python's ``_check_minimum_version``: each integration checks the
installed framework when it is imported, so an old Django, Flask or Celery
fails at once with the version found and the install command, rather than
later with an ``AttributeError`` deep in a hook. The supported minimums are
the ``pyproject.toml`` extras' pins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LEADING_NUMBERS = re.compile(r"\d+(?:\.\d+)*")


def version_tuple(version: str | Sequence[object]) -> tuple[int, ...]:
    """``"5.2.1"``, ``"3.0.0rc1"`` or ``django.VERSION`` as a tuple of its leading numbers."""
    if isinstance(version, str):
        match = _LEADING_NUMBERS.match(version.strip())
        return tuple(int(part) for part in match.group(0).split(".")) if match else ()
    numbers: list[int] = []
    for part in version:
        if isinstance(part, bool) or not isinstance(part, int):
            break
        numbers.append(part)
    return tuple(numbers)


def require_version(
    integration: str,
    framework: str,
    installed: str | Sequence[object],
    minimum: tuple[int, ...],
    extra: str,
) -> None:
    """ImportError naming the versions and the extra when ``installed`` < ``minimum``.

    ``require_version("zk_recipes_django", "Django", django.VERSION, (4, 2), "django")``.
    """
    found = version_tuple(installed)
    if found and found >= minimum:
        return
    shown = ".".join(map(str, found)) if found else repr(installed)
    wanted = ".".join(map(str, minimum))
    raise ImportError(
        f"{integration} needs {framework} >= {wanted}, found {shown}: "
        f"pip install 'zk-recipes[{extra}]' (or '{framework}>={wanted}')"
    )
