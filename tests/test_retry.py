"""Retry policies and the retry loop, in pure Python: no ZooKeeper, no real sleeping.

The sleep arithmetic is checked as properties over arbitrary arguments and
attempt numbers (huge ones included); the loop runs on a fake clock whose
sleep() only advances time.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import Phase, given, settings, strategies as st

from zk_recipes._errors import (
    BadVersionError,
    ConfigurationError,
    ConnectionLostError,
    ConnectTimeoutError,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    RetriesExhaustedError,
    SessionLost,
    SessionMovedError,
    ZkTimeoutError,
)
from zk_recipes._retry import (
    BoundedExponentialBackoffRetry,
    ExponentialBackoffRetry,
    PlateauRetry,
    RetryForever,
    RetryNTimes,
    RetryOneTime,
    RetryPolicy,
    RetryUntilElapsed,
    is_retryable,
    retry,
)

# No example database: a test run must not leave files behind. No explain phase:
# it installs a trace function after a failure, and pytest-timeout takes any trace
# function for a debugger and stops timing the test, so a failure deep in a long run
# could hang it instead of being reported (seen twice in full CI runs).
PROPERTY = settings(
    max_examples=100,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    print_blob=True,
)

seconds = st.floats(min_value=1e-3, max_value=1e3)
rngs = st.randoms(use_true_random=False)
# Small attempt numbers exercise the arithmetic; huge ones its cost and overflow.
attempts = st.one_of(st.integers(0, 40), st.integers(0, 10**9))


def upper_multiplier(attempt: int) -> float:
    """2**(attempt+1) - 1 as a float; clipped at 2**1000 only so that it stays finite
    (a smaller bound than the true one, so the check is stricter, not looser)."""
    return float(2 ** min(attempt + 1, 1000) - 1)


# -- exponential back-off --------------------------------------------------------------------


@PROPERTY
@given(base=seconds, attempt=attempts, rng=rngs)
def test_exponential_sleep_is_within_base_and_base_times_multiplier(
    base: float, attempt: int, rng: random.Random
) -> None:
    policy = ExponentialBackoffRetry(base, attempt + 1, rng=rng)
    sleep = policy.sleep_for(attempt, 0.0)
    assert sleep is not None
    assert base <= sleep <= base * upper_multiplier(attempt)
    assert math.isfinite(sleep)


@PROPERTY
@given(base=seconds, attempt=st.integers(0, 40), rng=rngs)
def test_exponential_sleep_is_an_integer_multiple_of_base(
    base: float, attempt: int, rng: random.Random
) -> None:
    sleep = ExponentialBackoffRetry(base, 41, rng=rng).sleep_for(attempt, 0.0)
    assert sleep is not None
    multiplier = sleep / base
    assert 1 <= round(multiplier) <= 2 ** (attempt + 1) - 1
    assert math.isclose(multiplier, round(multiplier), rel_tol=1e-9)


def test_exponential_draws_every_multiplier_uniformly() -> None:
    policy = ExponentialBackoffRetry(0.5, 3, rng=random.Random(7))
    assert {policy.sleep_for(0, 0.0) for _ in range(50)} == {0.5}
    draws = [policy.sleep_for(1, 0.0) for _ in range(3000)]
    assert set(draws) == {0.5, 1.0, 1.5}
    # Uniform over {1, 2, 3}, unlike Curator's max(1, rand(4)) which favours 1.
    assert all(850 < draws.count(value) < 1150 for value in (0.5, 1.0, 1.5))
    assert {policy.sleep_for(2, 0.0) for _ in range(1000)} == {0.5 * k for k in range(1, 8)}


@PROPERTY
@given(base=seconds, retries=st.integers(0, 60), attempt=attempts, rng=rngs)
def test_exponential_gives_exactly_max_retries(
    base: float, retries: int, attempt: int, rng: random.Random
) -> None:
    sleep = ExponentialBackoffRetry(base, retries, rng=rng).sleep_for(attempt, 0.0)
    assert (sleep is None) == (attempt >= retries)


def test_max_retries_is_not_pinned_like_curators_29() -> None:
    policy = ExponentialBackoffRetry(0.001, 100, 1.0)
    assert policy.max_retries == 100
    assert policy.sleep_for(99, 0.0) is not None
    assert policy.sleep_for(100, 0.0) is None


def test_huge_attempt_numbers_are_cheap_and_do_not_overflow() -> None:
    policy = ExponentialBackoffRetry(0.001, 10**18)
    plateau = PlateauRetry(0.001, 10**18, 1.0, 2.0)
    started = time.perf_counter()
    sleeps = [p.sleep_for(a, 0.0) for p in (policy, plateau) for a in (10**6, 10**9, 10**18 - 1)]
    assert time.perf_counter() - started < 0.5
    assert all(s is not None and math.isfinite(s) and s >= 0.001 for s in sleeps)
    assert all(s is not None and s <= 2.0 for s in sleeps[3:])


@PROPERTY
@given(base=seconds, spread=st.floats(0, 1e3), attempt=attempts, rng=rngs)
def test_exponential_max_sleep_caps_every_sleep(
    base: float, spread: float, attempt: int, rng: random.Random
) -> None:
    max_sleep = base + spread
    sleep = ExponentialBackoffRetry(base, attempt + 1, max_sleep, rng=rng).sleep_for(attempt, 0.0)
    assert sleep is not None
    assert base <= sleep <= max_sleep


@PROPERTY
@given(base=seconds, spread=st.floats(0, 1e3), retries=st.integers(0, 60), attempt=attempts)
def test_bounded_never_exceeds_max_and_stops_after_max_retries(
    base: float, spread: float, retries: int, attempt: int
) -> None:
    max_sleep = base + spread
    policy = BoundedExponentialBackoffRetry(base, max_sleep, retries, rng=random.Random(attempt))
    sleep = policy.sleep_for(attempt, 0.0)
    if attempt >= retries:
        assert sleep is None
    else:
        assert sleep is not None
        assert base <= sleep <= min(max_sleep, base * upper_multiplier(attempt))


# -- plateau ---------------------------------------------------------------------------------


@PROPERTY
@given(
    base=seconds,
    backoff_retries=st.integers(0, 30),
    low=st.floats(0, 1e3),
    spread=st.floats(0, 1e3),
    attempt=attempts,
    rng=rngs,
)
def test_plateau_backs_off_then_stays_on_the_plateau_forever(
    base: float, backoff_retries: int, low: float, spread: float, attempt: int, rng: random.Random
) -> None:
    high = max(base, low) + spread
    policy = PlateauRetry(base, backoff_retries, low, high, rng=rng)
    sleep = policy.sleep_for(attempt, 1e9)
    assert sleep is not None
    if attempt < backoff_retries:
        assert base <= sleep <= min(high, base * upper_multiplier(attempt))
    else:
        assert low <= sleep <= high


@PROPERTY
@given(seed=st.integers(0, 2**32), backoff_retries=st.integers(0, 12))
def test_plateau_backoff_phase_is_the_exponential_policy(seed: int, backoff_retries: int) -> None:
    # plateau_high is far above base * 2**13, so the bound never bites in the back-off phase.
    plateau = PlateauRetry(0.01, backoff_retries, 1e6, 1e6, rng=random.Random(seed))
    expo = ExponentialBackoffRetry(0.01, backoff_retries, rng=random.Random(seed))
    phase = range(backoff_retries)
    assert [plateau.sleep_for(a, 0.0) for a in phase] == [expo.sleep_for(a, 0.0) for a in phase]
    assert expo.sleep_for(backoff_retries, 0.0) is None
    later = (backoff_retries, backoff_retries + 1, backoff_retries + 10**9)
    assert [plateau.sleep_for(a, 1e9) for a in later] == [1e6, 1e6, 1e6]


def test_plateau_sleeps_spread_over_the_whole_plateau() -> None:
    policy = PlateauRetry(0.1, 0, 10.0, 30.0, rng=random.Random(1))
    sleeps = [policy.sleep_for(attempt, 0.0) for attempt in range(500)]
    assert all(s is not None and 10.0 <= s <= 30.0 for s in sleeps)
    assert min(s for s in sleeps if s is not None) < 11.0
    assert max(s for s in sleeps if s is not None) > 29.0


# -- fixed-interval policies -----------------------------------------------------------------


@PROPERTY
@given(n=st.integers(0, 50), sleep=st.floats(0, 1e3), rng=rngs)
def test_n_times_gives_exactly_n_retries(n: int, sleep: float, rng: random.Random) -> None:
    policy = RetryNTimes(n, sleep, rng=rng)
    allowed = [policy.sleep_for(attempt, 0.0) for attempt in range(n + 10)]
    assert sum(s is not None for s in allowed) == n
    assert all(s is not None for s in allowed[:n])
    assert policy.sleep_for(10**9, 0.0) is None


def test_one_time_retries_once() -> None:
    policy = RetryOneTime(2.0, jitter=0)
    assert [policy.sleep_for(attempt, 0.0) for attempt in range(3)] == [2.0, None, None]


def test_forever_never_gives_up() -> None:
    policy = RetryForever(1.0, jitter=0)
    assert {policy.sleep_for(attempt, 1e12) for attempt in (0, 1, 10**6, 10**18)} == {1.0}


@PROPERTY
@given(max_elapsed=st.floats(0, 1e6), elapsed=st.floats(0, 2e6), attempt=attempts)
def test_until_elapsed_stops_once_elapsed_reaches_max(
    max_elapsed: float, elapsed: float, attempt: int
) -> None:
    sleep = RetryUntilElapsed(max_elapsed, 1.0, jitter=0).sleep_for(attempt, elapsed)
    assert sleep == (1.0 if elapsed < max_elapsed else None)


def test_until_elapsed_boundary() -> None:
    policy = RetryUntilElapsed(5.0, 1.0, jitter=0)
    assert policy.sleep_for(0, 4.999) == 1.0
    assert policy.sleep_for(0, 5.0) is None


def fixed_policy(kind: str, sleep: float, jitter: float, rng: random.Random) -> RetryPolicy:
    if kind == "one":
        return RetryOneTime(sleep, jitter=jitter, rng=rng)
    if kind == "n":
        return RetryNTimes(3, sleep, jitter=jitter, rng=rng)
    if kind == "forever":
        return RetryForever(sleep, jitter=jitter, rng=rng)
    return RetryUntilElapsed(10.0, sleep, jitter=jitter, rng=rng)


@PROPERTY
@given(
    kind=st.sampled_from(["one", "n", "forever", "until"]),
    sleep=seconds,
    jitter=st.floats(0, 1),
    rng=rngs,
)
def test_jittered_sleep_stays_within_bounds(
    kind: str, sleep: float, jitter: float, rng: random.Random
) -> None:
    value = fixed_policy(kind, sleep, jitter, rng).sleep_for(0, 0.0)
    assert value is not None
    assert sleep * (1 - jitter) <= value <= sleep * (1 + jitter)


@pytest.mark.parametrize("kind", ["one", "n", "forever", "until"])
def test_jitter_zero_is_exact_and_default_jitter_spreads(kind: str) -> None:
    assert fixed_policy(kind, 1.5, 0.0, random.Random(0)).sleep_for(0, 0.0) == 1.5
    default = {
        "one": RetryOneTime(1.0, rng=random.Random(3)),
        "n": RetryNTimes(3, 1.0, rng=random.Random(3)),
        "forever": RetryForever(1.0, rng=random.Random(3)),
        "until": RetryUntilElapsed(10.0, 1.0, rng=random.Random(3)),
    }[kind]
    draws = [default.sleep_for(0, 0.0) for _ in range(200)]
    assert all(d is not None and 0.9 <= d <= 1.1 for d in draws)
    assert len(set(draws)) > 190  # a fleet does not retry in lockstep
    assert min(d for d in draws if d is not None) < 0.92  # both sides of the sleep are used
    assert max(d for d in draws if d is not None) > 1.08


# -- objects: immutable, comparable, seedable ------------------------------------------------


def test_policies_are_frozen_slotted_and_compare_without_rng() -> None:
    a = ExponentialBackoffRetry(0.1, 5, rng=random.Random(1))
    b = ExponentialBackoffRetry(0.1, 5)
    assert a == b
    assert hash(a) == hash(b)
    assert a != ExponentialBackoffRetry(0.1, 6)
    assert len({RetryNTimes(1, 0.5), RetryOneTime(0.5)}) == 2  # different classes
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.max_retries = 6  # type: ignore[misc]
    assert not hasattr(a, "__dict__")
    assert repr(a) == "ExponentialBackoffRetry(base_sleep=0.1, max_retries=5, max_sleep=None)"
    assert repr(RetryNTimes(3, 1)) == "RetryNTimes(n=3, sleep=1.0, jitter=0.1)"


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: RetryOneTime(1, rng=rng),
        lambda rng: RetryNTimes(3, 1, rng=rng),
        lambda rng: RetryForever(1, rng=rng),
        lambda rng: RetryUntilElapsed(10, 1, rng=rng),
        lambda rng: ExponentialBackoffRetry(0.1, 5, rng=rng),
        lambda rng: BoundedExponentialBackoffRetry(0.1, 5, 5, rng=rng),
        lambda rng: PlateauRetry(0.1, 5, 1, 2, rng=rng),
    ],
)
def test_rng_takes_no_part_in_equality_hash_or_repr(
    make: Callable[[random.Random | None], RetryPolicy],
) -> None:
    seeded, default = make(random.Random(1)), make(None)
    assert seeded == default
    assert hash(seeded) == hash(default)
    assert repr(seeded) == repr(default)
    assert "rng" not in repr(seeded)


def test_same_seed_gives_same_sleeps() -> None:
    def run(seed: int) -> list[float | None]:
        policy = PlateauRetry(0.1, 4, 1.0, 5.0, rng=random.Random(seed))
        return [policy.sleep_for(attempt, 0.0) for attempt in range(10)]

    assert run(11) == run(11)
    assert run(11) != run(12)


def test_allowed_zeros() -> None:
    assert RetryNTimes(0, 0).sleep_for(0, 0.0) is None
    assert RetryOneTime(0).sleep_for(0, 0.0) == 0.0
    assert RetryUntilElapsed(0, 1).sleep_for(0, 0.0) is None
    assert ExponentialBackoffRetry(0.1, 0).sleep_for(0, 0.0) is None
    assert PlateauRetry(0.1, 0, 0, 0.1, rng=random.Random(0)).sleep_for(0, 0.0) is not None


BAD_ARGUMENTS: list[tuple[Callable[[], object], str, str]] = [
    (lambda: RetryOneTime(-1), "sleep", "-1"),
    (lambda: RetryOneTime(math.nan), "sleep", "nan"),
    (lambda: RetryOneTime(math.inf), "sleep", "inf"),
    (lambda: RetryOneTime("1"), "sleep", "'1'"),  # type: ignore[arg-type]
    (lambda: RetryOneTime(True), "sleep", "True"),
    (lambda: RetryOneTime(10**400), "sleep", "1000"),
    (lambda: RetryOneTime(1e308, jitter=1), "sleep", "1e+308"),
    (lambda: RetryOneTime(1, jitter=1.5), "jitter", "1.5"),
    (lambda: RetryOneTime(1, jitter=-0.1), "jitter", "-0.1"),
    (lambda: RetryOneTime(1, jitter=math.nan), "jitter", "nan"),
    (lambda: RetryOneTime(1, rng=42), "rng", "42"),  # type: ignore[arg-type]
    (lambda: RetryNTimes(-1, 1), "n", "-1"),
    (lambda: RetryNTimes(2.0, 1), "n", "2.0"),  # type: ignore[arg-type]
    (lambda: RetryNTimes(True, 1), "n", "True"),
    (lambda: RetryNTimes("3", 1), "n", "'3'"),  # type: ignore[arg-type]
    (lambda: RetryNTimes(3, -0.5), "sleep", "-0.5"),
    (lambda: RetryForever(0), "interval", "0"),
    (lambda: RetryForever(-1), "interval", "-1"),
    (lambda: RetryForever(math.inf), "interval", "inf"),
    (lambda: RetryUntilElapsed(-1, 1), "max_elapsed", "-1"),
    (lambda: RetryUntilElapsed(math.inf, 1), "max_elapsed", "inf"),
    (lambda: RetryUntilElapsed(10, math.nan), "sleep", "nan"),
    (lambda: ExponentialBackoffRetry(0, 3), "base_sleep", "0"),
    (lambda: ExponentialBackoffRetry(-0.1, 3), "base_sleep", "-0.1"),
    (lambda: ExponentialBackoffRetry(math.nan, 3), "base_sleep", "nan"),
    (lambda: ExponentialBackoffRetry(0.1, -1), "max_retries", "-1"),
    (lambda: ExponentialBackoffRetry(0.1, 3.5), "max_retries", "3.5"),  # type: ignore[arg-type]
    (lambda: ExponentialBackoffRetry(0.1, False), "max_retries", "False"),
    (lambda: ExponentialBackoffRetry(0.1, 3, 0.05), "max_sleep", "0.05"),
    (lambda: ExponentialBackoffRetry(0.1, 3, math.inf), "max_sleep", "inf"),
    (lambda: ExponentialBackoffRetry(0.1, 3, rng=random), "rng", "module"),  # type: ignore[arg-type]
    # Exponential's argument order given to Bounded by mistake.
    (lambda: BoundedExponentialBackoffRetry(0.1, 3, 5.0), "max_retries", "5.0"),  # type: ignore[arg-type]
    (lambda: BoundedExponentialBackoffRetry(1, 0.5, 3), "max_sleep", "0.5"),
    (lambda: BoundedExponentialBackoffRetry(0.1, -1, 3), "max_sleep", "-1"),
    (lambda: PlateauRetry(0, 5, 1, 2), "base_sleep", "0"),
    (lambda: PlateauRetry(0.1, -1, 1, 2), "backoff_retries", "-1"),
    (lambda: PlateauRetry(0.1, 5, -1, 2), "plateau_low", "-1"),
    (lambda: PlateauRetry(0.1, 5, 30, 10), "plateau_high", "10"),
    (lambda: PlateauRetry(1, 5, 0.1, 0.5), "plateau_high", "0.5"),
    (lambda: PlateauRetry(0.1, 5, 1, math.inf), "plateau_high", "inf"),
]


@pytest.mark.parametrize(("make", "argument", "value"), BAD_ARGUMENTS)
def test_bad_arguments_raise_configuration_error_naming_them(
    make: Callable[[], object], argument: str, value: str
) -> None:
    with pytest.raises(ConfigurationError) as excinfo:
        make()
    message = str(excinfo.value)
    assert f": {argument} must be " in message
    assert f"got {value}" in message or ("got <module" in message and value == "module")


# -- the loop --------------------------------------------------------------------------------


class FakeTime:
    """A clock that moves only when slept on (or when a call costs time)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


class Flaky:
    """Raises `errors` one per call, then returns "done"; each call costs `cost` seconds."""

    def __init__(self, *errors: BaseException, fake: FakeTime | None = None, cost: float = 0):
        self.errors = list(errors)
        self.calls = 0
        self.fake = fake
        self.cost = cost

    def __call__(self) -> str:
        self.calls += 1
        if self.fake is not None:
            self.fake.now += self.cost
        if self.calls <= len(self.errors):
            raise self.errors[self.calls - 1]
        return "done"


def lost(count: int) -> list[BaseException]:
    return [ConnectionLostError(f"lost {i}") for i in range(count)]


class Scripted(RetryPolicy):
    """Returns the given sleeps in turn and records what it was asked."""

    def __init__(self, *sleeps: float | None) -> None:
        self.sleeps = list(sleeps)
        self.asked: list[tuple[int, float]] = []

    def sleep_for(self, attempt: int, elapsed: float) -> float | None:
        self.asked.append((attempt, elapsed))
        return self.sleeps[attempt] if attempt < len(self.sleeps) else None


def test_success_returns_the_value_without_sleeping() -> None:
    fake = FakeTime()
    fn = Flaky()
    assert retry(RetryForever(1), fn, sleep=fake.sleep, clock=fake.clock) == "done"
    assert fn.calls == 1
    assert fake.sleeps == []


@pytest.mark.parametrize(
    "error",
    [
        NoNodeError("no node", path="/a"),
        NodeExistsError("exists", path="/a"),
        BadVersionError("version", path="/a"),
        ValueError("not ours"),
        SessionLost("expired"),
        ZkTimeoutError("timed out"),
    ],
    ids=type,
)
def test_non_retryable_errors_propagate_at_once_unchanged(error: Exception) -> None:
    fake = FakeTime()
    fn = Flaky(error)
    with pytest.raises(type(error)) as excinfo:
        retry(RetryForever(1), fn, sleep=fake.sleep, clock=fake.clock)
    assert excinfo.value is error
    assert excinfo.value.__cause__ is None
    assert fn.calls == 1
    assert fake.sleeps == []


def test_retryable_errors_are_retried_then_exhausted_with_cause() -> None:
    fake = FakeTime()
    errors = lost(10)
    fn = Flaky(*errors)
    policy = RetryNTimes(3, 0.5, jitter=0)
    with pytest.raises(RetriesExhaustedError) as excinfo:
        retry(policy, fn, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == 4
    assert fake.sleeps == [0.5, 0.5, 0.5]
    assert excinfo.value.__cause__ is errors[3]
    message = str(excinfo.value)
    assert message.startswith(repr(policy))
    assert "gave up after 4 attempts in 1.500 s: ConnectionLostError: lost 3" in message


@pytest.mark.parametrize("policy", [RetryNTimes(0, 1), ExponentialBackoffRetry(0.1, 0)])
def test_a_policy_without_retries_tries_once(policy: RetryPolicy) -> None:
    fake = FakeTime()
    fn = Flaky(*lost(2))
    with pytest.raises(RetriesExhaustedError, match=r"after 1 attempt in 0\.000 s"):
        retry(policy, fn, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == 1


def test_every_retryable_kind_is_retried_until_success() -> None:
    fake = FakeTime()
    fn = Flaky(ConnectionLostError("a"), OperationTimeoutError("b"), SessionMovedError("c"))
    assert retry(RetryForever(1, jitter=0), fn, sleep=fake.sleep, clock=fake.clock) == "done"
    assert fn.calls == 4
    assert fake.sleeps == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConnectionLostError("x"), True),
        (OperationTimeoutError("x"), True),
        (SessionMovedError("x"), True),
        (SessionLost("x"), False),
        (NoNodeError("x"), False),
        (NodeExistsError("x"), False),
        (BadVersionError("x"), False),
        (ZkTimeoutError("x"), False),
        (ConnectTimeoutError("x"), False),
        (RetriesExhaustedError("x"), False),
        (TimeoutError("x"), False),
        (ConnectionError("x"), False),
        (KeyboardInterrupt(), False),
    ],
    ids=lambda v: type(v).__name__,
)
def test_is_retryable(error: BaseException, expected: bool) -> None:
    assert is_retryable(error) is expected


def test_base_exceptions_are_never_caught_even_if_declared_retryable() -> None:
    class Interrupt(BaseException):
        pass

    fake = FakeTime()
    fn = Flaky(Interrupt())
    with pytest.raises(Interrupt):
        retry(RetryForever(1), fn, retryable=lambda e: True, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == 1


def test_custom_retryable_predicate() -> None:
    fake = FakeTime()
    fn = Flaky(ValueError("a"), ValueError("b"))
    result = retry(
        RetryNTimes(2, 0, jitter=0),
        fn,
        retryable=lambda e: isinstance(e, ValueError),
        sleep=fake.sleep,
        clock=fake.clock,
    )
    assert result == "done"
    assert fn.calls == 3


def test_policy_is_asked_with_attempt_and_elapsed_before_the_sleep() -> None:
    fake = FakeTime()
    fn = Flaky(*lost(5), fake=fake, cost=0.25)
    policy = Scripted(1.0, 1.0)
    with pytest.raises(RetriesExhaustedError, match=r"after 3 attempts in 2\.750 s"):
        retry(policy, fn, sleep=fake.sleep, clock=fake.clock)
    assert policy.asked == [(0, 0.25), (1, 1.5), (2, 2.75)]
    assert repr(policy) == "Scripted()"


def test_until_elapsed_in_the_loop() -> None:
    fake = FakeTime()
    fn = Flaky(*lost(10))
    with pytest.raises(RetriesExhaustedError):
        retry(RetryUntilElapsed(2.5, 1.0, jitter=0), fn, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == 4  # asked at elapsed 0, 1, 2 (allowed) and 3 (refused)
    assert fake.sleeps == [1.0, 1.0, 1.0]


@PROPERTY
@given(n=st.integers(0, 30))
def test_n_times_in_the_loop_makes_n_plus_one_attempts(n: int) -> None:
    fake = FakeTime()
    fn = Flaky(*lost(n + 5))
    with pytest.raises(RetriesExhaustedError) as excinfo:
        retry(RetryNTimes(n, 0.1), fn, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == n + 1
    assert len(fake.sleeps) == n
    assert excinfo.value.__cause__ is fn.errors[n]


def test_deadline_shortens_the_last_sleep_then_times_out() -> None:
    fake = FakeTime(100.0)
    errors = lost(10)
    fn = Flaky(*errors)
    seen: list[tuple[int, BaseException, float]] = []
    with pytest.raises(ZkTimeoutError) as excinfo:
        retry(
            RetryForever(10, jitter=0),
            fn,
            deadline=125.0,
            sleep=fake.sleep,
            clock=fake.clock,
            on_retry=lambda attempt, exc, s: seen.append((attempt, exc, s)),
        )
    assert fake.sleeps == [10.0, 10.0, 5.0]
    assert fake.now == 125.0
    assert fn.calls == 4
    assert seen == [(0, errors[0], 10.0), (1, errors[1], 10.0), (2, errors[2], 5.0)]
    assert excinfo.value.__cause__ is errors[3]
    assert isinstance(excinfo.value, TimeoutError)
    assert "after 4 attempts in 25.000 s" in str(excinfo.value)


def test_deadline_is_checked_before_the_policy() -> None:
    fake = FakeTime(100.0)
    fn = Flaky(*lost(2))
    with pytest.raises(ZkTimeoutError):
        retry(RetryNTimes(0, 1), fn, deadline=100.0, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == 1


def test_passed_deadline_still_calls_once() -> None:
    fake = FakeTime(100.0)
    ok = Flaky()
    assert retry(RetryForever(1), ok, deadline=50.0, sleep=fake.sleep, clock=fake.clock) == "done"
    failing = Flaky(*lost(3))
    with pytest.raises(ZkTimeoutError, match=r"after 1 attempt in 0\.000 s"):
        retry(RetryForever(1), failing, deadline=50.0, sleep=fake.sleep, clock=fake.clock)
    assert (ok.calls, failing.calls) == (1, 1)
    assert fake.sleeps == []


def test_far_deadline_does_not_change_the_sleeps() -> None:
    fake = FakeTime(0.0)
    fn = Flaky(*lost(2))
    policy = RetryNTimes(5, 2.0, jitter=0)
    assert retry(policy, fn, deadline=1e9, sleep=fake.sleep, clock=fake.clock) == "done"
    assert fake.sleeps == [2.0, 2.0]


def test_on_retry_gets_attempt_error_and_sleep() -> None:
    fake = FakeTime()
    errors = [OperationTimeoutError("slow"), SessionMovedError("moved")]
    fn = Flaky(*errors)
    seen: list[tuple[int, BaseException, float]] = []
    retry(
        Scripted(0.5, 2.0),
        fn,
        sleep=fake.sleep,
        clock=fake.clock,
        on_retry=lambda attempt, exc, s: seen.append((attempt, exc, s)),
    )
    assert seen == [(0, errors[0], 0.5), (1, errors[1], 2.0)]
    assert fake.sleeps == [0.5, 2.0]


def test_each_retry_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="zk_recipes.retry")
    fake = FakeTime()
    retry(RetryNTimes(3, 0.5, jitter=0), Flaky(*lost(2)), sleep=fake.sleep, clock=fake.clock)
    records = [r for r in caplog.records if r.name == "zk_recipes.retry"]
    assert [r.levelno for r in records] == [logging.DEBUG, logging.DEBUG]
    assert "ConnectionLostError: lost 1" in records[1].getMessage()


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_a_policy_returning_a_bad_sleep_is_reported(bad: float) -> None:
    fake = FakeTime()
    with pytest.raises(ConfigurationError, match="sleep_for"):
        retry(Scripted(bad), Flaky(*lost(2)), sleep=fake.sleep, clock=fake.clock)
    assert fake.sleeps == []


def test_retry_rejects_what_is_not_a_policy() -> None:
    with pytest.raises(ConfigurationError, match="policy must be a RetryPolicy"):
        retry(RetryForever, Flaky())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        RetryPolicy()  # type: ignore[abstract]


def test_one_policy_serves_many_loops_at_once() -> None:
    policy = RetryNTimes(2, 0, jitter=0)
    inner_calls: list[int] = []

    def outer_call() -> str:
        # A whole inner loop runs on the same policy object between the outer attempts.
        inner = Flaky(*lost(5))
        with pytest.raises(RetriesExhaustedError):
            retry(policy, inner, sleep=lambda s: None)
        inner_calls.append(inner.calls)
        raise ConnectionLostError("outer")

    with pytest.raises(RetriesExhaustedError, match="after 3 attempts"):
        retry(policy, outer_call, sleep=lambda s: None)
    assert inner_calls == [3, 3, 3]

    def worker(results: list[int]) -> None:
        fn = Flaky(*lost(5))
        with pytest.raises(RetriesExhaustedError):
            retry(policy, fn, sleep=lambda s: time.sleep(0.001))
        results.append(fn.calls)

    results: list[int] = []
    threads = [threading.Thread(target=worker, args=(results,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [3] * 8


def test_the_clients_default_policy_in_the_loop() -> None:
    fake = FakeTime()
    fn = Flaky(*lost(10))
    policy = ExponentialBackoffRetry(0.1, 5, rng=random.Random(5))
    with pytest.raises(RetriesExhaustedError):
        retry(policy, fn, sleep=fake.sleep, clock=fake.clock)
    assert fn.calls == 6
    bounds = [0.1 * (2 ** (attempt + 1) - 1) for attempt in range(5)]
    assert all(0.1 <= s <= b + 1e-12 for s, b in zip(fake.sleeps, bounds, strict=True))
