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

import functools
import inspect
import threading

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import ConfigurationError, WrongTypeError
from zk_recipes._types import WatchEvent, mark_inline


def is_async_callable(fn: object) -> bool:
    """``async def`` functions, and partials or objects whose call is one."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    call = getattr(fn, "__call__", None)  # noqa: B004 (the object's own __call__)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def refuse_awaitable(returned: object, queue: str) -> None:
    """A consumer's return value: an awaitable nothing awaits is a failed attempt, never a
    commit (a sync queue given an async consumer the check below could not see)."""
    if not inspect.isawaitable(returned):
        return
    if inspect.iscoroutine(returned):
        returned.close()  # not run, so not consumed
    raise WrongTypeError(
        f"the consumer of {queue} returned an awaitable ({returned!r}) that nothing awaits: "
        "the item was not consumed. Use zk_recipes.aio.DistributedQueue for an async consumer"
    )


def check_consumer(consumer: object) -> None:
    """Refuse a consumer that cannot be called as ``consumer(value, context)``, at once."""
    if not callable(consumer):
        raise ConfigurationError(f"consumer must be callable, got {consumer!r}")
    if is_async_callable(consumer):
        raise WrongTypeError(
            f"the consumer {consumer!r} is a coroutine function: this queue would call it, "
            "get a coroutine that never runs, and commit the item as consumed. Use the "
            "asyncio queue (zk_recipes.aio.DistributedQueue, whose consumer is awaited on your "
            "loop), or a plain def"
        )
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
