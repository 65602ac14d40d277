"""The verbs every lock-like recipe shares, written once (STYLE habit 3).

A lock-like defines ``acquire(blocking=True, timeout=None) -> bool`` and
``release()``, like ``threading.Lock``; this mixin derives the context forms:
``with lock:`` (waits as long as it takes) and ``with lock.acquired(timeout):``,
which raises LockTimeout because a ``with`` block cannot return False.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TypeVar

from zk_recipes._errors import LockTimeout

_L = TypeVar("_L", bound="LockVerbs")


class LockVerbs:
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self: _L) -> _L:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    @contextlib.contextmanager
    def acquired(self: _L, timeout: float) -> Iterator[_L]:
        """``with lock.acquired(timeout=5):`` — raises LockTimeout if not acquired in time."""
        if not self.acquire(timeout=timeout):
            raise LockTimeout(f"{self._label()} not acquired within {timeout:g} s")
        try:
            yield self
        finally:
            self.release()

    def _label(self) -> str:
        kind = getattr(self, "_kind", type(self).__name__)
        path = getattr(self, "path", None)
        return f"{kind} {path}" if isinstance(path, str) else repr(self)
