"""Prometheus metrics of zk-recipes: ``pip install 'zk-recipes[metrics]'``.

With prometheus-client installed, every recipe records into its default
registry from the moment ``zk_recipes`` is imported: lock and lease wait
and hold times, acquisitions, timeouts, busy refusals, losses, leadership
gained and lost, connection states, simulated expirations and guaranteed
deletes pending (``METRICS`` lists them; docs/operations.md explains them).
Without it, recording costs a recipe one None test, and everything here
but ``enable()`` still works, so code that names path templates runs with
or without the extra.

Series are labelled ``recipe`` (``Lock``, ``RLock``, ``ReadLock``,
``WriteLock``, ``Semaphore``, ``SemaphoreMutex``, ``LeaderLatch``,
``LeaderSelector``) and ``template``: the name of the path template the
recipe's path matches, never the raw path, so the number of series stays
bounded::

    from zk_recipes import metrics

    metrics.path_template("/jobs/{job}/lock", name="job-lock")
    metrics.path_template("/reports/**")          # labelled "/reports/**"

A path that matches no template is labelled ``"other"``. ``enable(registry)``
records into a registry of your own instead; ``disable()`` stops recording.
"""

from __future__ import annotations

import dataclasses
import logging
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from zk_recipes import _metrics
from zk_recipes._errors import WrongTypeError

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

#: The ``template`` label of a path that matches no registered template.
OTHER = _metrics.OTHER

#: Every metric of the core: name (as exposed) -> (type, label names, help).
METRICS: Mapping[str, tuple[str, tuple[str, ...], str]] = types.MappingProxyType(_metrics.METRICS)

_INSTALL_HINT = "pip install 'zk-recipes[metrics]'"


def enable(registry: CollectorRegistry | None = None) -> None:
    """Record into ``registry`` from now on (default: prometheus_client's ``REGISTRY``).

    Raises ImportError, naming the extra to install, without prometheus-client.
    Switching back and forth is safe: each registry gets its metrics once.
    """
    if not _metrics.available():
        raise ImportError(f"zk_recipes.metrics needs prometheus-client: {_INSTALL_HINT}")
    from zk_recipes import _prometheus

    _metrics.install(_prometheus.sink_for(registry))


def disable() -> None:
    """Stop recording: recipes skip every metric (their counters keep their values)."""
    _metrics.install(None)


def is_enabled() -> bool:
    """True while the recipes record metrics."""
    return _metrics.sink is not None


def registry() -> CollectorRegistry | None:
    """The registry recorded into now (None while disabled)."""
    sink = _metrics.sink
    return getattr(sink, "registry", None)


def path_template(template: str, name: str | None = None) -> None:
    """Label every path matching ``template`` with ``name`` (default: the template itself).

    ``template`` is a path relative to the client's namespace, as recipes
    take it. A segment ``*`` or ``{anything}`` matches one segment; a last
    segment ``**`` matches the rest of the path (zero or more segments).
    The first template registered that matches wins; registering a template
    again changes its name. Register templates at start-up: series already
    recorded keep their labels.
    """
    _metrics.add_template(template, name)


def path_templates() -> dict[str, str]:
    """The registered templates, in matching order, with their names."""
    return _metrics.templates()


def clear_path_templates() -> None:
    """Forget every template: every path is labelled ``"other"`` again."""
    _metrics.clear_templates()


def template_of(path: str) -> str:
    """The ``template`` label a recipe on ``path`` records under."""
    if not isinstance(path, str):
        raise WrongTypeError(f"path must be a str, got {path!r}")
    return _metrics.template_of(path)


@dataclasses.dataclass(frozen=True)
class CounterHandle:
    """A counter defined with ``define_counter``: ``inc(**labels)`` while metrics are on."""

    name: str
    documentation: str
    labelnames: tuple[str, ...]

    def inc(self, **labels: str) -> None:
        """Add one (nothing while metrics are off). Labels by name, all of them."""
        sink = _metrics.sink
        if sink is not None:
            sink.count(self.name, labels)


def define_counter(name: str, documentation: str, labelnames: Sequence[str] = ()) -> CounterHandle:
    """A counter in whichever registry zk-recipes records into: for the framework integrations.

    It follows ``enable()`` and ``disable()`` like the recipes' metrics.
    Defining the same counter twice returns an equal handle.
    """
    handle = CounterHandle(name, documentation, tuple(labelnames))
    if _metrics.available():
        from zk_recipes import _prometheus

        _prometheus.define_counter(
            _prometheus.CounterSpec(handle.name, handle.documentation, handle.labelnames)
        )
    return handle


def _install_default() -> None:
    """Record into prometheus_client's default registry, when it is installed.

    Called once by ``zk_recipes/__init__.py``, the composition root, so
    ``import zk_recipes`` records from the start (what this module's
    docstring promises) while ``_metrics`` stays an interface that picks no
    implementation. Never fails the import: when our metric names are taken
    in the default registry, metrics stay off with a warning.
    """
    if not _metrics.available():
        return
    from zk_recipes import _prometheus

    try:
        _metrics.install(_prometheus.sink_for(None))
    except ValueError:
        logging.getLogger("zk_recipes.metrics").warning(
            "zk-recipes metrics are off: their names are already registered in "
            "prometheus_client.REGISTRY; call zk_recipes.metrics.enable(registry) with a "
            "registry of your own",
            exc_info=True,
        )


__all__ = [
    "METRICS",
    "OTHER",
    "CounterHandle",
    "clear_path_templates",
    "define_counter",
    "disable",
    "enable",
    "is_enabled",
    "path_template",
    "path_templates",
    "registry",
    "template_of",
]
