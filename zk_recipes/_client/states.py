"""Connection states (Curator's model, plus CLOSED) and the listener dispatcher.

kazoo knows three states and calls its listeners on its one I/O thread, so
a listener that blocks stalls the whole client (kazoo #381, #355). Here a
listener never runs on a kazoo thread: each registered listener has its own
serial queue (``SerialExecutor``). Events reach one listener in the order
they happened, and a listener that sleeps delays only itself, never watches
nor the other listeners.

States: CONNECTED (first session), SUSPENDED (connection lost, session may
live), RECONNECTED (connected again; ``session_id`` says whether it is the
same session), LOST (the session is gone: expired on the server, or declared
lost by the client when the server stayed silent too long), READ_ONLY
(connected to a read-only server), and CLOSED (``close()`` was called: the
last state a listener hears). LOST always comes before a session change, so
a listener that sees RECONNECTED with a new session id has been told LOST
first.

Every change carries ``seq``, its place in the client's sequence of changes:
a listener registered at some point can tell a change decided before that
point (queued for an earlier registration) from a new one, and ignore it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import threading
import time
from collections.abc import Callable

from zk_recipes._errors import WrongTypeError
from zk_recipes._threads import SerialExecutor


class ConnectionState(enum.Enum):
    """A client's connection state, as a listener hears it (Curator's five, and CLOSED)."""

    #: The first session is established.
    CONNECTED = "CONNECTED"
    #: The connection is lost; the session may still be alive (holds are in doubt).
    SUSPENDED = "SUSPENDED"
    #: Connected again; ``session_id`` says whether it is the same session.
    RECONNECTED = "RECONNECTED"
    #: The session is gone: expired on the server, or declared lost by the client.
    LOST = "LOST"
    #: Connected to a read-only server (holds stay in doubt).
    READ_ONLY = "READ_ONLY"
    #: ``close()`` was called: terminal, like LOST, but by you.
    CLOSED = "CLOSED"

    @property
    def is_connected(self) -> bool:
        """True when requests can be served (CONNECTED, RECONNECTED, READ_ONLY)."""
        return self in (
            ConnectionState.CONNECTED,
            ConnectionState.RECONNECTED,
            ConnectionState.READ_ONLY,
        )

    @property
    def ends_session(self) -> bool:
        """True for LOST and CLOSED: every ephemeral node of the session is gone (or going)."""
        return self in (ConnectionState.LOST, ConnectionState.CLOSED)


@dataclasses.dataclass(frozen=True)
class StateChange:
    """What a connection-state listener receives."""

    state: ConnectionState
    #: The session this change is about (0 when there is none).
    session_id: int
    #: ``time.monotonic()`` when the change was decided.
    at: float
    #: True when LOST was declared by the client (no reply for too long), not by the server.
    simulated: bool = False
    #: Its place in this client's sequence of changes (1, 2, ...).
    seq: int = 0


StateListener = Callable[[StateChange], object]


class ListenerRegistry:
    """State listeners, each with its own SerialExecutor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Each listener's executor, made at its first publish: locks add and remove a
        #: listener on every acquire, and most never hear a state change.
        self._listeners: dict[StateListener, SerialExecutor | None] = {}

    def add(self, listener: StateListener) -> None:
        if not callable(listener):
            raise WrongTypeError(f"a state listener must be callable, got {listener!r}")
        with self._lock:
            self._listeners.setdefault(listener, None)

    def remove(self, listener: StateListener) -> None:
        with self._lock:
            self._listeners.pop(listener, None)

    def publish(self, change: StateChange) -> None:
        targets: list[tuple[StateListener, SerialExecutor]] = []
        with self._lock:
            for listener, executor in self._listeners.items():
                if executor is None:
                    name = getattr(listener, "__qualname__", repr(listener))
                    executor = SerialExecutor(f"zk-recipes listener {name}")
                    self._listeners[listener] = executor
                targets.append((listener, executor))
        for listener, executor in targets:
            executor.submit(functools.partial(listener, change))

    def wait_idle(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` in all) for every listener to catch up."""
        deadline = time.monotonic() + timeout
        with self._lock:
            executors = [ex for ex in self._listeners.values() if ex is not None]
        return all(ex.wait_idle(max(0.0, deadline - time.monotonic())) for ex in executors)
