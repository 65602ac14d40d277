"""Beat HA on real beat processes: @leader_only and LeaderScheduler, with failover."""

from __future__ import annotations

import itertools
import textwrap
import time
from pathlib import Path

import pytest

from zk_recipes import ZkClient
from zk_recipes.testing import wait_for_children, wait_until
from zk_recipes_celery.testing import CeleryProcess, CeleryProject

from ._common import ELECTION, SESSION_TIMEOUT, by_pid as _by_pid, leader_pid, times as _times

pytestmark = pytest.mark.slow

WINDOW = 6.0

_CONFIG = """
    import os

    from celery import Celery

    from zk_recipes_celery.testing import record

    app = Celery("proj", broker=os.environ["REDIS_URL"], backend=os.environ["REDIS_URL"])
    app.conf.broker_connection_retry_on_startup = True
    app.conf.zk_recipes_hosts = os.environ["ZK_HOSTS"]
    app.conf.zk_recipes_namespace = os.environ["ZK_NAMESPACE"]
    app.conf.zk_recipes_session_timeout = float(os.environ["ZK_SESSION_TIMEOUT"])
"""

#: Two tasks every second: ``gated`` from the leader beat only, ``ungated`` from every beat.
APP = textwrap.dedent(
    _CONFIG
    + """
    from zk_recipes_celery import leader_only

    app.conf.beat_schedule = {
        "gated": {"task": "proj.gated", "schedule": 1.0},
        "ungated": {"task": "proj.ungated", "schedule": 1.0},
    }


    @app.task(name="proj.gated")
    @leader_only
    def gated():
        record(task="gated")


    @app.task(name="proj.ungated")
    def ungated():
        record(task="ungated")
    """
)

#: For ``-S zk_recipes_celery.beat:LeaderScheduler``, which is then all of zk-recipes the
#: beat imports: the scheduler must install the hooks it needs by itself.
PLAIN_APP = textwrap.dedent(
    _CONFIG
    + """
    app.conf.beat_schedule = {"plain": {"task": "proj.plain", "schedule": 1.0}}


    @app.task(name="proj.plain")
    def plain():
        record(task="plain")
    """
)


def _two_beats(
    project: CeleryProject, module: str, zk_client: ZkClient, **kw: str | None
) -> list[CeleryProcess]:
    beats = [project.start_beat(module, name=f"b{n}", **kw) for n in range(2)]  # type: ignore[arg-type]
    wait_for_children(zk_client, ELECTION, 2)
    return beats


def _assert_one_sender_of_gated(project: CeleryProject, start: float, how: str) -> None:
    """In WINDOW s from ``start``: ``gated`` went out once per tick, ``ungated`` twice."""
    records = project.read_records()
    gated = _times(records, "gated", start, start + WINDOW)
    ungated = _times(records, "ungated", start, start + WINDOW)
    print(f"{how}, in {WINDOW:g}s: gated {len(gated)}, ungated (both beats) {len(ungated)}")
    assert WINDOW - 3 <= len(gated) <= WINDOW + 2, "one beat sends the leader-only task"
    assert len(ungated) >= 1.6 * WINDOW - 2, "both beats run: the ungated task goes twice"


def _kill_leader_and_time_failover(
    project: CeleryProject, leader: CeleryProcess, task: str, runs: int
) -> list[float]:
    """kill -9 the leader beat's group; its next ``runs`` runs' times (from the kill)."""
    leader.kill_group()
    killed = time.time()
    project.wait_records(lambda rs: len(_times(rs, task, killed)) >= runs, timeout=20)
    after = [t - killed for t in _times(project.read_records(), task, killed)]
    print(f"first {task} run {after[0]:.2f}s after kill -9 of the leader beat (session 3s)")
    assert after[0] <= SESSION_TIMEOUT * 2 + 3
    return after


def test_leader_only_is_sent_by_one_beat_and_fails_over_after_kill_9(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    module = project.write_app(APP)
    project.start_worker(module)
    beats = _two_beats(project, module, zk_client)
    start = time.time()
    project.wait_records(lambda rs: bool(_times(rs, "gated", start + WINDOW)), timeout=WINDOW + 10)

    _assert_one_sender_of_gated(project, start, "2 beats")
    leader = _by_pid(beats, leader_pid(zk_client))
    standby = next(b for b in beats if b is not leader)
    assert "not sending due task gated" in standby.log()

    _kill_leader_and_time_failover(project, leader, "gated", runs=3)
    assert leader_pid(zk_client) == standby.pid


def test_leader_scheduler_gates_every_entry_without_bursts(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    module = project.write_app(PLAIN_APP)
    project.start_worker(module)
    beats = _two_beats(
        project, module, zk_client, scheduler="zk_recipes_celery.beat:LeaderScheduler"
    )
    start = time.time()
    project.wait_records(lambda rs: bool(_times(rs, "plain", start + WINDOW)), timeout=WINDOW + 10)

    plain = _times(project.read_records(), "plain", start, start + WINDOW)
    assert WINDOW - 3 <= len(plain) <= WINDOW + 2, f"one beat sends: {len(plain)} runs"
    leader = _by_pid(beats, leader_pid(zk_client))
    standby = next(b for b in beats if b is not leader)
    assert "standby (schedule kept in step)" in standby.log()

    after = _kill_leader_and_time_failover(project, leader, "plain", runs=4)
    gaps = [b - a for a, b in itertools.pairwise(after)]
    # When the worker ran each: a burst runs back to back; a late run beside an on-time
    # one under load may be well under a period apart.
    assert min(gaps) > 0.25, f"the new leader fired a burst of overdue entries: {gaps}"


def test_leader_scheduler_graceful_stop_hands_over_at_once(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    project.env["ZK_SESSION_TIMEOUT"] = "20"  # a handover waiting for expiry would show
    module = project.write_app(PLAIN_APP)
    project.start_worker(module)
    beats = _two_beats(
        project, module, zk_client, scheduler="zk_recipes_celery.beat:LeaderScheduler"
    )
    leader = _by_pid(beats, leader_pid(zk_client))
    standby = next(b for b in beats if b is not leader)

    leader.stop()
    stopped = time.time()

    wait_until(lambda: leader_pid(zk_client) == standby.pid, "the standby leads", timeout=5.0)
    project.wait_records(lambda rs: len(_times(rs, "plain", stopped)) >= 2, timeout=10)


def _parent_pid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rpartition(")")[2].split()[1])


def test_embedded_beats_gate_and_hand_over_at_once_on_worker_stop(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    """``worker -B`` on two workers: one beat sends; stopping its worker hands over at once."""
    project.env["ZK_SESSION_TIMEOUT"] = "20"  # a handover waiting for expiry would show
    module = project.write_app(APP)
    workers = [
        project.start_worker(
            module,
            name=f"w{n}",
            concurrency=1,
            args=["-B", "-s", str(project.base_dir / f"w{n}-schedule")],
        )
        for n in range(2)
    ]
    wait_for_children(zk_client, ELECTION, 2)
    start = time.time()
    project.wait_records(lambda rs: bool(_times(rs, "gated", start + WINDOW)), timeout=WINDOW + 10)

    _assert_one_sender_of_gated(project, start, "2 workers with -B")
    leader_beat = leader_pid(zk_client)
    leader = next(w for w in workers if w.pid == _parent_pid(leader_beat))
    standby = next(w for w in workers if w is not leader)

    leader.stop()
    stopped = time.time()

    wait_until(
        lambda: _parent_pid(leader_pid(zk_client)) == standby.pid,
        "the standby's embedded beat leads",
        timeout=5.0,
    )
    print(f"handover {time.time() - stopped:.2f}s after stopping the leader's worker (session 20s)")
    project.wait_records(lambda rs: len(_times(rs, "gated", stopped)) >= 2, timeout=10)
