"""ServiceProvider: strategies in a stable order, no counter overflow, the down-instance window.

The strategies are plain objects over sorted instance lists; the provider
test runs over a real ServiceCache.
"""

from __future__ import annotations

import pytest

from zk_recipes import (
    ConfigurationError,
    DownInstancePolicy,
    RandomStrategy,
    RoundRobinStrategy,
    ServiceDiscovery,
    ServiceInstance,
    StickyStrategy,
)
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


def _many(*ids: str) -> list[ServiceInstance]:
    return [ServiceInstance(name="svc", id=i, address=None, registration_time_utc=0) for i in ids]


def test_round_robin_keeps_the_others_turns_when_instances_come_and_go() -> None:
    strategy = RoundRobinStrategy()
    picks = [strategy.choose(_many("a", "b", "c")).id for _ in range(4)]
    assert picks == ["a", "b", "c", "a"]
    # "bb" joins after b, "c" leaves: the rotation goes on from a, never skipping nor repeating.
    assert [strategy.choose(_many("a", "b", "bb")).id for _ in range(4)] == ["b", "bb", "a", "b"]
    assert strategy.calls == 8


@pytest.mark.parametrize("calls", [2**31 - 2, 2**32 - 1, 2**63 - 1])
def test_round_robin_past_two_to_the_31_calls_neither_fails_nor_skips(calls: int) -> None:
    # Curator's Math.abs(counter) % size throws IndexOutOfBounds at 2^31 calls (size 3).
    strategy = RoundRobinStrategy(calls=calls)
    assert [strategy.choose(_many("a", "b", "c")).id for _ in range(6)] == ["a", "b", "c"] * 2
    assert strategy.calls == calls + 6


def test_random_and_sticky() -> None:
    random_picks = {RandomStrategy(seed=1).choose(_many("a", "b", "c")).id for _ in range(1)}
    assert random_picks <= {"a", "b", "c"}
    seen = {id for id in (RandomStrategy(seed=7).choose(_many("a", "b")).id for _ in range(50))}
    assert seen <= {"a", "b"}
    sticky = StickyStrategy()
    assert [sticky.choose(_many("a", "b")).id for _ in range(3)] == ["a", "a", "a"]
    assert sticky.choose(_many("b", "c")).id == "b"  # a left: the master chose again
    assert sticky.switches == 2


def test_the_down_instance_window_is_exact_and_a_success_clears_it(
    zk_client_factory: ClientFactory,
) -> None:
    now = [100.0]
    with ServiceDiscovery(zk_client_factory()) as discovery:
        for id in ("a", "b"):
            discovery.register(ServiceInstance(name="svc", id=id, address=None))
        provider = discovery.service_provider(
            "svc", StickyStrategy(), DownInstancePolicy(timeout=10.0, threshold=2)
        )
        provider._down._clock = lambda: now[0]
        with provider.start(timeout=10):
            a = provider.get_instance()
            assert a is not None
            assert a.id == "a"
            provider.note_error(a)
            assert provider.get_instance() == a  # one error: below the threshold
            now[0] += 3
            provider.note_error(a)
            assert provider.get_instance().id == "b"  # type: ignore[union-attr]
            now[0] += 6.999  # 9.999 s after the first error: still down
            assert provider.get_instance().id == "b"  # type: ignore[union-attr]
            now[0] += 0.001  # 10 s after the first error: back
            provider.note_error(a)
            assert not provider._down.is_down("a")  # a new window, one error in it
            provider.note_error(a)
            assert provider._down.is_down("a")
            provider.note_success(a)
            assert not provider._down.is_down("a")
    with pytest.raises(ConfigurationError):
        DownInstancePolicy(timeout=0)


def test_the_provider_skips_disabled_instances_and_follows_the_cache(
    zk_client_factory: ClientFactory,
) -> None:
    with ServiceDiscovery(zk_client_factory()) as discovery:
        discovery.register(ServiceInstance(name="svc", id="off", address=None, enabled=False))
        with discovery.service_provider("svc").start(timeout=10) as provider:
            assert provider.get_instance() is None
            assert [i.id for i in provider.get_all_instances()] == ["off"]
            discovery.register(ServiceInstance(name="svc", id="on", address=None))
            wait_until(lambda: provider.get_instance() is not None, "the new instance")
            assert provider.get_instance().id == "on"  # type: ignore[union-attr]
