"""Retry policies and the retry loop: when to try a ZooKeeper call again, and after how long.

A policy answers one question, ``sleep_for(attempt, elapsed)``: how many
seconds to sleep before retry number *attempt* (0 is the first retry, after
the first failure), or ``None`` to give up. It keeps no per-loop state, so
one frozen instance is shared by every loop of a client, on any thread.
`retry` is the loop: it calls a function, asks `is_retryable`
whether a failure is worth another try, asks the policy how long to wait,
and never sleeps past an optional deadline.

Curator mapping: same class names, same argument order, seconds not ms::

    RetryOneTime(sleep)                          RetryNTimes(n, sleep)
    RetryForever(interval)                       RetryUntilElapsed(max_elapsed, sleep)
    ExponentialBackoffRetry(base_sleep, max_retries, max_sleep=None)
    BoundedExponentialBackoffRetry(base_sleep, max_sleep, max_retries)
    SessionFailedRetryPolicy(p)                  built in: SessionLost is never retried
    (no Curator equivalent)                      PlateauRetry(base_sleep, backoff_retries,
                                                              plateau_low, plateau_high)

Where we differ: a bad argument raises ConfigurationError instead of being
pinned with a warning (no MAX_RETRIES_LIMIT = 29; the back-off exponent is
capped inside the arithmetic instead, see ``_MAX_SHIFT``); fixed-interval
policies spread their sleeps by +-10 % by default so a fleet does not retry
in lockstep; the back-off multiplier is uniform over [1, 2**(attempt+1) - 1]
(Curator's ``max(1, rand(2**(attempt+1)))`` weighs 1 twice).

What is retried: ConnectionLostError, OperationTimeoutError and
SessionMovedError. The session survives them; the request may or may not have
been applied, and the recipe's own protocol (protected names, re-listing)
copes with that. OutcomeUnknown, a ConnectionLostError too, is not retried:
it says that no protocol can tell (a sequential create that is not
protected, a transaction without a protected create), and a resend could
make a second copy. SessionLost is a ConnectionLostError too but is NOT retried:
when the session is gone, so is every ephemeral node it owned, so a lock is
no longer held and a leader no longer leads. Only the recipe knows what that
means (report LockLost, re-enter the election); a loop that silently tried
again would carry on as if it still owned them. NodeError and the like are
answers, not failures: asking again gets the same answer.

Randomness comes from a shared ``random.SystemRandom`` unless a policy is
given ``rng=``: it has no state to guard across threads and, unlike a private
``random.Random``, is not duplicated into fork()ed workers, whose sleeps would
otherwise match draw for draw. Tests pass ``rng=random.Random(seed)``.

Size: over the house limit (tests/test_module_sizes.py): seven policies and
one loop, one idea; about a fifth is the docstrings that explain where each
differs from Curator.
"""

from __future__ import annotations

import abc
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import SupportsIndex, TypeVar

from zk_recipes._errors import (
    ConfigurationError,
    ConnectionLostError,
    OutcomeUnknown,
    RetriesExhaustedError,
    SessionLost,
    ZkTimeoutError,
    shown,
)

T = TypeVar("T")

logger = logging.getLogger("zk_recipes.retry")

_DEFAULT_RNG: random.Random = random.SystemRandom()

# The back-off multiplier is drawn from [1, 2**shift - 1] with shift = attempt + 1,
# but shift stops growing at 63. By then the upper bound is 9.2e18 * base_sleep
# (290 million years for a 1 ms base, far past what time.sleep accepts), so no
# usable configuration can tell the difference, while the draw stays a machine-word
# randint: attempt=10**9 costs what attempt=5 costs. max_retries is never pinned.
_MAX_SHIFT = 63


class RetryPolicy(abc.ABC):
    """Decides whether, and after how long, a failed operation is tried again.

    Implementations must be immutable and hold no per-loop state: one instance
    is shared by every retry loop of a client, concurrently.
    """

    __slots__ = ()

    @abc.abstractmethod
    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        """Seconds to sleep before retry number `attempt` (0 = the first retry, after the
        first failure), given `elapsed` seconds since the loop started; None = give up."""

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}()"


# -- argument checks: every one names the argument, the value and what is allowed ----------


def _bad(
    owner: str,
    name: str,
    value: object,
    allowed: str,
    hint: str = "",
    bounds: tuple[float, ...] = (0, 1),
) -> ConfigurationError:
    got = shown(value, *bounds)
    return ConfigurationError(f"{owner}: {name} must be {allowed}, got {got}{hint}")


def _seconds(owner: str, name: str, value: object, *, positive: bool = False) -> float:
    allowed = "a finite number of seconds " + ("> 0" if positive else ">= 0")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(owner, name, value, allowed)
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond the float range
        raise _bad(owner, name, value, allowed) from None
    if not math.isfinite(seconds) or seconds < 0 or (positive and seconds == 0):
        raise _bad(owner, name, value, allowed)
    return seconds


def _count(owner: str, name: str, value: object) -> int:
    # SupportsIndex admits numpy integers; bool is an int but never a count.
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise _bad(owner, name, value, "an int >= 0")
    count = value.__index__()
    if count < 0:
        raise _bad(owner, name, value, "an int >= 0")
    return count


def _jitter(owner: str, sleep_name: str, sleep: float, value: object) -> float:
    allowed = "a number between 0 and 1 (a fraction of the sleep)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(owner, "jitter", value, allowed)
    jitter = float(value)
    if not 0 <= jitter <= 1:  # also refuses nan
        raise _bad(owner, "jitter", value, allowed)
    if not math.isfinite(sleep * (1 + jitter)):
        raise _bad(
            owner, sleep_name, sleep, f"small enough that {sleep_name} * (1 + jitter) is finite"
        )
    return jitter


def _check_rng(owner: str, value: object) -> None:
    if value is not None and not isinstance(value, random.Random):
        raise _bad(owner, "rng", value, "None or a random.Random instance")


def _set(obj: object, **values: object) -> None:
    # Frozen dataclasses store their normalised arguments through object.__setattr__.
    for name, value in values.items():
        object.__setattr__(obj, name, value)


# -- the sleep arithmetic ------------------------------------------------------------------


def _uniform(rng: random.Random | None, low: float, high: float) -> float:
    if low == high:
        return low
    value = (_DEFAULT_RNG if rng is None else rng).uniform(low, high)
    return min(high, max(low, value))  # uniform() may round just past an end point


def _jittered(rng: random.Random | None, sleep: float, jitter: float) -> float:
    return _uniform(rng, sleep * (1 - jitter), sleep * (1 + jitter))


def _backoff(rng: random.Random | None, base_sleep: float, attempt: int) -> float:
    shift = min(attempt + 1, _MAX_SHIFT)
    return base_sleep * (_DEFAULT_RNG if rng is None else rng).randint(1, (1 << shift) - 1)


# -- fixed-interval policies ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryOneTime(RetryPolicy):
    """Retry once, after `sleep` seconds (+- `jitter`). Curator: ``RetryOneTime``."""

    sleep: float
    jitter: float = field(default=0.1, kw_only=True)
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        sleep = _seconds(owner, "sleep", self.sleep)
        _set(self, sleep=sleep, jitter=_jitter(owner, "sleep", sleep, self.jitter))
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        return _jittered(self.rng, self.sleep, self.jitter) if attempt < 1 else None


@dataclass(frozen=True, slots=True)
class RetryNTimes(RetryPolicy):
    """Retry `n` times (so `n` + 1 attempts), `sleep` seconds (+- `jitter`) apart.

    Curator: ``RetryNTimes``. ``RetryNTimes(0, 0)`` never retries.
    """

    n: int
    sleep: float
    jitter: float = field(default=0.1, kw_only=True)
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        n = _count(owner, "n", self.n)
        sleep = _seconds(owner, "sleep", self.sleep)
        _set(
            self,
            n=n,
            sleep=sleep,
            jitter=_jitter(owner, "sleep", sleep, self.jitter),
        )
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        return _jittered(self.rng, self.sleep, self.jitter) if attempt < self.n else None


@dataclass(frozen=True, slots=True)
class RetryForever(RetryPolicy):
    """Always retry, `interval` seconds (+- `jitter`) apart. Curator: ``RetryForever``."""

    interval: float
    jitter: float = field(default=0.1, kw_only=True)
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        interval = _seconds(owner, "interval", self.interval, positive=True)
        _set(self, interval=interval, jitter=_jitter(owner, "interval", interval, self.jitter))
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        return _jittered(self.rng, self.interval, self.jitter)


@dataclass(frozen=True, slots=True)
class RetryUntilElapsed(RetryPolicy):
    """Retry, `sleep` seconds (+- `jitter`) apart, while `elapsed` < `max_elapsed`.

    As in Curator's ``RetryUntilElapsed``, `elapsed` is measured before the
    sleep, so the last retry may start up to one sleep after `max_elapsed`;
    give `retry` a deadline for a hard bound.
    """

    max_elapsed: float
    sleep: float
    jitter: float = field(default=0.1, kw_only=True)
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        max_elapsed = _seconds(owner, "max_elapsed", self.max_elapsed)
        sleep = _seconds(owner, "sleep", self.sleep)
        _set(
            self,
            max_elapsed=max_elapsed,
            sleep=sleep,
            jitter=_jitter(owner, "sleep", sleep, self.jitter),
        )
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        if elapsed < self.max_elapsed:
            return _jittered(self.rng, self.sleep, self.jitter)
        return None


# -- exponential policies ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExponentialBackoffRetry(RetryPolicy):
    """Retry `max_retries` times; before retry k sleep `base_sleep` * a random integer
    in [1, 2**(k+1) - 1], at most `max_sleep` if given. Curator: ``ExponentialBackoffRetry``.

    Without `max_sleep` the sleeps double without limit: set it (or use
    `BoundedExponentialBackoffRetry` / `PlateauRetry`) if
    `max_retries` is more than a handful.
    """

    base_sleep: float
    max_retries: int
    max_sleep: float | None = None
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        base = _seconds(owner, "base_sleep", self.base_sleep, positive=True)
        max_sleep = self.max_sleep
        if max_sleep is not None:
            max_sleep = _seconds(owner, "max_sleep", max_sleep)
            if max_sleep < base:
                raise _bad(
                    owner,
                    "max_sleep",
                    self.max_sleep,
                    f"None or >= base_sleep ({shown(base, max_sleep)})",
                    bounds=(base,),
                )
        _set(
            self,
            base_sleep=base,
            max_retries=_count(owner, "max_retries", self.max_retries),
            max_sleep=max_sleep,
        )
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        if attempt >= self.max_retries:
            return None
        sleep = _backoff(self.rng, self.base_sleep, attempt)
        return sleep if self.max_sleep is None else min(self.max_sleep, sleep)


@dataclass(frozen=True, slots=True)
class BoundedExponentialBackoffRetry(RetryPolicy):
    """`ExponentialBackoffRetry` with a mandatory `max_sleep`.

    The argument order is Curator's ``BoundedExponentialBackoffRetry(base,
    max_sleep, max_retries)``, unlike `ExponentialBackoffRetry`'s.
    """

    base_sleep: float
    max_sleep: float
    max_retries: int
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        base = _seconds(owner, "base_sleep", self.base_sleep, positive=True)
        max_sleep = _seconds(owner, "max_sleep", self.max_sleep)
        if max_sleep < base:
            raise _bad(
                owner,
                "max_sleep",
                self.max_sleep,
                f">= base_sleep ({shown(base, max_sleep)})",
                " (the order is base_sleep, max_sleep, max_retries, as in Curator)",
                bounds=(base,),
            )
        _set(
            self,
            base_sleep=base,
            max_sleep=max_sleep,
            max_retries=_count(owner, "max_retries", self.max_retries),
        )
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        if attempt >= self.max_retries:
            return None
        return min(self.max_sleep, _backoff(self.rng, self.base_sleep, attempt))


@dataclass(frozen=True, slots=True)
class PlateauRetry(RetryPolicy):
    """Back off exponentially for `backoff_retries` retries, then retry forever.

    Retry k < `backoff_retries` sleeps as `ExponentialBackoffRetry`
    would, at most `plateau_high`; every later retry sleeps a uniform random
    time in [`plateau_low`, `plateau_high`]. A long outage therefore neither
    gives up (killing the client) nor stretches the gaps to hours, and the
    fleet's reconnects stay spread out. No Curator equivalent.
    """

    base_sleep: float
    backoff_retries: int
    plateau_low: float
    plateau_high: float
    rng: random.Random | None = field(default=None, kw_only=True, compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = type(self).__name__
        base = _seconds(owner, "base_sleep", self.base_sleep, positive=True)
        backoff_retries = _count(owner, "backoff_retries", self.backoff_retries)
        low = _seconds(owner, "plateau_low", self.plateau_low)
        high = _seconds(owner, "plateau_high", self.plateau_high)
        if high < low:
            raise _bad(
                owner,
                "plateau_high",
                self.plateau_high,
                f">= plateau_low ({shown(low, high)})",
                bounds=(low,),
            )
        if high < base:
            raise _bad(
                owner,
                "plateau_high",
                self.plateau_high,
                f">= base_sleep ({shown(base, high)})",
                bounds=(base,),
            )
        _set(
            self,
            base_sleep=base,
            backoff_retries=backoff_retries,
            plateau_low=low,
            plateau_high=high,
        )
        _check_rng(owner, self.rng)

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        if attempt < self.backoff_retries:
            return min(self.plateau_high, _backoff(self.rng, self.base_sleep, attempt))
        return _uniform(self.rng, self.plateau_low, self.plateau_high)


# -- the loop ------------------------------------------------------------------------------


def is_retryable(exc: BaseException) -> bool:
    """True for a broken connection, an operation timeout or a moved session; False for
    everything else, SessionLost included (its recipe must decide, see the module note),
    and OutcomeUnknown: a write that may have applied is not sent again blindly."""
    return (
        isinstance(exc, ConnectionLostError)
        and not isinstance(exc, SessionLost)
        and not isinstance(exc, OutcomeUnknown)
    )


def _attempts(count: int) -> str:
    return f"{count} attempt" if count == 1 else f"{count} attempts"


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RetryRun:
    """One retry loop's bookkeeping: after each failure, how long to sleep, or why to stop.

    Written once for the two loops that sleep differently: ``retry`` below
    (the sync calls', asleep on the calling thread) and the recipes' steps
    (``_internals/retry_steps.py``, whose back-off a coroutine awaits).
    """

    __slots__ = ("_clock", "_deadline", "_on_retry", "_policy", "_start", "attempt")

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_retry: Callable[[int, BaseException, float], None] | None = None,
    ) -> None:
        if not isinstance(policy, RetryPolicy):
            raise ConfigurationError(
                f"retry: policy must be a RetryPolicy instance, got {policy!r}"
            )
        if deadline is not None and math.isnan(deadline):
            raise ConfigurationError("retry: deadline must be None or a clock() time, got nan")
        self._policy = policy
        self._deadline = deadline
        self._clock = clock
        self._on_retry = on_retry
        self._start = clock()
        #: Retries so far, from 0 as in ``RetryPolicy.sleep_for``.
        self.attempt = 0

    def delay_after(self, exc: Exception) -> float:
        """Seconds to sleep before the next try after ``exc`` (a retryable failure).

        Raises ZkTimeoutError from it at or past the deadline (checked before
        the policy), RetriesExhaustedError when the policy gives up.
        """
        policy, attempt, deadline = self._policy, self.attempt, self._deadline
        now = self._clock()
        elapsed = now - self._start
        if deadline is not None and now >= deadline:
            raise ZkTimeoutError(
                f"retry deadline passed after {_attempts(attempt + 1)} in {elapsed:.3f} s:"
                f" {_describe(exc)}"
            ) from exc
        delay = policy.sleep_for(attempt, elapsed)
        if delay is None:
            raise RetriesExhaustedError(
                f"{policy!r} gave up after {_attempts(attempt + 1)} in {elapsed:.3f} s:"
                f" {_describe(exc)}"
            ) from exc
        if not (delay >= 0 and math.isfinite(delay)):
            raise ConfigurationError(
                f"retry: {policy!r}.sleep_for({attempt}, {elapsed!r}) returned {delay!r};"
                " it must return None or a finite number of seconds >= 0"
            ) from exc
        if deadline is not None:
            delay = min(delay, deadline - now)
        logger.debug(
            "retry %d in %.3f s after %s (policy %r)", attempt, delay, _describe(exc), policy
        )
        if self._on_retry is not None:
            self._on_retry(attempt, exc, delay)
        self.attempt += 1
        return delay


def retry(
    policy: RetryPolicy,
    fn: Callable[[], T],
    *,
    deadline: float | None = None,
    retryable: Callable[[BaseException], bool] = is_retryable,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
) -> T:
    """Call `fn` until it returns, retrying the failures `retryable` accepts as `policy` allows.

    `fn` is always called at least once. An exception that is not retryable
    propagates unchanged; only ``Exception`` subclasses are considered, so
    KeyboardInterrupt and friends always propagate. When the policy gives up,
    RetriesExhaustedError is raised from the last failure. `deadline` is an
    absolute `clock()` time: no sleep runs past it, and a failure at or after
    it raises ZkTimeoutError from that failure (checked before the policy).
    `on_retry(attempt, exc, seconds)` runs before each sleep, `attempt`
    counting retries from 0 as in `RetryPolicy.sleep_for`.
    """
    run = RetryRun(policy, deadline=deadline, clock=clock, on_retry=on_retry)
    while True:
        try:
            return fn()
        except Exception as exc:
            if not retryable(exc):
                raise
            delay = run.delay_after(exc)
        sleep(delay)


__all__ = [
    "BoundedExponentialBackoffRetry",
    "ExponentialBackoffRetry",
    "PlateauRetry",
    "RetryForever",
    "RetryNTimes",
    "RetryOneTime",
    "RetryPolicy",
    "RetryUntilElapsed",
    "is_retryable",
    "retry",
]
