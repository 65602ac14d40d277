"""A faked machine suspend for the session clock's tests: CLOCK_BOOTTIME moved, monotonic not."""

from __future__ import annotations

import time

import pytest


def fake_suspend(monkeypatch: pytest.MonkeyPatch, slept: float = 0.0) -> list[float]:
    """Make CLOCK_BOOTTIME read ``slept`` seconds ahead; the returned cell changes it later.

    A laptop's sleep moves CLOCK_BOOTTIME (the session clock) and not
    ``time.monotonic()``. The monkeypatch undoes it at the test's end, which
    steps the session clock back: nothing a real machine does.
    """
    real = time.clock_gettime
    shift = [slept]

    def clock_gettime(clock: int) -> float:
        now = real(clock)
        return now + shift[0] if clock == time.CLOCK_BOOTTIME else now

    monkeypatch.setattr(time, "clock_gettime", clock_gettime)
    return shift
