"""A background reconciler: one thread that re-runs one step each time it is woken.

What PersistentNode and GroupMember's view run on, and what caches, queue
consumers and service discovery will: a recipe hands it ``step()``, which
makes the world match what the recipe wants (create a node, re-arm a watch,
re-read a list), and wakes it whenever something may have changed — a
watch event, a state change, a call of the user's. It never polls: between
wake-ups it sleeps on an event. A step that fails is tried again after a
capped back-off while connected; while disconnected, at the next wake-up
(the recipe wakes it on CONNECTED/RECONNECTED). It ends on ``stop()`` and
when the client is closed (``client.wake_on_close``).

The event is cleared *before* the step runs, so a wake-up during a step is
never lost: the step runs again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from zk_recipes._client.client import ZkClient
from zk_recipes._errors import (
    ClientStateError,
    ConnectionLostError,
    RetriesExhaustedError,
    SessionLost,
    ZkTimeoutError,
)
from zk_recipes._threads import join_unless_current, run_in_thread

log = logging.getLogger("zk_recipes.reconciler")

#: The longest back-off between two failed steps (seconds).
MAX_BACKOFF = 2.0
#: How long stop() waits for a step in the middle of a request.
STOP_WAIT = 2.0
_TRANSIENT = (ConnectionLostError, ZkTimeoutError, SessionLost, RetriesExhaustedError)


class Reconciler:
    """Runs ``step()`` on a thread of its own whenever woken, until stopped or the client closes."""

    def __init__(
        self,
        client: ZkClient,
        name: str,
        step: Callable[[], None],
        on_exit: Callable[[], None],
    ) -> None:
        self._client = client
        self._name = name
        self._step = step
        self._on_exit = on_exit
        self._wake = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._wake.set()
        self._thread = run_in_thread(self._name, self._run)

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        join_unless_current(self._thread, STOP_WAIT)

    def _run(self) -> None:
        failures = 0
        try:
            with self._client.wake_on_close(self._wake):
                while True:
                    self._wake.wait(min(MAX_BACKOFF, 0.05 * 2**failures) if failures else None)
                    if self._stopped or not self._client.is_started:
                        return
                    self._wake.clear()
                    state = self._client.state
                    if state is None or not state.is_connected:
                        continue  # the recipe wakes us again on CONNECTED/RECONNECTED
                    try:
                        self._step()
                        failures = 0
                    except ClientStateError:
                        return  # the client was closed under us
                    except Exception as exc:
                        failures += 1
                        if failures == 1:
                            log.warning(
                                "%s: %s; will retry",
                                self._name,
                                exc,
                                exc_info=not isinstance(exc, _TRANSIENT),
                            )
                        else:
                            log.debug("%s failed again: %s", self._name, exc)
        finally:
            self._on_exit()
