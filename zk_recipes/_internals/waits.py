"""The recipes' waits, as steps (``zk_recipes/_client/steps.py``): asleep here, awaited in aio.

- ``WaitDeleted``: until a node is deleted (True) or anything else happens
  (False: a timeout, a cancellation, a close, a disconnect): a getData
  watch on it. Blocking: asleep on the event the watch sets.
- ``WaitConnected`` and ``Pause``: a ride-out's waits for the connection
  and its back-off (``patience.py``).
- ``NewWake`` and ``Sleep``: a wait on a recipe's own signal (a latch's
  waiters): ``NewWake`` gives the driver's kind of wake (a ``threading.Event``;
  in aio one that completes a future on the loop), which the recipe hands to
  whoever sets it; ``Sleep`` waits on it, then clears it.

The asyncio driver (``zk_recipes/aio/_drive.py``) awaits each with a future
the watch, a state listener or a timer completes on the loop: no thread
waits for a coroutine.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from zk_recipes._client.client import ZkClient
from zk_recipes._deadline import remaining, request_timeout
from zk_recipes._errors import ConnectionLostError, NoNodeError, SessionLost, ZkTimeoutError
from zk_recipes._internals.cancellation import Cancellation
from zk_recipes._types import WatchEvent, WatchEventType, mark_inline


@dataclasses.dataclass(frozen=True, slots=True)
class WaitDeleted:
    """Wait until ``path`` is deleted (True) or anything else happens (False)."""

    client: ZkClient
    path: str
    deadline: float | None
    cancel: Cancellation | None

    def block(self) -> bool:
        return wait_deleted(self)


@dataclasses.dataclass(frozen=True, slots=True)
class WaitConnected:
    """Wait until the client is connected, at most ``timeout`` seconds (a ride-out's)."""

    client: ZkClient
    timeout: float

    def block(self) -> bool:
        return self.client.wait_connected(self.timeout)


@dataclasses.dataclass(frozen=True, slots=True)
class Pause:
    """Sleep ``seconds``, woken early by the client's close or ``cancel`` (a back-off)."""

    client: ZkClient
    seconds: float
    cancel: Cancellation | None

    def block(self) -> None:
        pause(self)


@dataclasses.dataclass(frozen=True, slots=True)
class NewWake:
    """A wake of the driver's kind, for the recipe to register (see the module note)."""

    def block(self) -> threading.Event:
        return threading.Event()


@dataclasses.dataclass(frozen=True, slots=True)
class Sleep:
    """Wait until ``wake`` (a ``NewWake``'s) is set, at most ``timeout``; then clear it.

    Answers whether it was set (False: the timeout passed first).
    """

    wake: Any
    timeout: float | None

    def block(self) -> bool:
        woken = bool(self.wake.wait(self.timeout))
        self.wake.clear()
        return woken


class DeleteWatch:
    """The getData watch on the node waited for: what fired, and whom to wake."""

    __slots__ = ("deleted", "fired", "wake")

    def __init__(self, wake: Callable[[], object]) -> None:
        self.deleted = False
        #: The watch itself fired (not a close or a cancel ending the wait).
        self.fired = False
        self.wake = wake

    def __call__(self, watch_event: WatchEvent) -> None:
        self.deleted = watch_event.type is WatchEventType.DELETED
        self.fired = True
        self.wake()


# It only records and wakes: run it on the connection thread, one hop sooner.
mark_inline(DeleteWatch)


def read_verdict(outcome: Callable[[], object] | None) -> bool | None:
    """What the read that set the watch says: True if the node is gone already, False if
    the read failed (or ``outcome`` is None: no answer in time), None if the watch is set."""
    if outcome is None:
        return False
    try:
        outcome()
    except NoNodeError:
        return True
    except (ConnectionLostError, ZkTimeoutError, SessionLost):
        return False
    return None


def watch_until_deleted(step: WaitDeleted, watch: DeleteWatch) -> bool | None:
    """Put ``watch`` on the node (``read_verdict``); blocks for one round trip at most."""
    client = step.client
    pending = client.get_async(step.path, watch=watch)
    limit = request_timeout(client.settings.connection_timeout, step.deadline)
    return read_verdict(lambda: pending.result(limit))


def forget_watch(step: WaitDeleted, watch: DeleteWatch) -> None:
    """A wait that ended otherwise (timed out, cancelled, closed) takes its watch back,
    which would stay on the server until the node changes. (A close drops it anyway.)"""
    if not watch.fired:
        step.client.remove_data_watch(step.path, watch)


def pause(step: Pause) -> None:
    """The blocking ``Pause``: asleep on an event a close or a cancel sets."""
    event = threading.Event()
    with step.client.wake_on_close(event):
        if step.cancel is None:
            event.wait(step.seconds)
        else:
            with step.cancel.wakes(event):
                event.wait(step.seconds)


def wait_deleted(step: WaitDeleted) -> bool:
    """The blocking ``WaitDeleted``: asleep on an event the watch, a close or a cancel sets."""
    event = threading.Event()
    watch = DeleteWatch(event.set)
    at_once = watch_until_deleted(step, watch)
    if at_once is not None:
        return at_once
    client, cancel = step.client, step.cancel
    with client.wake_on_close(event):
        if cancel is None:
            event.wait(remaining(step.deadline))
        else:
            with cancel.wakes(event):
                event.wait(remaining(step.deadline))
    forget_watch(step, watch)
    return watch.deleted
