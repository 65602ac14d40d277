"""zk-recipes for Celery: singleton tasks, leader-only beat entries, beat HA.

::

    app.conf.zk_recipes_hosts = "zk1:2181,zk2:2181,zk3:2181"

    @app.task(bind=True)
    @singleton_task(key=["account_id"])          # one run per account at a time
    def sync_account(self, account_id): ...

    @app.task
    @leader_only                                 # sent by the leader beat only
    def nightly_report(): ...

    # or gate the whole schedule:
    #   celery -A proj beat -S zk_recipes_celery.beat:LeaderScheduler

One ZooKeeper session per process, made after fork, closed at shutdown
(``_lifecycle``). Importing this package changes nothing in Celery: the
process-wide hooks are installed by ``install(app)``, the decorators and
``LeaderScheduler`` (``_hooks``). See docs/integrations/celery.md.
"""

from __future__ import annotations

try:
    import celery
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "zk_recipes_celery needs Celery: install it with pip install 'zk-recipes[celery]'"
    ) from exc
else:  # the supported versions: the extra's pins (pyproject.toml)
    from zk_recipes.frameworks import require_version

    require_version("zk_recipes_celery", "Celery", celery.VERSION, (5, 3), "celery")

from zk_recipes_celery._abort import SingletonAborted
from zk_recipes_celery._celery_schedules import CeleryBeatSchedule, beat_schedule
from zk_recipes_celery._config import CeleryZkConfig, read_config
from zk_recipes_celery._hooks import get_client, install
from zk_recipes_celery._lifecycle import close_clients
from zk_recipes_celery._metrics import (
    beat_publish_dropped,
    counts,
    singleton_acquired,
    singleton_skipped,
)
from zk_recipes_celery._publish import DuplicateTask
from zk_recipes_celery._singleton import SingletonTask, singleton_task
from zk_recipes_celery._singleton_run import SingletonBusy, SingletonRun, current_singleton
from zk_recipes_celery.beat import LeaderScheduler, ZkScheduler, leader_gated, leader_only

__all__ = [
    "CeleryBeatSchedule",
    "CeleryZkConfig",
    "DuplicateTask",
    "LeaderScheduler",
    "SingletonAborted",
    "SingletonBusy",
    "SingletonRun",
    "SingletonTask",
    "ZkScheduler",
    "beat_publish_dropped",
    "beat_schedule",
    "close_clients",
    "counts",
    "current_singleton",
    "get_client",
    "install",
    "leader_gated",
    "leader_only",
    "read_config",
    "singleton_acquired",
    "singleton_skipped",
    "singleton_task",
]
