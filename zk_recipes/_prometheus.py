"""The prometheus-client sink: every metric of zk-recipes, in one registry.

Imported only when prometheus-client is installed (zk_recipes/_metrics.py
decides). One ``PrometheusSink`` per registry, made once and kept, so
switching registries back and forth never registers a name twice. Labelled
children are cached per (recipe, template), so recording costs a dict
lookup and the observations, not ``labels()``'s validation each time.

The client gauges (connection state, guaranteed deletes pending) are a
collector that reads the live clients when the registry is scraped.

Integrations define counters of their own with ``define_counter``; every
sink, present and future, registers them.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import prometheus_client
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import CollectorRegistry

from zk_recipes import _metrics
from zk_recipes._metrics import METRICS, RECIPE_LABELS

#: Buckets of the lock wait histogram (seconds): a round trip to an hour-long queue.
WAIT_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip
#: Buckets of the hold histogram (seconds): a critical section to a long-running leader.
HOLD_BUCKETS = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0,
    30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0,
)  # fmt: skip

#: Buckets of the queue consumer histogram (seconds): a quick handler to an hour-long job.
CONSUMER_BUCKETS = (
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
)  # fmt: skip

#: The states the connection gauge always reports (CLOSED clients are not counted).
GAUGE_STATES = ("CONNECTED", "SUSPENDED", "RECONNECTED", "LOST", "READ_ONLY")


def _help(name: str) -> str:
    return METRICS[name][2]


@dataclasses.dataclass(frozen=True)
class CounterSpec:
    """A counter an integration defines (``zk_recipes.metrics.define_counter``)."""

    name: str
    documentation: str
    labelnames: tuple[str, ...]


#: The core's counters recorded with ``Sink.count``, then those integrations define.
_specs: dict[str, CounterSpec] = {
    name: CounterSpec(name, _help(name), _metrics.METRICS[name][1]) for name in _metrics.COUNTED
}
_sinks: dict[int, PrometheusSink] = {}
_sinks_guard = threading.Lock()


@dataclasses.dataclass(frozen=True)
class _Series:
    wait: Any
    hold: Any
    acquisitions: Any
    timeouts: Any
    busy: Any
    lost: Any
    gained: Any
    deposed: Any


class _ClientCollector:
    """The client gauges, read from the live clients at each scrape."""

    def describe(self) -> Iterable[Metric]:
        yield GaugeMetricFamily(
            "zk_recipes_connection_state", _help("zk_recipes_connection_state"), labels=["state"]
        )
        yield GaugeMetricFamily(
            "zk_recipes_guaranteed_deletes_pending", _help("zk_recipes_guaranteed_deletes_pending")
        )
        yield GaugeMetricFamily(
            "zk_recipes_service_instances_registered",
            _help("zk_recipes_service_instances_registered"),
            labels=["service"],
        )
        yield GaugeMetricFamily(
            "zk_recipes_queue_items", _help("zk_recipes_queue_items"), labels=["queue"]
        )
        yield from _ensemble_gauges(None)

    def collect(self) -> Iterator[Metric]:
        states = dict.fromkeys(GAUGE_STATES, 0)
        pending = 0
        for client in list(_metrics.clients):
            state, deletes = client._metric_snapshot()
            if state is not None:
                states[state] = states.get(state, 0) + 1
            pending += deletes
        gauge = GaugeMetricFamily(
            "zk_recipes_connection_state", _help("zk_recipes_connection_state"), labels=["state"]
        )
        for state, count in states.items():
            gauge.add_metric([state], count)
        yield gauge
        yield GaugeMetricFamily(
            "zk_recipes_guaranteed_deletes_pending",
            _help("zk_recipes_guaranteed_deletes_pending"),
            value=pending,
        )
        services: dict[str, int] = {}
        for discovery in list(_metrics.discoveries):
            for instance in discovery.registered():
                services[instance.name] = services.get(instance.name, 0) + 1
        registered = GaugeMetricFamily(
            "zk_recipes_service_instances_registered",
            _help("zk_recipes_service_instances_registered"),
            labels=["service"],
        )
        for service, count in sorted(services.items()):
            registered.add_metric([service], count)
        yield registered
        lengths: dict[str, int] = {}
        for queue in list(_metrics.queues):
            listed = queue.listed_items
            if listed is not None:  # several objects on one path: the latest listing is as good
                lengths[queue.path] = listed
        items = GaugeMetricFamily(
            "zk_recipes_queue_items", _help("zk_recipes_queue_items"), labels=["queue"]
        )
        for path, length in sorted(lengths.items()):
            items.add_metric([path], length)
        yield items
        followed = [e for c in list(_metrics.clients) if (e := c.ensemble) is not None]
        yield from _ensemble_gauges(max(followed, key=lambda e: e.version, default=None))


def _ensemble_gauges(ensemble: Any) -> Iterator[Metric]:
    """The followed ensemble's config version and servers by role (none: 0 and no rows).

    ``ensemble``: a ``zk_recipes.Ensemble`` or None (typed Any here: this leaf module
    does not import the client's).
    """
    name = "zk_recipes_ensemble_config_version"
    yield GaugeMetricFamily(name, _help(name), value=ensemble.version if ensemble else 0)
    name = "zk_recipes_ensemble_servers"
    servers = GaugeMetricFamily(name, _help(name), labels=["role"])
    if ensemble is not None:
        roles = [server.role for server in ensemble.servers]
        for role in sorted(set(roles)):
            servers.add_metric([role], roles.count(role))
    yield servers


class PrometheusSink:
    """Records into one registry (see ``_metrics.Sink``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        labels = list(RECIPE_LABELS)

        def counter(name: str, labelnames: list[str]) -> Any:
            return prometheus_client.Counter(
                name.removesuffix("_total"), _help(name), labelnames, registry=registry
            )

        self._wait = prometheus_client.Histogram(
            "zk_recipes_lock_wait_seconds",
            _help("zk_recipes_lock_wait_seconds"),
            labels,
            registry=registry,
            buckets=WAIT_BUCKETS,
        )
        self._hold = prometheus_client.Histogram(
            "zk_recipes_lock_hold_seconds",
            _help("zk_recipes_lock_hold_seconds"),
            labels,
            registry=registry,
            buckets=HOLD_BUCKETS,
        )
        self._acquisitions = counter("zk_recipes_lock_acquisitions_total", labels)
        self._timeouts = counter("zk_recipes_lock_timeouts_total", labels)
        self._busy = counter("zk_recipes_lock_busy_total", labels)
        self._lost = counter("zk_recipes_lock_lost_total", labels)
        self._gained = counter("zk_recipes_leadership_gained_total", labels)
        self._deposed = counter("zk_recipes_leadership_lost_total", labels)
        self._changes = counter("zk_recipes_connection_state_changes_total", ["state"])
        self._simulated = counter("zk_recipes_simulated_expirations_total", [])
        registry.register(_ClientCollector())
        self._histograms = {
            name: prometheus_client.Histogram(
                name,
                _help(name),
                list(METRICS[name][1]),
                registry=registry,
                buckets=CONSUMER_BUCKETS,
            )
            for name in _metrics.OBSERVED
        }
        self._series: dict[tuple[str, str], _Series] = {}
        self._guard = threading.Lock()
        self._extra: dict[str, Any] = {}
        for spec in list(_specs.values()):
            self.define(spec)

    def define(self, spec: CounterSpec) -> None:
        with self._guard:
            if spec.name not in self._extra:
                self._extra[spec.name] = prometheus_client.Counter(
                    spec.name, spec.documentation, spec.labelnames, registry=self.registry
                )

    def count(self, name: str, labels: dict[str, str]) -> None:
        counter = self._extra[name]
        (counter.labels(**labels) if labels else counter).inc()

    def observe(self, name: str, value: float, labels: dict[str, str]) -> None:
        histogram = self._histograms[name]
        (histogram.labels(**labels) if labels else histogram).observe(value)

    def _of(self, recipe: str, path: str) -> _Series:
        key = (recipe, _metrics.template_of(path))
        series = self._series.get(key)
        if series is None:
            with self._guard:
                series = self._series.get(key)
                if series is None:
                    series = self._series[key] = _Series(
                        *(
                            metric.labels(*key)
                            for metric in (
                                self._wait,
                                self._hold,
                                self._acquisitions,
                                self._timeouts,
                                self._busy,
                                self._lost,
                                self._gained,
                                self._deposed,
                            )
                        )
                    )
        return series

    # -- _metrics.Sink -----------------------------------------------------------
    def acquired(self, recipe: str, path: str, waited: float, count: int = 1) -> None:
        series = self._of(recipe, path)
        series.wait.observe(waited)
        series.acquisitions.inc(count)

    def released(self, recipe: str, path: str, held: float) -> None:
        self._of(recipe, path).hold.observe(held)

    def refused(self, recipe: str, path: str, busy: bool) -> None:
        series = self._of(recipe, path)
        (series.busy if busy else series.timeouts).inc()

    def lost(self, recipe: str, path: str, count: int = 1) -> None:
        self._of(recipe, path).lost.inc(count)

    def leadership(self, recipe: str, path: str, gained: bool) -> None:
        series = self._of(recipe, path)
        (series.gained if gained else series.deposed).inc()

    def state_changed(self, state: str) -> None:
        self._changes.labels(state).inc()

    def simulated_expiry(self) -> None:
        self._simulated.inc()


def sink_for(registry: CollectorRegistry | None) -> PrometheusSink:
    """The sink of ``registry`` (default: prometheus_client's), made on first use."""
    if registry is None:
        registry = prometheus_client.REGISTRY
    with _sinks_guard:
        found = _sinks.get(id(registry))
        if found is None or found.registry is not registry:
            found = _sinks[id(registry)] = PrometheusSink(registry)
        return found


def define_counter(spec: CounterSpec) -> None:
    """Register ``spec`` in every sink, present and future (same name twice: same spec)."""
    with _sinks_guard:
        existing = _specs.get(spec.name)
        if existing is not None and existing != spec:
            raise ValueError(f"counter {spec.name} is already defined as {existing}")
        _specs[spec.name] = spec
        sinks = list(_sinks.values())
    for sink in sinks:
        sink.define(spec)
