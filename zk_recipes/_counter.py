"""SharedCount, AtomicLong, AtomicInt: Curator's SharedCount and DistributedAtomicLong/Integer.

Both keep a number in one PERSISTENT node (under CONTAINER parents), as
big-endian two's complement: 4 bytes for SharedCount and AtomicInt, 8 for
AtomicLong — Curator's bytes exactly, so Java and Python share counters.

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

**AtomicLong / AtomicInt**: no cache. One *try* = read value and stat →
compute → ``create`` if absent, else ``setData`` with the read version;
BadVersion / NodeExists / NoNode make the try fail. Tries repeat under the
counter's retry policy, then, if ``promote_to_lock`` is set, once more under
a Lock at the given path with the promoted policy (as Curator's
PromotedToLock: the lock only orders promoted writers, every write stays
versioned, so optimistic writers remain correct). A result can still be
``succeeded=False``: the caller decides. Arithmetic wraps like Java's
long/int (two's complement); arguments outside the type's range raise.

Writes are never resent after a lost reply: a resent versioned write would
meet its own first copy as BadVersion and be counted as a failure, and the
next try would apply the change twice. A connection failure during a write
therefore raises ConnectionLostError ("may or may not have been applied");
``succeeded=False`` / ``False`` always means "not applied". Reads are
retried under the client's policy.

SUSPENDED: nothing changes locally; SharedCount re-reads when connected
again. LOST: the nodes are persistent, so nothing is lost with the session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import ClassVar, NamedTuple

from zk_recipes import _paths
from zk_recipes._client import ZkClient
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
    ZkTimeoutError,
)
from zk_recipes._kazoo import WatchEvent, ZnodeStat
from zk_recipes._lock import Lock
from zk_recipes._retry import BoundedExponentialBackoffRetry, RetryNTimes, RetryPolicy
from zk_recipes._states import SerialExecutor, StateChange

log = logging.getLogger("zk_recipes.counter")


# -- numbers and bytes ---------------------------------------------------------------------


def _bounds(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def wrap(value: int, bits: int) -> int:
    """``value`` reduced to a ``bits``-bit two's complement int, as Java arithmetic does."""
    half = 1 << (bits - 1)
    return ((value + half) % (1 << bits)) - half


def check_int(value: object, bits: int, what: str) -> int:
    """``value`` if it is an int that fits ``bits`` signed bits; TypeError/ValueError if not."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {value!r}")
    low, high = _bounds(bits)
    if not low <= value <= high:
        raise ValueError(f"{what} must fit a signed {bits}-bit int ({low}..{high}), got {value}")
    return value


def encode(value: int, bits: int) -> bytes:
    """Big-endian two's complement, as Java's ByteBuffer writes it."""
    return value.to_bytes(bits // 8, "big", signed=True)


def decode(data: bytes, bits: int, path: str, *, empty_is_zero: bool) -> int:
    """The number in ``data``; extra trailing bytes are ignored, as in Curator."""
    width = bits // 8
    if not data and empty_is_zero:
        return 0
    if len(data) < width:
        raise CorruptedValueError(
            f"{path} holds {len(data)} byte(s) ({data.hex() or 'empty'}), not a {bits}-bit "
            f"counter ({width} bytes, big-endian). Another program wrote it; fix or delete "
            "the node.",
            path,
        )
    return int.from_bytes(data[:width], "big", signed=True)


def is_newer(candidate_mzxid: int, current_mzxid: int) -> bool:
    """Whether a read or write (by its stat's mzxid) is newer than what the cache holds.

    mzxid is the zxid of the node's last write: 64 bits, growing with every
    change in the ensemble (a delete and re-create too). dataVersion is NOT
    used: it wraps from 2**31 - 1 to -2**31 and restarts at 0 on re-create.
    """
    return candidate_mzxid > current_mzxid


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

_LATENT, _STARTED, _CLOSED = "latent", "started", "closed"


class SharedCount:
    """A shared 32-bit int with change listeners: ``start()`` (or ``with``) before use."""

    _bits = 32

    def __init__(self, client: ZkClient, path: str, seed: int) -> None:
        if not isinstance(client, ZkClient):
            raise TypeError(f"SharedCount needs a ZkClient, got {client!r}")
        self.client = client
        self.path = _paths.validate_writable_path(path)
        self.seed = check_int(seed, self._bits, "seed")
        self._guard = threading.Lock()
        self._state = _LATENT
        self._cached: _Cached | None = None
        self._listeners: list[CountListener] = []
        self._notifier = SerialExecutor(f"zk-recipes SharedCount listeners {self.path}")
        self._refresher = SerialExecutor(f"zk-recipes SharedCount refresh {self.path}")
        self._refresh_queued = False

    # -- lifecycle -------------------------------------------------------
    def start(self) -> SharedCount:
        """Create the node with ``seed`` if it is absent, read it and start watching."""
        with self._guard:
            if self._state != _LATENT:
                raise RecipeUsageError(
                    f"{self!r} was already started; a SharedCount starts once (make a new one)"
                )
            self._state = _STARTED
        try:
            self.client.add_listener(self._on_state)
            for _ in range(5):
                with contextlib.suppress(NodeExistsError):
                    self.client.create(self.path, encode(self.seed, self._bits), parents=True)
                self.client.retry(self._read)
                if self._cached is not None:
                    return self
            raise NoNodeError(f"{self.path} keeps being deleted while starting", self.path)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop watching and notifying. Idempotent."""
        with self._guard:
            if self._state == _CLOSED:
                return
            self._state = _CLOSED
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
        self._current()
        self.client.retry(self._read)
        return self.versioned()

    def set(self, value: int) -> None:
        """Write ``value`` unconditionally (the listeners are told, like for any change)."""
        self._current()
        data = encode(check_int(value, self._bits, "value"), self._bits)
        stat = self.client.retry(lambda: self.client.set(self.path, data))
        self._offer(value, stat)

    def try_set(self, previous: VersionedValue, value: int) -> bool:
        """Write ``value`` only if the count is still ``previous``; False if it changed.

        ``previous`` comes from ``versioned()``. False (the node changed since,
        or ``previous`` is not what this instance last saw) means nothing was
        written, and the cache was refreshed: take ``versioned()`` again.
        ConnectionLostError means the write may or may not have been applied.
        """
        current = self._current()
        if not isinstance(previous, VersionedValue):
            raise TypeError(f"previous must be a VersionedValue from versioned(), got {previous!r}")
        data = encode(check_int(value, self._bits, "value"), self._bits)
        if (current.value, current.version) != tuple(previous):
            return False
        try:
            # Not resent on a lost reply: the copy would fail as BadVersion (see above).
            stat = self.client.set(self.path, data, previous.version)
        except (BadVersionError, NoNodeError):
            with contextlib.suppress(ConnectionLostError, ZkTimeoutError, RetriesExhaustedError):
                self.client.retry(self._read)
            return False
        self._offer(value, stat)
        return True

    # -- listeners -------------------------------------------------------
    def add_listener(self, listener: CountListener) -> None:
        """Call ``listener(value)`` on each newer value seen, in order, on a thread of ours."""
        if not callable(listener):
            raise TypeError(f"a SharedCount listener must be callable, got {listener!r}")
        with self._guard:
            if self._state == _CLOSED:
                raise RecipeUsageError(f"{self!r} is closed")
            self._listeners.append(listener)

    def remove_listener(self, listener: CountListener) -> None:
        with self._guard, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def __repr__(self) -> str:
        cached = self._cached
        shown = f"value={cached.value} version={cached.version}" if cached else "no value"
        return f"<SharedCount {self.path} {self._state} {shown}>"

    # -- internals -------------------------------------------------------
    def _current(self) -> _Cached:
        state, cached = self._state, self._cached
        if state != _STARTED or cached is None:
            raise RecipeUsageError(
                f"{self!r} is {'closed' if state == _CLOSED else 'not started'}: "
                "call start() or use `with SharedCount(...) as count:`"
            )
        return cached

    def _read(self) -> None:
        """Read the node with the watch armed and offer what was read."""
        while True:
            try:
                data, stat = self.client.get(self.path, watch=self._on_watch)
            except NoNodeError:
                # Deleted: keep the last value and wait for the node to come back.
                if self.client.exists(self.path, watch=self._on_watch) is None:
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
            if old is not None and self._state == _STARTED:
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
            if self._state != _STARTED or self._refresh_queued:
                return
            self._refresh_queued = True
        self._refresher.submit(self._refresh)

    def _refresh(self) -> None:
        with self._guard:
            self._refresh_queued = False  # later events schedule another read
            if self._state != _STARTED:
                return
        try:
            self.client.retry(self._read)
        except CorruptedValueError:
            log.error("SharedCount %s: keeping the last value", self.path, exc_info=True)
        except ClientStateError:
            pass  # the client is closing
        except (ConnectionLostError, ZkTimeoutError, RetriesExhaustedError):
            # Reconnecting triggers another read (see _on_state).
            log.debug("SharedCount %s: re-read failed", self.path, exc_info=True)


# -- AtomicLong / AtomicInt ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AtomicStats:
    """How an update went: tries and seconds spent, optimistically and under the lock."""

    optimistic_tries: int = 0
    promoted_tries: int = 0
    optimistic_time: float = 0.0
    promoted_time: float = 0.0


@dataclasses.dataclass(frozen=True)
class AtomicValue:
    """The result of an update: ``succeeded``, the value before (``pre``) and after (``post``).

    When ``succeeded`` is False nothing was written and ``post == pre`` (the
    last value read).
    """

    succeeded: bool
    pre: int
    post: int
    stats: AtomicStats = AtomicStats()


def _default_promoted_policy() -> RetryPolicy:
    return RetryNTimes(0, 0)


@dataclasses.dataclass(frozen=True)
class PromotedToLock:
    """Fall back to a Lock at ``lock_path`` when optimistic tries fail (Curator's PromotedToLock).

    ``retry_policy``: tries under the lock (default one try). ``timeout``:
    how long to wait for the lock (None: as long as it takes).
    """

    lock_path: str
    retry_policy: RetryPolicy = dataclasses.field(default_factory=_default_promoted_policy)
    timeout: float | None = None

    def __post_init__(self) -> None:
        _paths.validate_writable_path(self.lock_path, what="lock_path")
        if not isinstance(self.retry_policy, RetryPolicy):
            raise TypeError(f"retry_policy must be a RetryPolicy, got {self.retry_policy!r}")
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0
        ):
            raise ValueError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")


def _default_policy() -> RetryPolicy:
    return BoundedExponentialBackoffRetry(0.005, 0.1, 10)


class _Try(NamedTuple):
    succeeded: bool
    pre: int
    post: int


class _AtomicNumber:
    _bits: ClassVar[int]
    _kind: ClassVar[str]

    def __init__(
        self,
        client: ZkClient,
        path: str,
        *,
        retry_policy: RetryPolicy | None = None,
        promote_to_lock: PromotedToLock | str | None = None,
    ) -> None:
        if not isinstance(client, ZkClient):
            raise TypeError(f"{self._kind} needs a ZkClient, got {client!r}")
        if retry_policy is None:
            retry_policy = _default_policy()
        if not isinstance(retry_policy, RetryPolicy):
            raise TypeError(f"retry_policy must be a RetryPolicy, got {retry_policy!r}")
        if isinstance(promote_to_lock, str):
            promote_to_lock = PromotedToLock(promote_to_lock)
        if promote_to_lock is not None and not isinstance(promote_to_lock, PromotedToLock):
            raise TypeError(
                f"promote_to_lock must be a lock path or a PromotedToLock, got {promote_to_lock!r}"
            )
        self.client = client
        self.path = _paths.validate_writable_path(path)
        self.retry_policy = retry_policy
        self.promote_to_lock = promote_to_lock
        self._lock = Lock(client, promote_to_lock.lock_path) if promote_to_lock else None

    # -- reads -----------------------------------------------------------
    def get(self) -> int:
        """The current value (0 when the node does not exist or is empty)."""
        data, _ = self._read()
        return self._decode(data)

    # -- updates (optimistic, then promoted) -----------------------------
    def increment(self) -> AtomicValue:
        return self._update(lambda value: value + 1)

    def decrement(self) -> AtomicValue:
        return self._update(lambda value: value - 1)

    def add(self, delta: int) -> AtomicValue:
        check_int(delta, self._bits, "delta")
        return self._update(lambda value: value + delta)

    def subtract(self, delta: int) -> AtomicValue:
        check_int(delta, self._bits, "delta")
        return self._update(lambda value: value - delta)

    def try_set(self, value: int) -> AtomicValue:
        """Set ``value`` through the same tries as ``add`` (versioned writes, maybe promoted)."""
        check_int(value, self._bits, "value")
        return self._update(lambda _old: value)

    def compare_and_set(self, expected: int, value: int) -> AtomicValue:
        """One try: write ``value`` if the counter is ``expected`` (a missing node counts as 0)."""
        check_int(expected, self._bits, "expected")
        check_int(value, self._bits, "value")
        started = time.monotonic()
        data, stat = self._read()
        pre = self._decode(data)
        ok = pre == expected and self._write(stat, value)
        stats = AtomicStats(optimistic_tries=1, optimistic_time=time.monotonic() - started)
        return AtomicValue(ok, pre, value if ok else pre, stats)

    def force_set(self, value: int) -> None:
        """Write ``value`` unconditionally (creating the node if needed)."""
        data = encode(check_int(value, self._bits, "value"), self._bits)
        while True:
            try:
                self.client.retry(lambda: self.client.set(self.path, data))
                return
            except NoNodeError:
                pass
            try:
                self.client.create(self.path, data, parents=True)
                return
            except NodeExistsError:
                continue

    def initialize(self, value: int) -> bool:
        """Create the node with ``value`` if it does not exist; False if it does."""
        data = encode(check_int(value, self._bits, "value"), self._bits)
        return self._send(lambda: self._create(data))

    def __repr__(self) -> str:
        promoted = f" promoted={self.promote_to_lock.lock_path}" if self.promote_to_lock else ""
        return f"<{self._kind} {self.path}{promoted}>"

    # -- internals -------------------------------------------------------
    def _decode(self, data: bytes) -> int:
        return decode(data, self._bits, self.path, empty_is_zero=True)

    def _read(self) -> tuple[bytes, ZnodeStat | None]:
        try:
            return self.client.retry(lambda: self.client.get(self.path))
        except NoNodeError:
            return b"", None

    def _update(self, compute: Callable[[int], int]) -> AtomicValue:
        started = time.monotonic()
        result, tries = self._tries(compute, self.retry_policy)
        optimistic_time = time.monotonic() - started
        stats = AtomicStats(optimistic_tries=tries, optimistic_time=optimistic_time)
        if result.succeeded or self._lock is None or self.promote_to_lock is None:
            return AtomicValue(result.succeeded, result.pre, result.post, stats)
        promoted = self.promote_to_lock
        started = time.monotonic()
        promoted_tries = 0
        if self._lock.acquire(timeout=promoted.timeout):
            try:
                result, promoted_tries = self._tries(compute, promoted.retry_policy)
            finally:
                self._lock.release()
        stats = dataclasses.replace(
            stats, promoted_tries=promoted_tries, promoted_time=time.monotonic() - started
        )
        return AtomicValue(result.succeeded, result.pre, result.post, stats)

    def _tries(self, compute: Callable[[int], int], policy: RetryPolicy) -> tuple[_Try, int]:
        started = time.monotonic()
        attempt = 0
        while True:
            result = self._try_once(compute)
            if result.succeeded:
                return result, attempt + 1
            delay = policy.sleep_for(attempt, time.monotonic() - started)
            if delay is None:
                return result, attempt + 1
            time.sleep(delay)
            attempt += 1

    def _try_once(self, compute: Callable[[int], int]) -> _Try:
        data, stat = self._read()
        pre = self._decode(data)
        post = wrap(compute(pre), self._bits)
        if self._write(stat, post):
            return _Try(True, pre, post)
        return _Try(False, pre, pre)

    def _write(self, stat: ZnodeStat | None, value: int) -> bool:
        """Versioned write of ``value`` over what ``stat`` described; False if it changed."""
        data = encode(value, self._bits)
        if stat is None:
            return self._send(lambda: self._create(data))
        return self._send(lambda: self.client.set(self.path, data, stat.version))

    def _create(self, data: bytes) -> object:
        # One attempt (parents made as needed): a resent create would meet its own
        # first copy as NodeExists.
        return self.client.create(self.path, data, parents=True, retry=False)

    def _send(self, write: Callable[[], object]) -> bool:
        try:
            write()
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        except (ConnectionLostError, ZkTimeoutError) as exc:
            kind = SessionLost if isinstance(exc, SessionLost) else ConnectionLostError
            raise kind(
                f"{self._kind} {self.path}: the connection failed during a write, which may or "
                "may not have been applied; read the value again before deciding what to do"
            ) from exc


class AtomicLong(_AtomicNumber):
    """A 64-bit counter updated by compare-and-set (Curator's DistributedAtomicLong)."""

    _bits = 64
    _kind = "AtomicLong"


class AtomicInt(_AtomicNumber):
    """A 32-bit counter updated by compare-and-set (Curator's DistributedAtomicInteger)."""

    _bits = 32
    _kind = "AtomicInt"
