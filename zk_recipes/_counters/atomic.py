"""AtomicLong and AtomicInt: Curator's DistributedAtomicLong / DistributedAtomicInteger.

The number lives in one PERSISTENT node, 8 (long) or 4 (int) bytes of
big-endian two's complement, encoded as in _counters/shared_count.py.

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

SUSPENDED: nothing changes locally. LOST: the node is persistent, nothing is
lost with the session.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import ClassVar, NamedTuple, final

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._counters.encoding import check_int, decode, encode, wrap
from zk_recipes._errors import (
    BadVersionError,
    ConfigurationError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    SessionLost,
    WrongTypeError,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._locks.lock import Lock
from zk_recipes._retry import BoundedExponentialBackoffRetry, RetryNTimes, RetryPolicy
from zk_recipes._types import ZnodeStat

log = logging.getLogger("zk_recipes.atomic")

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
            raise WrongTypeError(f"retry_policy must be a RetryPolicy, got {self.retry_policy!r}")
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0
        ):
            raise ConfigurationError(
                f"timeout must be None or a number of seconds >= 0, got {timeout!r}"
            )


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
        require_client(client, self._kind)
        if retry_policy is None:
            retry_policy = _default_policy()
        if not isinstance(retry_policy, RetryPolicy):
            raise WrongTypeError(f"retry_policy must be a RetryPolicy, got {retry_policy!r}")
        if isinstance(promote_to_lock, str):
            promote_to_lock = PromotedToLock(promote_to_lock)
        if promote_to_lock is not None and not isinstance(promote_to_lock, PromotedToLock):
            raise WrongTypeError(
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
        except (ConnectionLostError, ZkTimeoutError, SessionLost) as exc:
            kind = SessionLost if isinstance(exc, SessionLost) else ConnectionLostError
            raise kind(
                f"{self._kind} {self.path}: the connection failed during a write, which may or "
                "may not have been applied; read the value again before deciding what to do"
            ) from exc


@final
class AtomicLong(_AtomicNumber):
    """A 64-bit counter updated by compare-and-set (Curator's DistributedAtomicLong).

    ``AtomicLong(client, "/counters/orders", retry_policy=None, promote_to_lock=None)``:
    ``increment()``, ``add(n)``, ``compare_and_set(expected, value)``... each
    returns an AtomicValue (``succeeded``, ``pre``, ``post``): optimistic
    versioned writes under ``retry_policy``, then, with ``promote_to_lock`` (a
    lock path or a PromotedToLock), once more under that Lock. Java's
    two's-complement wrap; Curator's bytes. See docs/recipes/atomic-long.md.
    """

    _bits = 64
    _kind = "AtomicLong"


@final
class AtomicInt(_AtomicNumber):
    """A 32-bit counter updated by compare-and-set (Curator's DistributedAtomicInteger).

    As AtomicLong, with 4 bytes and 32-bit arithmetic.
    """

    _bits = 32
    _kind = "AtomicInt"
