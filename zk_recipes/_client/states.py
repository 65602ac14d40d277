"""Connection states (Curator's model) and the listener dispatcher.

kazoo knows three states and calls its listeners on its one I/O thread, so
a listener that blocks stalls the whole client (kazoo #381, #355). Here a
listener never runs on a kazoo thread: each registered listener has its own
serial queue, drained by a short-lived worker thread. Events reach one
listener in the order they happened, and a listener that sleeps delays only
itself, never watches nor the other listeners.

States: CONNECTED (first session), SUSPENDED (connection lost, session may
live), RECONNECTED (connected again; ``session_id`` says whether it is the
same session), LOST (the session is gone: expired on the server, or declared
lost by the client when the server stayed silent too long), READ_ONLY
(connected to a read-only server). LOST always comes before a session
change, so a listener that sees RECONNECTED with a new session id has been
told LOST first.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("zk_recipes.client")


class ConnectionState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    RECONNECTED = "RECONNECTED"
    LOST = "LOST"
    READ_ONLY = "READ_ONLY"

    @property
    def is_connected(self) -> bool:
        """True when requests can be served (CONNECTED, RECONNECTED, READ_ONLY)."""
        return self in (
            ConnectionState.CONNECTED,
            ConnectionState.RECONNECTED,
            ConnectionState.READ_ONLY,
        )


@dataclasses.dataclass(frozen=True)
class StateChange:
    """What a connection-state listener receives."""

    state: ConnectionState
    #: The session this change is about (0 when there is none, e.g. on LOST).
    session_id: int
    #: ``time.monotonic()`` when the change was decided.
    at: float
    #: True when LOST was declared by the client (no reply for too long), not by the server.
    simulated: bool = False


StateListener = Callable[[StateChange], object]


class SerialExecutor:
    """Runs calls one at a time, in order, on a worker thread that exists only while busy."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: collections.deque[Callable[[], object]] = collections.deque()
        self._lock = threading.Lock()
        self._running = False
        self._idle = threading.Event()
        self._idle.set()

    def submit(self, fn: Callable[[], object]) -> None:
        with self._lock:
            self._queue.append(fn)
            if self._running:
                return
            self._running = True
            self._idle.clear()
        threading.Thread(target=self._drain, name=self._name, daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    self._idle.set()
                    return
                fn = self._queue.popleft()
            try:
                fn()
            except Exception:
                log.exception("error in %s", self._name)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until everything submitted so far has run."""
        return self._idle.wait(timeout)


class ListenerRegistry:
    """State listeners, each with its own SerialExecutor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[StateListener, SerialExecutor] = {}

    def add(self, listener: StateListener) -> None:
        if not callable(listener):
            raise TypeError(f"a state listener must be callable, got {listener!r}")
        with self._lock:
            if listener not in self._listeners:
                name = getattr(listener, "__qualname__", repr(listener))
                self._listeners[listener] = SerialExecutor(f"zk-recipes listener {name}")

    def remove(self, listener: StateListener) -> None:
        with self._lock:
            self._listeners.pop(listener, None)

    def publish(self, change: StateChange) -> None:
        with self._lock:
            targets = list(self._listeners.items())
        for listener, executor in targets:
            executor.submit(functools.partial(listener, change))

    def wait_idle(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` in all) for every listener to catch up."""
        deadline = time.monotonic() + timeout
        with self._lock:
            executors = list(self._listeners.values())
        return all(ex.wait_idle(max(0.0, deadline - time.monotonic())) for ex in executors)
