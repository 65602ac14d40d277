"""What every cache face does alike: start, close, listen, wait (the engine does the work)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from zk_recipes._cache.engine import CacheEngine, Listener
from zk_recipes._errors import ConfigurationError

_Face = TypeVar("_Face", bound="CacheFace")


class CacheFace:
    """The lifecycle and the listeners of a cache, delegated to its engine."""

    _engine: CacheEngine
    path: str

    def start(self: _Face) -> _Face:
        """Start loading in the background (INITIALIZED when done); returns the cache.

        A cache starts once: ``RecipeUsageError`` on a second call, or after
        ``close()`` (make a new one). Reading it before ``start()`` raises
        ``RecipeUsageError`` too.
        """
        self._engine.start()
        return self

    def close(self) -> None:
        """Stop watching; idempotent. Listeners hear nothing more.

        Returns at once, connected or not; the server's watches of the cache
        are taken back (see ``CacheEngine.close`` for the one case where some
        stay until the connection ends).
        """
        self._engine.close()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called (or the cache stopped on its own)."""
        return self._engine.closed

    def __enter__(self: _Face) -> _Face:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(CacheEvent)`` for every event from now on; returns its remover.

        Listeners run on the cache's own thread, in the order of the changes;
        one that raises is logged and the others still run.
        """
        return self._engine.listen(listener)

    def wait_initialized(self, timeout: float | None = None) -> bool:
        """Wait for the first load to end (True), or ``timeout`` (False).

        Raises the error that stopped the cache (``CacheOverflowError`` past
        ``max_nodes``) at once, whether it came before or during the wait.
        """
        return self._engine.wait_initialized(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait until the cache equals the server again (after a cut: RESYNCED).

        Raises the error that stopped the cache, as ``wait_initialized``.
        """
        return self._engine.wait_synced(timeout)

    def _under_root(self, path: str) -> str:
        """``path`` if it is the cache's path or below it; else ConfigurationError."""
        if self._engine.depth(path) is None:
            raise ConfigurationError(
                f"{path!r} is not under the {type(self).__name__}'s path {self.path}: it caches "
                f"{self.path} and the nodes below it only; read other paths from the client"
            )
        return path

    @property
    def unreadable(self) -> frozenset[str]:
        """The nodes this client may not read (NoAuth), skipped with what is below them.

        Each was told once with an UNREADABLE event and logged; each is read
        again at every resync and at its next change, and leaves this set once
        it can be read (its nodes then come as CREATED) or is deleted.
        """
        return self._engine.unreadable
