"""What every cache face does alike: start, close, listen, wait (the engine does the work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from zk_recipes._cache.engine import CacheEngine, Listener

_Face = TypeVar("_Face", bound="CacheFace")


class CacheFace:
    """The lifecycle and the listeners of a cache, delegated to its engine."""

    _engine: CacheEngine
    path: str

    def start(self: _Face) -> _Face:
        """Start loading in the background (INITIALIZED when done); returns the cache."""
        self._engine.start()
        return self

    def close(self) -> None:
        """Stop watching; idempotent. Listeners hear nothing more."""
        self._engine.close()

    def __enter__(self: _Face) -> _Face:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(CacheEvent)`` for every event from now on; returns its remover."""
        return self._engine.listen(listener)

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Wait for the first load to end (True), or ``timeout`` (False)."""
        return self._engine.initialized.wait(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the cache equals the server again (after a cut: RESYNCED)."""
        return self._engine.wait_synced(timeout)
