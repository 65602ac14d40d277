"""What the consumer thread needs besides taking: a consumer that can be called, claims watched.

A consumer is checked when the queue is made: one that cannot be called as
``consumer(value, context)`` would fail at every item (and each failure is an
attempt: ``retrying.py``), so it is refused at once.

A consumer that meets claims of other consumers and has nothing else to take
watches those claims (an exists watch each, once): a claimant that dies lets
its claim go with its session without any change to the queue's directory,
so without the watch the item would wait for an unrelated put (review 3, Q2).
"""

from __future__ import annotations

import inspect
import threading

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError, WrongTypeError
from zk_recipes._types import WatchEvent, mark_inline


def check_consumer(consumer: object) -> None:
    """Refuse a consumer that cannot be called as ``consumer(value, context)``, at once."""
    if not callable(consumer):
        raise ConfigurationError(f"consumer must be callable, got {consumer!r}")
    try:
        signature = inspect.signature(consumer)
    except (TypeError, ValueError):
        return  # a builtin or an extension: nothing to check
    try:
        signature.bind(object(), object())
    except TypeError as exc:
        raise WrongTypeError(
            f"the consumer {consumer!r} cannot be called as consumer(value, context): {exc}. "
            "A queue's consumer takes the item's value and its ItemContext, e.g. "
            "def consume(value, context): ..."
        ) from None


class ClaimWatch:
    """Exists watches on claims of other consumers; one wakes the loop when its claim goes.

    A watch callback (on the connection thread: ``mark_inline``): it only
    notes the claim as not watched any more and wakes the consumer loop.
    """

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._armed: set[str] = set()

    def arm(self, claim: str) -> bool:
        """Note a watch about to be set on ``claim``; False if one is set already."""
        with self._lock:
            if claim in self._armed:
                return False
            self._armed.add(claim)
            return True

    def fired(self, claim: str) -> None:
        with self._lock:
            self._armed.discard(claim)
        self._wake.set()

    def watch(self, client: ZkClient, lock_path: str | None, names: list[str]) -> None:
        """Watch the claims of ``names`` a pass met and went idle on (racing.py)."""
        for name in names:
            assert lock_path is not None
            claim = _paths.join(lock_path, name)
            if not self.arm(claim):
                continue  # watched already
            if client.exists(claim, watch=self) is None:
                self.fired(claim)  # gone meanwhile: list again now

    def forget(self) -> None:
        with self._lock:
            self._armed.clear()

    def __call__(self, event: WatchEvent) -> None:
        if event.path is not None:
            self.fired(event.path)
        else:
            self.forget()
            self._wake.set()


mark_inline(ClaimWatch)
