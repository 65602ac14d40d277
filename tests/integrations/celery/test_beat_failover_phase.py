"""LeaderScheduler at failover: an interval entry keeps the previous leader's phase (review 3, M1).

Each beat keeps its own PersistentScheduler file, and a standby's
``last_run_at`` moves at its own phase: when that beat started. The second
beat here starts some 3 s after the first one's first run, so its
phase differs; the leader is then stopped right after a run, gracefully (the
standby leads at once: its own phase would run the entry again early) or
with kill -9 (it leads once the session expires: its own phase would run it
late). Either way the next run must come one period after the last one.
"""

from __future__ import annotations

import textwrap
import time

import pytest

from zk_recipes import ZkClient
from zk_recipes.testing import wait_for_children
from zk_recipes_celery.testing import CeleryProcess, CeleryProject

from ._common import ELECTION, by_pid, leader_pid, times

pytestmark = pytest.mark.slow

SCHEDULER = "zk_recipes_celery.beat:LeaderScheduler"

APP = textwrap.dedent(
    """
    import os

    from celery import Celery

    from zk_recipes_celery.testing import record

    app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
    app.conf.broker_connection_retry_on_startup = True
    app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
    app.conf.zk_recipes_namespace = os.environ["ZK_NAMESPACE"]
    app.conf.zk_recipes_session_timeout = float(os.environ["ZK_SESSION_TIMEOUT"])
    app.conf.beat_schedule = {
        "every": {"task": "proj.every", "schedule": float(os.environ["PERIOD"])},
    }


    @app.task(name="proj.every")
    def every():
        record(task="every")
    """
)


def _leader_after_a_run(
    project: CeleryProject, zk_client: ZkClient, period: float
) -> tuple[CeleryProcess, CeleryProcess, float]:
    """The leader and the standby (of another phase), right after a run; that run's time."""
    project.env["PERIOD"] = str(period)
    module = project.write_app(APP)
    project.start_worker(module)
    first = project.start_beat(module, name="b0", scheduler=SCHEDULER)
    wait_for_children(zk_client, ELECTION, 1)
    project.wait_records(lambda rs: len(times(rs, "every", 0)) >= 1, timeout=period + 15)
    # The phase difference is what is tested: 1.5 s, plus the second beat's start-up, puts
    # its phase well outside the checks' slack (no event marks a phase).
    time.sleep(1.5)
    second = project.start_beat(module, name="b1", scheduler=SCHEDULER)  # its own phase
    wait_for_children(zk_client, ELECTION, 2)
    assert by_pid([first, second], leader_pid(zk_client)) is first
    project.wait_records(lambda rs: len(times(rs, "every", 0)) >= 2, timeout=period + 10)
    last = times(project.read_records(), "every", 0)[-1]
    return first, second, last


def _next_gap(project: CeleryProject, last: float, period: float) -> float:
    project.wait_records(lambda rs: len(times(rs, "every", last + 0.01)) >= 1, timeout=30)
    return times(project.read_records(), "every", last + 0.01)[0] - last


def test_a_graceful_handover_runs_an_interval_entry_one_period_after_the_last_run(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    period = 6.0
    leader, standby, last = _leader_after_a_run(project, zk_client, period)
    leader.stop()  # the standby leads at once
    gap = _next_gap(project, last, period)
    print(f"graceful handover: the next run came {gap:.2f}s after the last (period {period:g}s)")
    assert period - 0.8 <= gap <= period + 0.8, f"not in the leader's phase: {gap:.2f}s"
    assert "count from the previous leader's last send: every" in standby.log()


def test_after_kill_9_of_the_leader_the_entry_runs_one_period_after_its_last_run(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    period = 8.0  # longer than the session's expiry (3 s) and the takeover after it
    leader, standby, last = _leader_after_a_run(project, zk_client, period)
    leader.kill_group()
    gap = _next_gap(project, last, period)
    print(
        f"kill -9 of the leader: the next run came {gap:.2f}s after the last (period {period:g}s)"
    )
    assert period - 0.8 <= gap <= period + 0.8, f"not in the leader's phase: {gap:.2f}s"
    assert leader_pid(zk_client) == standby.pid
