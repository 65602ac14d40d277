"""ServiceProvider: pick one instance of a service, with strategies and a down-instance policy.

Over a ServiceCache, so a pick costs no request. Differences from Curator's:

- **Round robin in a stable order**: the next instance is the one after the
  last pick in id order, wrapping, so an instance joining or leaving never
  makes the rotation skip or repeat the others (Curator indexes its
  hash-ordered list with a counter, and ``Math.abs`` of that counter throws
  once it reaches 2^31 calls for any list whose size is not a power of two).
- **Down instances by id**: ``note_error(instance)`` counts per instance id
  (Curator: per whole value, so an updated payload forgets its errors); at
  ``threshold`` errors within ``timeout`` the instance is skipped until
  ``timeout`` after its first error, exactly; ``note_success`` clears it.
- Disabled instances (``enabled=False``) are never picked, as in Curator.
"""

from __future__ import annotations

import bisect
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from zk_recipes._errors import ConfigurationError
from zk_recipes.discovery._cache import Discovery, ServiceCache
from zk_recipes.discovery._instance import ServiceInstance

InstanceFilter = Callable[[ServiceInstance], bool]


class ProviderStrategy(Protocol):
    """Chooses one of ``instances`` (sorted by id, never empty)."""

    def choose(self, instances: Sequence[ServiceInstance]) -> ServiceInstance: ...


class RoundRobinStrategy:
    """Each instance in turn, in id order; joining or leaving instances keep the others' turns."""

    def __init__(self, calls: int = 0) -> None:
        self._lock = threading.Lock()
        self._last: str | None = None
        #: Picks so far (a Python int: it does not overflow).
        self.calls = calls

    def choose(self, instances: Sequence[ServiceInstance]) -> ServiceInstance:
        with self._lock:
            self.calls += 1
            ids = [i.id for i in instances]
            at = 0 if self._last is None else bisect.bisect_right(ids, self._last) % len(ids)
            chosen = instances[at]
            self._last = chosen.id
            return chosen


class RandomStrategy:
    """Any instance, uniformly (``seed`` for a repeatable sequence)."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def choose(self, instances: Sequence[ServiceInstance]) -> ServiceInstance:
        with self._lock:
            return instances[self._random.randrange(len(instances))]


class StickyStrategy:
    """The same instance while it is there and not down; then ``master`` chooses another."""

    def __init__(self, master: ProviderStrategy | None = None) -> None:
        self.master: ProviderStrategy = master or RoundRobinStrategy()
        self._lock = threading.Lock()
        self._chosen: str | None = None
        #: How many times it chose a new instance.
        self.switches = 0

    def choose(self, instances: Sequence[ServiceInstance]) -> ServiceInstance:
        with self._lock:
            for instance in instances:
                if instance.id == self._chosen:
                    return instance
            chosen = self.master.choose(instances)
            self._chosen = chosen.id
            self.switches += 1
            return chosen


class DownInstancePolicy:
    """``threshold`` errors noted for an instance within ``timeout`` seconds: skipped until then.

    Curator's defaults: 30 s, 2 errors.
    """

    def __init__(self, timeout: float = 30.0, threshold: int = 2) -> None:
        if not timeout > 0:
            raise ConfigurationError(f"DownInstancePolicy timeout must be > 0 s, got {timeout!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise ConfigurationError(
                f"DownInstancePolicy threshold must be >= 1, got {threshold!r}"
            )
        self.timeout = float(timeout)
        self.threshold = threshold


class _DownInstances:
    """Errors per instance id: (count, monotonic time of the first)."""

    def __init__(self, policy: DownInstancePolicy, clock: Callable[[], float]) -> None:
        self._policy = policy
        self._clock = clock
        self._lock = threading.Lock()
        self._errors: dict[str, tuple[int, float]] = {}

    def note_error(self, instance_id: str) -> None:
        now = self._clock()
        with self._lock:
            count, first = self._errors.get(instance_id, (0, now))
            if now - first >= self._policy.timeout:
                count, first = 0, now  # the old window ended: a new one starts here
            self._errors[instance_id] = (count + 1, first)

    def note_success(self, instance_id: str) -> None:
        with self._lock:
            self._errors.pop(instance_id, None)

    def is_down(self, instance_id: str) -> bool:
        with self._lock:
            entry = self._errors.get(instance_id)
            if entry is None:
                return False
            count, first = entry
            if self._clock() - first >= self._policy.timeout:
                del self._errors[instance_id]
                return False
            return count >= self._policy.threshold


class ServiceProvider:
    """Picks instances of ``name`` from a ServiceCache: ``start()``, ``get_instance()``."""

    def __init__(
        self,
        discovery: Discovery,
        name: str,
        strategy: ProviderStrategy | None = None,
        down_instance_policy: DownInstancePolicy | None = None,
        filters: Sequence[InstanceFilter] = (),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.strategy: ProviderStrategy = strategy or RoundRobinStrategy()
        self.policy = down_instance_policy or DownInstancePolicy()
        self._filters = tuple(filters)
        self._down = _DownInstances(self.policy, clock)
        self.cache = ServiceCache(discovery, name)

    def start(self, timeout: float | None = None) -> ServiceProvider:
        """Start its cache, waiting for the first load up to ``timeout``."""
        self.cache.start(timeout)
        return self

    def close(self) -> None:
        self.cache.close()

    def __enter__(self) -> ServiceProvider:
        """``with provider:`` or ``with provider.start(timeout):``: started once, then closed."""
        return self if self.cache.started else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def get_all_instances(self) -> list[ServiceInstance]:
        """Every cached instance, sorted by id (down and disabled ones included)."""
        return self.cache.instances()

    def get_instance(self) -> ServiceInstance | None:
        """One instance by the strategy, among those enabled, not down and passing the filters."""
        candidates = [
            instance
            for instance in self.cache.instances()
            if instance.enabled
            and not self._down.is_down(instance.id)
            and all(keep(instance) for keep in self._filters)
        ]
        if not candidates:
            return None
        return self.strategy.choose(candidates)

    def note_error(self, instance: ServiceInstance) -> None:
        """The caller could not use ``instance``: counts toward the down-instance policy."""
        self._down.note_error(instance.id)

    def note_success(self, instance: ServiceInstance) -> None:
        """The caller used ``instance``: its errors are forgotten."""
        self._down.note_success(instance.id)

    def __repr__(self) -> str:
        return f"<ServiceProvider {self.name}>"
