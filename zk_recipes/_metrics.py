"""The recording interface the recipes call, and the path templates that name their series.

Recipes never import prometheus_client. They read ``sink`` (this module's
one global) and record only when it is not None::

    sink = _metrics.sink
    if sink is not None:
        sink.acquired("Lock", self.path, waited)

so without the ``metrics`` extra (or after ``zk_recipes.metrics.disable()``)
a recipe pays one attribute read and a None test. ``sink`` is set by
``zk_recipes.metrics``: at ``import zk_recipes`` when prometheus-client is
installed (recording into its default registry; see zk_recipes/_prometheus.py),
and by its ``enable()``. This module picks no implementation itself, so
importing a recipe module alone registers nothing anywhere.

Series are labelled with the recipe kind and a *path template*, never the
raw path, so their number stays bounded however many paths a process uses
(one lock per Celery task key, per customer...). A template is registered
once (``zk_recipes.metrics.path_template``); a path that matches none is
labelled ``OTHER``. Resolution is cached per raw path, with the cache
emptied when a template is added and when it grows past ``_CACHE_LIMIT``.

Gauges that describe clients (connection state, guaranteed deletes
pending) are read when the registry is scraped, from the clients in
``clients``: nothing to keep in step on the client's side.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

from zk_recipes._errors import ConfigurationError, WrongTypeError

#: The template label of a path that matches no registered template.
OTHER = "other"

_CACHE_LIMIT = 4096

RECIPE_LABELS = ("recipe", "template")

#: name: (type, labels, help) of every metric of the core, as exposed (counters with _total).
METRICS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "zk_recipes_lock_wait_seconds": (
        "histogram",
        RECIPE_LABELS,
        "Time from acquire() to holding the lock or lease, for acquires that succeeded",
    ),
    "zk_recipes_lock_hold_seconds": (
        "histogram",
        RECIPE_LABELS,
        "Time from holding a lock or lease to its release",
    ),
    "zk_recipes_lock_acquisitions_total": (
        "counter",
        RECIPE_LABELS,
        "Locks and leases acquired",
    ),
    "zk_recipes_lock_timeouts_total": (
        "counter",
        RECIPE_LABELS,
        "Blocking acquires that returned False because their timeout passed",
    ),
    "zk_recipes_lock_busy_total": (
        "counter",
        RECIPE_LABELS,
        "Non-blocking acquires that returned False because the lock was held",
    ),
    "zk_recipes_lock_lost_total": (
        "counter",
        RECIPE_LABELS,
        "Locks and leases lost with their ZooKeeper session while held",
    ),
    "zk_recipes_leadership_gained_total": (
        "counter",
        RECIPE_LABELS,
        "Terms of leadership begun",
    ),
    "zk_recipes_leadership_lost_total": (
        "counter",
        RECIPE_LABELS,
        "Terms of leadership ended by the connection, the session or a deleted node "
        "(not by close() nor a returning take_leadership)",
    ),
    "zk_recipes_connection_state": (
        "gauge",
        ("state",),
        "Clients of this process in each connection state (closed clients are not counted)",
    ),
    "zk_recipes_connection_state_changes_total": (
        "counter",
        ("state",),
        "Connection state changes, by the state entered",
    ),
    "zk_recipes_simulated_expirations_total": (
        "counter",
        (),
        "Sessions a client declared LOST itself because the server was silent too long",
    ),
    "zk_recipes_guaranteed_deletes_pending": (
        "gauge",
        (),
        "Guaranteed deletes still being retried in the background",
    ),
    "zk_recipes_service_instances_registered": (
        "gauge",
        ("service",),
        "Service instances this process keeps registered (open ServiceDiscovery objects)",
    ),
    "zk_recipes_service_registrations_total": (
        "counter",
        ("service",),
        "Service instances registered (register() calls that wrote a node)",
    ),
    "zk_recipes_service_reregistrations_total": (
        "counter",
        ("service",),
        "Service instances registered again: after a new session, or their node deleted",
    ),
    "zk_recipes_service_instances_unreadable_total": (
        "counter",
        ("service",),
        "Service instance nodes skipped by queries and caches because they do not parse",
    ),
    "zk_recipes_queue_items_put_total": (
        "counter",
        ("queue",),
        "Queue nodes put (a put_multi node counts once)",
    ),
    "zk_recipes_queue_items_consumed_total": (
        "counter",
        ("queue",),
        "Queue nodes whose items the consumer returned from",
    ),
    "zk_recipes_queue_items_retried_total": (
        "counter",
        ("queue",),
        "Failed attempts at a queue node (the consumer raised, or its writes were refused) "
        "that will be tried again after a back-off (lock path)",
    ),
    "zk_recipes_queue_items_dead_total": (
        "counter",
        ("queue",),
        "Queue nodes moved to the dead letters (<path>-dead) after max_attempts failed attempts",
    ),
    "zk_recipes_queue_consumer_seconds": (
        "histogram",
        ("queue",),
        "Time the consumer spent on one queue node (all its items), whether it returned or raised",
    ),
    "zk_recipes_ensemble_config_version": (
        "gauge",
        (),
        "The version of the ensemble config this process's clients follow (/zookeeper/config; "
        "the newest if several), 0 when none is followed",
    ),
    "zk_recipes_ensemble_servers": (
        "gauge",
        ("role",),
        "Servers of the followed ensemble config, by role (participant, observer)",
    ),
    "zk_recipes_queue_items": (
        "gauge",
        ("queue",),
        "Item nodes in a queue this process consumes from (or bounds its puts by), "
        "as its last listing saw them",
    ),
    "zk_recipes_queue_claims_lost_total": (
        "counter",
        ("queue",),
        "Queue items whose claim was lost while the consumer ran: nothing committed, "
        "another consumer may run them again",
    ),
}
#: The histograms above that recipes record with ``Sink.observe``.
OBSERVED = ("zk_recipes_queue_consumer_seconds",)
#: The counters above that recipes record with ``Sink.count``.
COUNTED = (
    "zk_recipes_queue_items_put_total",
    "zk_recipes_queue_items_consumed_total",
    "zk_recipes_queue_items_retried_total",
    "zk_recipes_queue_items_dead_total",
    "zk_recipes_queue_claims_lost_total",
    "zk_recipes_service_registrations_total",
    "zk_recipes_service_reregistrations_total",
    "zk_recipes_service_instances_unreadable_total",
)


class Sink(Protocol):
    """What the recipes record; zk_recipes/_prometheus.py implements it."""

    def acquired(self, recipe: str, path: str, waited: float, count: int = 1) -> None:
        """``count`` holds (locks, leases) taken after ``waited`` seconds."""

    def released(self, recipe: str, path: str, held: float) -> None:
        """One hold given back after ``held`` seconds."""

    def refused(self, recipe: str, path: str, busy: bool) -> None:
        """An acquire returned False: non-blocking and busy, or timed out."""

    def lost(self, recipe: str, path: str, count: int = 1) -> None:
        """``count`` holds lost with their session."""

    def leadership(self, recipe: str, path: str, gained: bool) -> None:
        """A term of leadership began (``gained``) or was lost."""

    def state_changed(self, state: str) -> None:
        """A client entered ``state`` (a ConnectionState name)."""

    def simulated_expiry(self) -> None:
        """A client declared its session LOST itself (the server was silent too long)."""

    def count(self, name: str, labels: dict[str, str]) -> None:
        """Add one to a counter defined with ``zk_recipes.metrics.define_counter``."""

    def observe(self, name: str, value: float, labels: dict[str, str]) -> None:
        """Record ``value`` in a histogram of ``OBSERVED``."""


class Registering(Protocol):
    """A ServiceDiscovery, as the registered-instances gauge sees it."""

    def registered(self) -> Sequence[_Named]: ...


class Listed(Protocol):
    """A queue, as the queue-length gauge sees it."""

    @property
    def path(self) -> str: ...

    @property
    def listed_items(self) -> int | None:
        """Its item nodes at this process's last listing (None: not listed yet)."""
        ...


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class Observed(Protocol):
    """A client, as the scrape-time gauges see it."""

    def _metric_snapshot(self) -> tuple[str | None, int]:
        """(state name, or None when not started or closed; guaranteed deletes pending)."""
        ...

    @property
    def ensemble(self) -> Any:
        """The ensemble the client follows (``_client/ensemble.Ensemble``), or None."""


#: The sink recipes record into; None: metrics off (not installed, or disabled).
sink: Sink | None = None

#: Live clients, for the gauges read at scrape time.
clients: weakref.WeakSet[Observed] = weakref.WeakSet()
#: Open ServiceDiscovery objects, for the registered-instances gauge.
discoveries: weakref.WeakSet[Registering] = weakref.WeakSet()
#: Open queues, for the queue-length gauge.
queues: weakref.WeakSet[Listed] = weakref.WeakSet()

_guard = threading.Lock()
#: (template, compiled pattern, label), in registration order: the first match wins.
_templates: list[tuple[str, re.Pattern[str], str]] = []
_resolved: dict[str, str] = {}


def install(new: Sink | None) -> None:
    """Record into ``new`` from now on (None: stop recording)."""
    global sink
    sink = new


def count(name: str, **labels: str) -> None:
    """Add one to a counter of ``COUNTED`` (nothing while metrics are off)."""
    current = sink
    if current is not None:
        current.count(name, labels)


def observe(name: str, value: float, **labels: str) -> None:
    """Record ``value`` in a histogram of ``OBSERVED`` (nothing while metrics are off)."""
    current = sink
    if current is not None:
        current.observe(name, value, labels)


def observe_client(client: Observed) -> None:
    clients.add(client)


# -- path templates ---------------------------------------------------------------


def _compile(template: str) -> re.Pattern[str]:
    if not isinstance(template, str):
        raise WrongTypeError(f"a path template must be a str, got {template!r}")
    segments = template.split("/")
    if not template.startswith("/") or (len(segments) > 2 and "" in segments[1:]):
        raise ConfigurationError(
            f"a path template is an absolute path such as '/jobs/{{job}}/lock', got "
            f"{template!r} (no empty segments, no trailing '/')"
        )
    parts = []
    for index, segment in enumerate(segments[1:], start=1):
        if segment == "**":
            if index != len(segments) - 1:
                raise ConfigurationError(
                    f"'**' matches the rest of a path: it can only be the last segment of a "
                    f"path template, got {template!r}"
                )
            parts.append("(?:/.*)?")
        elif segment == "*" or (segment.startswith("{") and segment.endswith("}")):
            parts.append("/[^/]+")
        elif "*" in segment or "{" in segment or "}" in segment:
            raise ConfigurationError(
                f"in path template {template!r}, {segment!r} mixes a wildcard with text: a "
                "segment is either literal, '*' or '{name}' (one segment), or '**' (the rest)"
            )
        elif segment:
            parts.append("/" + re.escape(segment))
    return re.compile("".join(parts) or "/")


def add_template(template: str, name: str | None) -> None:
    pattern = _compile(template)
    if name is not None and (not isinstance(name, str) or not name):
        raise WrongTypeError(f"a path template's name must be a non-empty str, got {name!r}")
    label = name if name is not None else template
    with _guard:
        for index, (existing, _, _) in enumerate(_templates):
            if existing == template:
                _templates[index] = (template, pattern, label)
                break
        else:
            _templates.append((template, pattern, label))
        _resolved.clear()


def templates() -> dict[str, str]:
    with _guard:
        return {template: label for template, _, label in _templates}


def clear_templates() -> None:
    with _guard:
        _templates.clear()
        _resolved.clear()


def template_of(path: str) -> str:
    """The template label of ``path`` (relative to the client's namespace)."""
    label = _resolved.get(path)
    if label is not None:
        return label
    with _guard:
        label = next((name for _, pattern, name in _templates if pattern.fullmatch(path)), OTHER)
        if len(_resolved) >= _CACHE_LIMIT:
            _resolved.clear()
        _resolved[path] = label
    return label


def available() -> bool:
    """Whether prometheus-client can be imported (the ``metrics`` extra)."""
    return importlib.util.find_spec("prometheus_client") is not None
