"""The outage rule of a guarded run: when ZooKeeper cannot be reached, say so, and soon.

A run that cannot reach ZooKeeper must neither hang nor blame a holder that
may not exist. The rule, the same for ``zk-recipes lock``/``leader``,
Django's ``zklock``/``zkleader``/``LockedCommandMixin`` and ``flask zk``:

- **Connecting** waits at most the connection timeout, and at most
  ``--timeout`` when one is given (``connect_timeout``); then
  ``ExitCode.UNAVAILABLE`` (69).
- **Waiting** (in line for the lock, or standing by for leadership), the run
  watches the connection (``Outage``): once the client has not been connected
  for the connection timeout, or ``--timeout`` passes while it is not, the
  wait ends with 69. A shorter outage is ridden out: the recipes queue again
  on a new session by themselves. ``--no-wait`` does not wait for a
  reconnection either: not connected is 69 at once.
- **A refusal is checked** (``answered_within``): ``--no-wait`` is "busy" (75),
  and ``--timeout`` "timed out" (124), only when a read of the queue, answered
  within a second, shows somebody holding it. An acquire that gave up because
  requests went unanswered (a paused server keeps the connection open and
  says nothing) is 69, not a false "busy".

"Connected" means able to write: CONNECTED or RECONNECTED. A read-only
connection cannot create the lock's node.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TextIO, TypeVar

from zk_recipes import ConnectionState, ZkClient, ZkRecipesError
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._supervise import say
from zk_recipes.cli._waiting import QueueView, describe_owner

T = TypeVar("T")

#: The states in which a run can queue (create its node).
WRITABLE = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED)
#: How long the read that checks a refusal may take.
CHECK_SECONDS = 1.0


def connect_timeout(connection_timeout: float, timeout: float | None) -> float:
    """How long a face waits to connect: the connection timeout, cut to ``timeout`` (> 0)."""
    if timeout is None or timeout <= 0:
        return connection_timeout  # --no-wait, --timeout 0: no holder is waited for; a
        # connection still gets its chance
    return min(connection_timeout, timeout)


class Outage:
    """Watches the client through a wait: ``over()`` once the wait must end as UNAVAILABLE."""

    def __init__(self, client: ZkClient, deadline: float | None) -> None:
        self._client = client
        self._limit = client.settings.connection_timeout
        self._deadline = deadline
        self._down_since: float | None = None

    def connected(self) -> bool:
        return self._client.state in WRITABLE

    def over(self) -> bool:
        """True once the client has been down for the connection timeout, or at the deadline."""
        now = time.monotonic()
        if self.connected():
            self._down_since = None
            return False
        if self._down_since is None:
            self._down_since = now
        if now - self._down_since >= self._limit:
            return True
        return self._deadline is not None and now >= self._deadline

    def next_look(self, longest: float) -> float:
        """How long the caller may sleep before ``over()`` could change its answer."""
        if self._down_since is None:
            return longest
        ends = self._down_since + self._limit
        if self._deadline is not None:
            ends = min(ends, self._deadline)
        return max(0.01, min(longest, ends - time.monotonic()))

    def reason(self) -> str:
        """Why the run gives up: the state and for how long, for people."""
        state = self._client.state
        name = "not connected" if state is None else state.value
        if self._down_since is None:
            return f"ZooKeeper is unreachable ({name})"
        down = time.monotonic() - self._down_since
        return f"ZooKeeper is unreachable ({name} for {down:.1f}s)"


def answered_within(look: Callable[[], T], limit: float) -> T | None:
    """``look()``, if it is answered within ``limit`` seconds; None when it fails or is late.

    On a thread of its own, so a server that does not answer (paused, or cut
    off without a reset) cannot stretch the run by more than ``limit``; a late
    read ends by itself within the client's request timeout.
    """
    result: list[T] = []

    def run() -> None:
        with contextlib.suppress(ZkRecipesError):
            result.append(look())

    thread = threading.Thread(target=run, name="zk-recipes check", daemon=True)
    thread.start()
    thread.join(limit)
    return result[0] if result else None


def refusal(
    out: TextIO,
    what: str,
    command: str,
    look: Callable[[], QueueView],
    outage: Outage,
    timeout: float | None,
) -> int | None:
    """Why an acquire said no: BUSY / TIMED_OUT when a holder is seen, else UNAVAILABLE.

    ``timeout`` None is ``--no-wait``. None back: nobody holds it now, and the
    run was not waiting: the holder left meanwhile, the caller tries again.
    """
    if not outage.connected():
        say(out, f"{what}: {outage.reason()}; not running {command}")
        return ExitCode.UNAVAILABLE
    view = answered_within(look, CHECK_SECONDS)
    if view is None:
        say(
            out,
            f"{what}: ZooKeeper did not answer within {CHECK_SECONDS:g}s (unreachable); "
            f"not running {command}",
        )
        return ExitCode.UNAVAILABLE
    if view.holder is None:
        if timeout is None:
            return None
        say(out, f"{what} was not ours within {timeout:g}s; not running {command}")
        return ExitCode.TIMED_OUT
    holder = describe_owner(view.holder)
    if timeout is None:
        say(out, f"{what} is held by {holder}; not running {command}")
        return ExitCode.BUSY
    say(out, f"{what} was still held after {timeout:g}s, by {holder}; not running {command}")
    return ExitCode.TIMED_OUT
