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
from zk_recipes._client.steps import Call, Reply, Steps, run_blocking
from zk_recipes._counters.encoding import check_int, decode, encode, wrap
from zk_recipes._errors import (
    BadVersionError,
    ConfigurationError,
    ConnectionLostError,
    NodeExistsError,
    NoNodeError,
    SessionLost,
    WrongTypeError,
    ZkRecipesError,
    ZkTimeoutError,
)
from zk_recipes._internals.args import require_client
from zk_recipes._internals.retry_steps import request_steps
from zk_recipes._internals.waits import Pause
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
        return run_blocking(self._get_steps())

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
        return run_blocking(self._compare_and_set_steps(expected, value))

    def force_set(self, value: int) -> None:
        """Write ``value`` unconditionally (creating the node if needed)."""
        run_blocking(self._force_set_steps(value))

    def initialize(self, value: int) -> bool:
        """Create the node with ``value`` if it does not exist; False if it does."""
        return run_blocking(self._initialize_steps(value))

    def __repr__(self) -> str:
        promoted = f" promoted={self.promote_to_lock.lock_path}" if self.promote_to_lock else ""
        return f"<{self._kind} {self.path}{promoted}>"

    # -- the steps (run blocking above, awaited by aio.AtomicLong) --------
    def _decode(self, data: bytes) -> int:
        return decode(data, self._bits, self.path, empty_is_zero=True)

    def _get_steps(self) -> Steps[int]:
        data, _ = yield from self._read_steps()
        return self._decode(data)

    def _compare_and_set_steps(self, expected: int, value: int) -> Steps[AtomicValue]:
        check_int(expected, self._bits, "expected")
        check_int(value, self._bits, "value")
        started = time.monotonic()
        data, stat = yield from self._read_steps()
        pre = self._decode(data)
        ok = pre == expected and (yield from self._write_steps(stat, value))
        stats = AtomicStats(optimistic_tries=1, optimistic_time=time.monotonic() - started)
        return AtomicValue(ok, pre, value if ok else pre, stats)

    def _read_steps(self) -> Steps[tuple[bytes, ZnodeStat | None]]:
        client = self.client
        try:
            data: bytes
            stat: ZnodeStat
            data, stat = yield from request_steps(client, lambda: client.get_async(self.path))
        except NoNodeError:
            return b"", None
        return data, stat

    def _update(self, compute: Callable[[int], int]) -> AtomicValue:
        first = run_blocking(self._optimistic_steps(compute))
        promoted = self._promotion(first)
        if promoted is None or self._lock is None:
            return first
        started = time.monotonic()
        result: tuple[_Try, int] | None = None
        if self._lock.acquire(timeout=promoted.timeout):
            try:
                result = run_blocking(self._tries_steps(compute, promoted.retry_policy))
            finally:
                self._lock.release()
        return self._promoted_value(first, result, started)

    def _optimistic_steps(self, compute: Callable[[int], int]) -> Steps[AtomicValue]:
        """The tries under the counter's policy (each driver then holds its own kind of Lock
        around the promoted tries: ``_promotion``, ``_tries_steps``, ``_promoted_value``)."""
        started = time.monotonic()
        result, tries = yield from self._tries_steps(compute, self.retry_policy)
        stats = AtomicStats(optimistic_tries=tries, optimistic_time=time.monotonic() - started)
        return AtomicValue(result.succeeded, result.pre, result.post, stats)

    def _promotion(self, first: AtomicValue) -> PromotedToLock | None:
        """The promotion to go through after ``first``, the optimistic tries' value; None: done."""
        return None if first.succeeded else self.promote_to_lock

    @staticmethod
    def _promoted_value(
        first: AtomicValue, promoted: tuple[_Try, int] | None, started: float
    ) -> AtomicValue:
        """The update's value: the promoted tries' (None: the lock was not had in time)."""
        result = promoted[0] if promoted else _Try(first.succeeded, first.pre, first.post)
        stats = dataclasses.replace(
            first.stats,
            promoted_tries=promoted[1] if promoted else 0,
            promoted_time=time.monotonic() - started,
        )
        return AtomicValue(result.succeeded, result.pre, result.post, stats)

    def _tries_steps(
        self, compute: Callable[[int], int], policy: RetryPolicy
    ) -> Steps[tuple[_Try, int]]:
        started = time.monotonic()
        attempt = 0
        while True:
            data, stat = yield from self._read_steps()
            pre = self._decode(data)
            post = wrap(compute(pre), self._bits)
            if (yield from self._write_steps(stat, post)):
                return _Try(True, pre, post), attempt + 1
            delay = policy.sleep_for(attempt, time.monotonic() - started)
            if delay is None:
                return _Try(False, pre, pre), attempt + 1
            yield Pause(self.client, delay, None)
            attempt += 1

    def _write_steps(self, stat: ZnodeStat | None, value: int) -> Steps[bool]:
        """Versioned write of ``value`` over what ``stat`` described; False if it changed."""
        data = encode(value, self._bits)
        try:
            if stat is None:
                yield Call(lambda: self._create(data))
            else:
                limit = self.client.settings.connection_timeout
                yield Reply(self.client.set_async(self.path, data, stat.version), limit)
            return True
        except (BadVersionError, NodeExistsError, NoNodeError):
            return False
        except (ConnectionLostError, ZkTimeoutError, SessionLost) as exc:
            raise self._outcome_unknown(exc) from exc

    def _create(self, data: bytes) -> object:
        # One attempt (parents made as needed): a resent create would meet its own
        # first copy as NodeExists.
        return self.client.create(self.path, data, parents=True, retry=False)

    def _force_set_steps(self, value: int) -> Steps[None]:
        data = encode(check_int(value, self._bits, "value"), self._bits)
        client = self.client
        while True:
            try:
                yield from request_steps(client, lambda: client.set_async(self.path, data))
                return
            except NoNodeError:
                pass
            try:
                yield Call(lambda: client.create(self.path, data, parents=True))
                return
            except NodeExistsError:
                continue

    def _initialize_steps(self, value: int) -> Steps[bool]:
        data = encode(check_int(value, self._bits, "value"), self._bits)
        try:
            yield Call(lambda: self._create(data))
            return True
        except NodeExistsError:
            return False
        except (ConnectionLostError, ZkTimeoutError, SessionLost) as exc:
            raise self._outcome_unknown(exc) from exc

    def _outcome_unknown(self, exc: BaseException) -> ZkRecipesError:
        kind = SessionLost if isinstance(exc, SessionLost) else ConnectionLostError
        return kind(
            f"{self._kind} {self.path}: the connection failed during a write, which may or "
            "may not have been applied; read the value again before deciding what to do"
        )


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
