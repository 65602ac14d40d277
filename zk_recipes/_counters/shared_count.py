"""SharedCount: Curator's SharedCount, a shared 32-bit int with change listeners.

The number lives in one PERSISTENT node (under CONTAINER parents), in
Curator's 4-byte encoding (_counters/encoding.py), so Java and Python share
counters.

**SharedCount** caches the value. ``start()`` seeds the node if it is absent
and reads it with a data watch; every watch event (kazoo's NONE after a
disconnect included) and every reconnect schedules a re-read, which arms
the watch again. A read or one of our own writes replaces the cache only if
it is *newer*, judged by ``mzxid`` — the zxid of the write, which grows with
every change and does not wrap — never by ``dataVersion``, a 32-bit counter
that wraps to negative after 2**31 - 1 writes (Curator 5.4 only accepts a
strictly higher version and is stuck after the wrap: CURATOR-688). So the
listeners, called in order on a thread of their own, see values in commit
order and always end with the last committed one; ZooKeeper may coalesce
quick writes into one notification, so they can skip values.
``try_set`` is a versioned setData (BadVersion → re-read, False).

SUSPENDED: nothing changes locally; SharedCount re-reads when connected
again. LOST: the nodes are persistent, so nothing is lost with the session.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from typing import NamedTuple, final

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._client.states import StateChange
from zk_recipes._client.steps import Reply, Steps, run_blocking
from zk_recipes._counters.encoding import check_int, decode, encode, is_newer
from zk_recipes._errors import (
    BadVersionError,
    ClientStateError,
    ConnectionLostError,
    CorruptedValueError,
    NodeExistsError,
    NoNodeError,
    RecipeUsageError,
    RetriesExhaustedError,
    SessionLost,
    WrongTypeError,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._internals.lifecycle import Lifecycle
from zk_recipes._internals.retry_steps import request_steps, retry_steps
from zk_recipes._threads import SerialExecutor
from zk_recipes._types import WatchEvent, ZnodeStat

log = logging.getLogger("zk_recipes.counter")


# -- SharedCount ---------------------------------------------------------------------------


class VersionedValue(NamedTuple):
    """A SharedCount value with the node's ``dataVersion``, for ``try_set``."""

    value: int
    version: int


class _Cached(NamedTuple):
    value: int
    version: int
    mzxid: int


CountListener = Callable[[int], object]


@final
class SharedCount:
    """A shared 32-bit int with change listeners: ``start()`` (or ``with``) before use.

    ``SharedCount(client, "/config/workers", seed=4)``: ``start()`` creates the
    node with ``seed`` if it is missing; ``get()`` is the value as last seen
    (kept current by a watch), ``set(v)`` writes, ``try_set(versioned(), v)``
    writes only if nobody wrote in between; ``add_listener`` hears every newer
    value, in commit order. The bytes are Curator's (a Java SharedCount on the
    same path shares it). Use AtomicLong for counting under contention. See
    docs/recipes/shared-count.md.
    """

    _bits = 32

    def __init__(self, client: ZkClient, path: str, seed: int) -> None:
        self.client = require_client(client, "SharedCount")
        self.path = _paths.validate_writable_path(path)
        self.seed = check_int(seed, self._bits, "seed")
        self._guard = threading.Lock()
        self._life = Lifecycle()
        self._cached: _Cached | None = None
        self._listeners: list[CountListener] = []
        self._notifier = SerialExecutor(f"zk-recipes SharedCount listeners {self.path}")
        self._refresher = SerialExecutor(f"zk-recipes SharedCount refresh {self.path}")
        self._refresh_queued = False

    # -- lifecycle -------------------------------------------------------
    def start(self) -> SharedCount:
        """Create the node with ``seed`` if it is absent, read it and start watching."""
        with self._guard:
            self._life.begin(repr(self), instead="make a new SharedCount")
        try:
            self.client.add_listener(self._on_state)
            for _ in range(5):
                with contextlib.suppress(NodeExistsError):
                    self.client.create(self.path, encode(self.seed, self._bits), parents=True)
                run_blocking(self._read_steps())
                if self._cached is not None:
                    return self
            raise NoNodeError(f"{self.path} keeps being deleted while starting", self.path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop watching and notifying. Idempotent."""
        with self._guard:
            if self._life.end() is None:
                return
            self._listeners.clear()
        self.client.remove_listener(self._on_state)

    def __enter__(self) -> SharedCount:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- reading and writing ---------------------------------------------
    def get(self) -> int:
        """The value as last seen (kept current by the watch)."""
        return self._current().value

    def versioned(self) -> VersionedValue:
        """The value as last seen and the node version it came with (for ``try_set``)."""
        current = self._current()
        return VersionedValue(current.value, current.version)

    def refresh(self) -> VersionedValue:
        """Read the node now (instead of waiting for the watch) and return what is current."""
        return run_blocking(self._refresh_steps())

    def set(self, value: int) -> None:
        """Write ``value`` unconditionally (the listeners are told, like for any change)."""
        run_blocking(self._set_steps(value))

    def try_set(self, previous: VersionedValue, value: int) -> bool:
        """Write ``value`` only if the count is still ``previous``; False if it changed.

        ``previous`` comes from ``versioned()``. False (the node changed since,
        or ``previous`` is not what this instance last saw) means nothing was
        written, and the cache was refreshed: take ``versioned()`` again.
        ConnectionLostError means the write may or may not have been applied.
        """
        return run_blocking(self._try_set_steps(previous, value))

    # -- listeners -------------------------------------------------------
    def add_listener(self, listener: CountListener) -> None:
        """Call ``listener(value)`` on each newer value seen, in order, on a thread of ours."""
        if not callable(listener):
            raise WrongTypeError(f"a SharedCount listener must be callable, got {listener!r}")
        with self._guard:
            if self._life.closed:
                raise RecipeUsageError(f"{self!r} is closed")
            self._listeners.append(listener)

    def remove_listener(self, listener: CountListener) -> None:
        with self._guard, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def __repr__(self) -> str:
        cached = self._cached
        shown = f"value={cached.value} version={cached.version}" if cached else "no value"
        return f"<SharedCount {self.path} {self._life.phase.value} {shown}>"

    # -- internals -------------------------------------------------------
    def _current(self) -> _Cached:
        closed, cached = self._life.closed, self._cached
        if not self._life.started or cached is None:
            raise RecipeUsageError(
                f"{self!r} is {'closed' if closed else 'not started'}: "
                "call start() or use `with SharedCount(...) as count:`"
            )
        return cached

    # -- the steps (run blocking above, awaited by aio.SharedCount) ------
    def _refresh_steps(self) -> Steps[VersionedValue]:
        self._current()
        yield from self._read_steps()
        return self.versioned()

    def _set_steps(self, value: int) -> Steps[None]:
        self._current()
        data = encode(check_int(value, self._bits, "value"), self._bits)
        client = self.client
        stat = yield from request_steps(client, lambda: client.set_async(self.path, data))
        self._offer(value, stat)

    def _try_set_steps(self, previous: VersionedValue, value: int) -> Steps[bool]:
        current = self._current()
        if not isinstance(previous, VersionedValue):
            raise WrongTypeError(
                f"previous must be a VersionedValue from versioned(), got {previous!r}"
            )
        data = encode(check_int(value, self._bits, "value"), self._bits)
        if (current.value, current.version) != tuple(previous):
            return False
        limit = self.client.settings.connection_timeout
        try:
            # Not resent on a lost reply: the copy would fail as BadVersion (see above).
            stat = yield Reply(self.client.set_async(self.path, data, previous.version), limit)
        except (BadVersionError, NoNodeError):
            with contextlib.suppress(
                ConnectionLostError, ZkTimeoutError, SessionLost, RetriesExhaustedError
            ):
                yield from self._read_steps()
            return False
        self._offer(value, stat)
        return True

    def _read_steps(self) -> Steps[None]:
        """Read the node with the watch armed and offer what was read (retried as
        ``client.retry`` would)."""
        return retry_steps(self.client, self._read_once_steps)

    def _read_once_steps(self) -> Steps[None]:
        client, limit = self.client, self.client.settings.connection_timeout
        while True:
            try:
                data, stat = yield Reply(client.get_async(self.path, watch=self._on_watch), limit)
            except NoNodeError:
                # Deleted: keep the last value and wait for the node to come back.
                there = yield Reply(client.exists_async(self.path, watch=self._on_watch), limit)
                if there is None:
                    return
                continue
            self._offer(decode(data, self._bits, self.path, empty_is_zero=False), stat)
            return

    def _offer(self, value: int, stat: ZnodeStat) -> None:
        with self._guard:
            old = self._cached
            if old is not None and not is_newer(stat.mzxid, old.mzxid):
                return
            self._cached = _Cached(value, stat.version, stat.mzxid)
            if old is not None and self._life.started:
                # Submitted under the guard: the listeners get values in mzxid order.
                self._notifier.submit(functools.partial(self._notify, value))

    def _notify(self, value: int) -> None:
        with self._guard:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(value)
            except Exception:
                log.exception("error in a listener of SharedCount %s", self.path)

    def _on_watch(self, _event: WatchEvent) -> None:
        self._schedule_refresh()

    def _on_state(self, change: StateChange) -> None:
        if change.state.is_connected:
            self._schedule_refresh()  # the watch may be gone; re-read and re-arm

    def _schedule_refresh(self) -> None:
        with self._guard:
            if not self._life.started or self._refresh_queued:
                return
            self._refresh_queued = True
        self._refresher.submit(self._refresh)

    def _refresh(self) -> None:
        with self._guard:
            self._refresh_queued = False  # later events schedule another read
            if not self._life.started:
                return
        try:
            run_blocking(self._read_steps())
        except CorruptedValueError:
            log.error("SharedCount %s: keeping the last value", self.path, exc_info=True)
        except ClientStateError:
            pass  # the client is closing
        except (ConnectionLostError, ZkTimeoutError, SessionLost, RetriesExhaustedError):
            # Reconnecting triggers another read (see _on_state).
            log.debug("SharedCount %s: re-read failed", self.path, exc_info=True)
