"""Deadlines: every wait in zk-recipes is bounded by one monotonic deadline.

A timeout becomes a deadline once, when the call starts, so it covers the
whole operation however often the thing waited for changes (kazoo restarts a
lock's timeout at every new predecessor: 2 s became 3.5 s). ``None`` means
wait forever.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from zk_recipes._errors import ConfigurationError, WrongTypeError


def _boot_time() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


#: The clock a session's silence is counted on (simulated expiry): CLOCK_BOOTTIME
#: where the system has it (Linux). Unlike ``time.monotonic()`` it goes on while the
#: machine is suspended (a laptop's sleep, some VM pause and restore paths), as the
#: servers' clocks do: a suspend then counts as silence, as a SIGSTOP does, instead
#: of leaving a LOST for up to the rest of the session timeout after the resume.
session_clock: Callable[[], float] = (
    _boot_time if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic
)


def _checked(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise WrongTypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if not timeout >= 0:
        raise ConfigurationError(f"timeout must be >= 0 (or None to wait forever), got {timeout!r}")
    return float(timeout)


def wait_deadline(timeout: float | None) -> float | None:
    """Validate a wait's ``timeout`` (seconds or None) and return its deadline.

    ``math.inf`` is "forever", like None: as a deadline it would reach the
    operating system's waits, which refuse it (OverflowError).
    """
    if timeout is None:
        return None
    seconds = _checked(timeout)
    return None if seconds == math.inf else time.monotonic() + seconds


def acquire_deadline(blocking: bool, timeout: float | None) -> float | None:
    """``acquire(blocking, timeout)`` arguments checked as ``threading.Lock`` does them.

    Stricter on one point: ``blocking`` must be a bool. ``acquire(5)`` is a
    timeout of 5 s to someone coming from Curator's ``acquire(time, unit)``,
    and ``threading`` would take it for ``blocking=True`` and wait for ever.
    """
    if not isinstance(blocking, bool):
        raise WrongTypeError(
            f"acquire(blocking=...) takes True or False, got {blocking!r}: for a timeout, "
            f"write acquire(timeout={blocking!r})"
        )
    if timeout == -1 and not isinstance(timeout, bool):
        timeout = None  # threading's spelling of "forever"
    if not blocking:
        if timeout is not None:
            raise ConfigurationError("can't specify a timeout for a non-blocking acquire")
        return time.monotonic()
    return wait_deadline(timeout)


def remaining(deadline: float | None) -> float | None:
    """Seconds left (never negative), or None for no deadline."""
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def request_timeout(limit: float, deadline: float | None) -> float:
    """How long one request may take: its own ``limit``, cut to the deadline."""
    if deadline is None:
        return limit
    return max(0.001, min(limit, deadline - time.monotonic()))
