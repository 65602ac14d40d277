"""Waiting helpers for tests: wait on events, not sleeps.

- ``Recorder``: a listener of any kind that keeps what it is given;
  ``wait_for(predicate)`` blocks until a match arrives.
- ``StateRecorder``: the same for connection states (``wait_for(LOST)``).
- ``wait_for_children``: until a directory's children satisfy a test
  (``count`` contenders queued, a node gone), woken by watches.
- ``wait_until``: poll a condition no event tells about.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from zk_recipes import ConnectionState, NoNodeError, StateChange, WatchEvent, ZkClient

T = TypeVar("T")


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    """Poll ``predicate`` until it is true; AssertionError naming ``what`` after ``timeout`` s.

    For conditions no event tells about (a node another client sees, a
    container the server reaps); prefer waiting on an event where there is one.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.01)


class Recorder(Generic[T]):
    """A listener that keeps what it is given; ``wait_for`` blocks until a match arrives.

    ``recorder = Recorder[MembershipChange]()``, then ``member.add_listener(recorder)``:
    calls may come from any thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.items: list[T] = []

    def __call__(self, item: T) -> None:
        with self._cond:
            self.items.append(item)
            self._cond.notify_all()

    def mark(self) -> int:
        """An index to pass as ``after=`` to wait only for later items."""
        with self._cond:
            return len(self.items)

    def snapshot(self) -> list[T]:
        """The items so far, in order."""
        with self._cond:
            return list(self.items)

    def wait_for(
        self,
        predicate: Callable[[T], bool],
        timeout: float = 10.0,
        after: int = 0,
        *,
        count: int = 1,
    ) -> T:
        """The ``count``-th item at index >= ``after`` that matches; AssertionError on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = [item for item in self.items[after:] if predicate(item)]
                if len(found) >= count:
                    return found[count - 1]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"{count} matching item(s) not within {timeout} s; saw {self.items}"
                    )
                self._cond.wait(remaining)


def wait_for_children(
    client: ZkClient,
    path: str,
    expected: int | Callable[[list[str]], bool],
    timeout: float = 10.0,
) -> list[str]:
    """The children of ``path`` once there are ``expected`` of them (or ``expected(children)``).

    Woken by watches, not polling; a missing ``path`` has no children (recipe
    directories are CONTAINER nodes the server reaps), and its creation wakes
    the wait too. AssertionError naming the path and what it saw after ``timeout``.
    """
    matches = expected if callable(expected) else (lambda children: len(children) == expected)
    changed = threading.Event()

    def wake(event: WatchEvent) -> None:
        changed.set()

    deadline = time.monotonic() + timeout
    while True:
        changed.clear()
        try:
            children = client.get_children(path, watch=wake)
        except NoNodeError:
            if client.exists(path, watch=wake) is not None:
                continue
            children = []
        if matches(children):
            return children
        left = deadline - time.monotonic()
        assert left > 0, f"not within {timeout} s: {path} has children {sorted(children)}"
        changed.wait(left)


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
