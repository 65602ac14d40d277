"""Deadlines: every wait in zk-recipes is bounded by one monotonic deadline.

A timeout becomes a deadline once, when the call starts, so it covers the
whole operation however often the thing waited for changes (kazoo restarts a
lock's timeout at every new predecessor: 2 s became 3.5 s). ``None`` means
wait forever. ``patient()`` is the one "ride out disconnects until the
deadline" loop of the recipes that wait (barriers, the contender queue, the
semaphore's lease list).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from zk_recipes._errors import (
    ConfigurationError,
    ConnectionLostError,
    SessionLost,
    WrongTypeError,
    ZkTimeoutError,
)

T = TypeVar("T")


def _checked(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise WrongTypeError(f"timeout must be a number of seconds or None, got {timeout!r}")
    if not timeout >= 0:
        raise ConfigurationError(f"timeout must be >= 0 (or None to wait forever), got {timeout!r}")
    return float(timeout)


def wait_deadline(timeout: float | None) -> float | None:
    """Validate a wait's ``timeout`` (seconds or None) and return its deadline."""
    return None if timeout is None else time.monotonic() + _checked(timeout)


def acquire_deadline(blocking: bool, timeout: float | None) -> float | None:
    """``acquire(blocking, timeout)`` arguments checked as ``threading.Lock`` does them."""
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


# -- riding out disconnects ----------------------------------------------------------------

#: The least time given to the first try of a request, however close the deadline.
FIRST_TRY = 1.0


class Expired(Exception):
    """The deadline passed (or the wait was cancelled) while a request could not be served."""


class _Patient(Protocol):
    @property
    def settings(self) -> _HasConnectionTimeout: ...
    def wait_connected(self, timeout: float | None) -> bool: ...


class _HasConnectionTimeout(Protocol):
    @property
    def connection_timeout(self) -> float: ...


def patient(
    client: _Patient,
    deadline: float | None,
    send: Callable[[float], T],
    *,
    cancelled: Callable[[], bool] | None = None,
    through_session_loss: bool = True,
) -> T:
    """``send(request_timeout)`` until it is answered; Expired once the deadline passes.

    For reads that are safe to repeat, in recipes that must survive a
    disconnect while they wait: connection failures are waited out (until
    connected again, never spinning), and so is SessionLost unless
    ``through_session_loss`` is False (the client builds a new session; the
    caller re-checks its own nodes). The first try always gets a real chance
    (``FIRST_TRY`` seconds), so a deadline of "now" still looks once. A
    closed client's ClientStateError, and every answer from the server
    (NoNode...), go to the caller.
    """
    first = True
    failures = 0
    while True:
        limit = client.settings.connection_timeout
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 and not first:
                raise Expired
            limit = min(limit, max(left, FIRST_TRY) if first else max(left, 0.001))
        first = False
        try:
            return send(limit)
        except (ConnectionLostError, ZkTimeoutError):
            pass
        except SessionLost:
            if not through_session_loss:
                raise
        failures += 1
        if cancelled is not None and cancelled():
            raise Expired
        after = remaining(deadline)
        if after is not None and after <= 0:
            raise Expired
        client.wait_connected(min(1.0, after) if after is not None else 1.0)
        if failures > 1:
            # Connected, yet failing again at once (kazoo between sessions): back off.
            pause = min(0.02 * 2**failures, 0.5)
            time.sleep(pause if after is None else min(pause, after))
