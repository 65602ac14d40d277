"""A request in flight: kazoo's async result, typed, its failure translated."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import kazoo.exceptions as kz_exc
from kazoo.handlers.threading import AsyncResult, KazooTimeoutError

from zk_recipes import _errors as errors
from zk_recipes._client.kazoo.failures import translate
from zk_recipes._client.loop_guard import warn_if_on_loop
from zk_recipes._types import is_inline, mark_inline

T = TypeVar("T")
U = TypeVar("U")


class Stoppable(Protocol):
    """The connection a request went out on (KazooConnection): whether we stopped it."""

    stopping: bool


class Result(AsyncResult):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's async result, whose callbacks marked inline run where the reply is read.

    Why: kazoo hands every callback to its completion thread. The asyncio
    bridge's callback only schedules a future's completion on its loop
    (``call_soon_threadsafe``), so the hop to that thread is pure latency on
    every awaited request. Unmarked callbacks keep kazoo's way.
    """

    def _do_callbacks(self) -> None:
        handler = self._handler
        for callback in self._callbacks:
            if is_inline(callback) or not handler.running:
                callback(self)
            else:
                handler.completion_queue.put(functools.partial(callback, self))


def new_result(kz: Any) -> Result:
    """A ``Result`` for a request of ``kz`` (a KazooClient), in place of its own."""
    return Result(kz.handler)


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
        warn_if_on_loop(lambda: f"a sync request ({self._path})")
        return self.outcome(timeout)

    def result_now(self) -> T:
        """The answer of a request that is done (or its failure, raised); never waits."""
        return self.outcome(0)

    def outcome(self, timeout: float | None) -> T:
        """``result()`` without its loop check: for a driver that made it already."""
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

    def add_done_callback(
        self, fn: Callable[[Pending[T]], object], *, inline: bool = False
    ) -> None:
        """Call ``fn(self)`` when the reply arrives (on kazoo's completion thread: be quick).

        ``inline``: on the thread that read the reply, holding the result's lock,
        for a callback that only hands the news on (the asyncio bridge's): it must
        not block, nor read another request's result.
        """

        def done(_raw: Any) -> None:
            fn(self)

        if inline:
            mark_inline(done)
        self._raw.rawlink(done)
