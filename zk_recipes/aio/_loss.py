"""The ``lost`` event of the asyncio forms: an ``asyncio.Event`` that also tells listeners.

Why: an ``aio.MultiLock`` must hear when any member's hold is lost, and an
``asyncio.Event`` has no callbacks; a task per member awaiting ``wait()``
would cost a task per hold. The members set their event on the loop
(``call_soon_threadsafe`` from the session's thread), so listeners run on
the loop too, at once, in the order they were added.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class LossEvent(asyncio.Event):
    """``asyncio.Event`` with ``add_listener``/``remove_listener``, called when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self._listeners: list[Callable[[], object]] = []

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        for listener in list(self._listeners):
            listener()

    def add_listener(self, listener: Callable[[], object]) -> None:
        """Call ``listener()`` on the loop when the event is next set."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable[[], object]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
