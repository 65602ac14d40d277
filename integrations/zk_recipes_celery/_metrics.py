"""Counters for work the integration declined to do, and Celery signals for our events.

Prometheus counters when ``prometheus-client`` is installed (``pip install
'zk-recipes[metrics]'``), in the registry of ``zk_recipes.metrics``; always a
Celery signal and a log line. Counting never fails the caller.
"""

from __future__ import annotations

import collections
import threading

from celery.utils.dispatch import Signal

from zk_recipes import metrics

#: Sent (sender=the task) when a singleton run is skipped because another run holds the key.
#: Arguments: ``task_id``, ``key_path``, ``holder`` (the holder's ``zk_recipes.Owner``).
singleton_skipped = Signal(name="zk_recipes_singleton_skipped")
#: Sent (sender=the task) in the task's thread when a singleton run holds its key, just
#: before its body starts. Arguments: ``task_id``, ``key_path``, ``run`` (the
#: ``SingletonRun``: ``fencing_token``, ``lost``). A slow receiver delays the body.
singleton_acquired = Signal(name="zk_recipes_singleton_acquired")
#: Sent (sender=the scheduler) when a beat that is not the leader drops a due entry.
#: Arguments: ``entry`` (the schedule entry name), ``task`` (task name), ``reason``.
beat_publish_dropped = Signal(name="zk_recipes_beat_publish_dropped")

_counts: collections.Counter[tuple[str, str]] = collections.Counter()
_counts_lock = threading.Lock()

# In whichever registry the core records into (zk_recipes.metrics): the same
# names as before, and off with the core's metrics.
_counters = {
    "singleton_skipped": metrics.define_counter(
        "zk_recipes_celery_singleton_skipped",
        "Singleton task runs skipped because another run held the key",
        ["task"],
    ),
    "singleton_conflicts": metrics.define_counter(
        "zk_recipes_celery_singleton_conflicts",
        "Singleton task runs that found the key held, by conflict policy",
        ["task", "policy"],
    ),
    "publish_deduplicated": metrics.define_counter(
        "zk_recipes_celery_publish_deduplicated",
        "Publishes of a singleton task that sent nothing: a task of their key was queued or "
        "running (unique_on_publish)",
        ["task"],
    ),
    "publish_unmarked": metrics.define_counter(
        "zk_recipes_celery_publish_unmarked",
        "Publishes with unique_on_publish sent without a queued marker: ZooKeeper did not answer",
        ["task"],
    ),
    "beat_dropped": metrics.define_counter(
        "zk_recipes_celery_beat_publish_dropped",
        "Due beat entries not sent because this beat was not the leader",
        ["task"],
    ),
}


def count(metric: str, **labels: str) -> None:
    """Add one to ``metric``; ``counts()`` reads the in-process totals."""
    with _counts_lock:
        _counts[(metric, labels.get("task", ""))] += 1
    counter = _counters.get(metric)
    if counter is not None:
        counter.inc(**labels)


def counts() -> dict[tuple[str, str], int]:
    """In-process totals, keyed by (metric, task name): for tests and status pages."""
    with _counts_lock:
        return dict(_counts)
