"""Waiting helpers for tests: StateRecorder (a listener to wait on) and wait_until."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from zk_recipes import ConnectionState, StateChange


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    """Poll ``predicate`` until it is true; AssertionError naming ``what`` after ``timeout`` s.

    For conditions no event tells about (a node another client sees, a
    container the server reaps); prefer waiting on an event where there is one.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.01)


class StateRecorder:
    """Records every StateChange; ``wait_for(LOST)`` blocks until one arrives.

    ``client.add_listener(recorder)`` — it runs on the client's listener thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.changes: list[StateChange] = []

    def __call__(self, change: StateChange) -> None:
        with self._cond:
            self.changes.append(change)
            self._cond.notify_all()

    @property
    def states(self) -> list[ConnectionState]:
        with self._cond:
            return [c.state for c in self.changes]

    def wait_for(
        self, state: ConnectionState, timeout: float = 10.0, *, after: int = 0
    ) -> StateChange:
        """The first change to ``state`` at index >= ``after``; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for change in self.changes[after:]:
                    if change.state is state:
                        return change
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    seen = [c.state.name for c in self.changes]
                    raise AssertionError(f"no {state.name} within {timeout} s; saw {seen}")
                self._cond.wait(remaining)

    def mark(self) -> int:
        """An index to pass as ``after=`` to wait only for later changes."""
        with self._cond:
            return len(self.changes)
