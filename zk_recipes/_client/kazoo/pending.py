"""A request in flight: kazoo's async result, typed, its failure translated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import kazoo.exceptions as kz_exc
from kazoo.handlers.threading import KazooTimeoutError

from zk_recipes import _errors as errors
from zk_recipes._client.kazoo.failures import translate

T = TypeVar("T")
U = TypeVar("U")


class Stoppable(Protocol):
    """The connection a request went out on (KazooConnection): whether we stopped it."""

    stopping: bool


class Pending(Generic[T]):
    """A request in flight (kazoo's async result), typed."""

    __slots__ = ("_conn", "_convert", "_path", "_raw")

    def __init__(
        self,
        raw: Any,
        path: str,
        convert: Callable[[Any], T],
        conn: Stoppable | None = None,
    ) -> None:
        self._raw = raw
        self._path = path
        self._convert = convert
        self._conn = conn

    def result(self, timeout: float | None = None) -> T:
        conn = self._conn
        stopped = conn is None or conn.stopping
        # Once per request: a try, not a context manager.
        try:
            raw = self._raw.get(block=True, timeout=timeout)
        except errors.ZkRecipesError:
            raise
        except (kz_exc.KazooException, KazooTimeoutError) as exc:
            raise translate(exc, self._path, stopped=stopped) from exc
        except Exception as exc:
            # kazoo's own machinery failed the request (its connection thread died on
            # a reply it did not expect, say): its fate is unknown, as after a drop.
            raise errors.ConnectionLostError(
                f"the connection failed this request ({self._path}): {exc!r}"
            ) from exc
        return self._convert(raw)

    def done(self) -> bool:
        return bool(self._raw.ready())

    def map(self, fn: Callable[[T], U]) -> Pending[U]:
        """The same request, with ``fn`` applied to its result."""
        convert = self._convert
        return Pending(self._raw, self._path, lambda raw: fn(convert(raw)), self._conn)

    def add_done_callback(self, fn: Callable[[Pending[T]], object]) -> None:
        """Call ``fn(self)`` when the reply arrives (on kazoo's completion thread: be quick)."""
        self._raw.rawlink(lambda _raw: fn(self))
