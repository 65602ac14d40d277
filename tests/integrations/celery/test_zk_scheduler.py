"""ZkScheduler on real beats, a real worker and Redis: a schedule held in ZooKeeper.

Two beats read one schedule; entries are added, changed, disabled and
removed at runtime from this process; the leader beat is killed with -9;
both beats are restarted. Every run is recorded by the worker with its time
and the entry's argument.
"""

from __future__ import annotations

import itertools
import json
import textwrap
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

import zk_recipes_celery as zc
from zk_recipes import ZkClient
from zk_recipes.frameworks import BeatEntry, ScheduleError
from zk_recipes.testing import wait_for_children, wait_until
from zk_recipes_celery import CeleryBeatSchedule, beat_schedule
from zk_recipes_celery.testing import CeleryProcess, CeleryProject, Record

from ._common import ELECTION, SESSION_TIMEOUT, by_pid, leader_pid

pytestmark = pytest.mark.slow

SCHEDULER = "zk_recipes_celery.beat:ZkScheduler"
SCHEDULE = "/celery/schedule/proj"

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
    app.conf.beat_schedule = {"static": {"task": "proj.tick", "schedule": 1.0, "args": ["static"]}}


    @app.task(name="proj.tick")
    def tick(label):
        record(task="tick", label=label)
    """
)


@pytest.fixture
def schedule(
    project: CeleryProject, zk_hosts: str, zk_namespace: str
) -> Iterator[CeleryBeatSchedule]:
    """The schedule, changed at runtime from this process (an app of the same name)."""
    app = Celery("proj", set_as_current=False)
    app.conf.zk_recipes_hosts = zk_hosts
    app.conf.zk_recipes_namespace = zk_namespace
    try:
        yield beat_schedule(app)
    finally:
        zc.close_clients()


def _runs(records: list[Record], label: str, start: float = 0.0) -> list[float]:
    return sorted(r["t"] for r in records if r.get("label") == label and r["t"] >= start)


def _two_beats(project: CeleryProject, module: str, zk_client: ZkClient) -> list[CeleryProcess]:
    beats = [project.start_beat(module, name=f"b{n}", scheduler=SCHEDULER) for n in range(2)]
    wait_for_children(zk_client, ELECTION, 2)
    return beats


def _running(project: CeleryProject, zk_client: ZkClient) -> tuple[str, list[CeleryProcess]]:
    """A worker and two beats on ZkScheduler, once the static entry has run 3 times."""
    module = project.write_app(APP)
    project.start_worker(module)
    beats = _two_beats(project, module, zk_client)
    project.wait_records(lambda rs: len(_runs(rs, "static")) >= 3, timeout=20)
    return module, beats


def _never_twice(runs: list[float], what: str) -> None:
    # The records say when the worker ran each task, not when it was sent: under load a
    # late run and the next, on time, can come well under a period apart (0.49 s for a
    # 1 s entry was seen), while one tick sent twice runs back to back.
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    assert not gaps or min(gaps) > 0.25, f"{what} fired twice for one tick: {gaps}"


def test_two_beats_share_one_schedule_changed_at_runtime(
    project: CeleryProject, zk_client: ZkClient, schedule: CeleryBeatSchedule
) -> None:
    _running(project, zk_client)
    assert [e.name for e in schedule.entries()] == ["static"]  # imported from beat_schedule

    added = time.time()
    schedule.add("added", "proj.tick", 1.0, args=["added"])
    project.wait_records(lambda rs: len(_runs(rs, "added", added)) >= 3, timeout=15)
    first = _runs(project.read_records(), "added", added)[0]
    print(f"an entry added at runtime first ran {first - added:.2f}s later (period 1s)")
    assert first - added <= 2.2  # its period counts from when it was added: 1 s, then a tick

    changed = time.time()
    schedule.add("added", "proj.tick", 1.0, args=["changed"])
    project.wait_records(lambda rs: len(_runs(rs, "changed", changed)) >= 2, timeout=15)

    schedule.disable("added")
    disabled = time.time() + 1.5  # a run sent just before the change may still arrive
    schedule.enable("static")  # enabling an enabled entry changes nothing
    assert schedule.remove("static")
    assert not schedule.remove("static")
    time.sleep(4.0)  # a quiet interval is what is checked: no event marks "nothing ran"
    records = project.read_records()
    assert _runs(records, "changed", disabled) == [], "a disabled entry is not sent"
    assert _runs(records, "static", disabled) == [], "a removed entry is not sent"
    for label in ("static", "added", "changed"):
        _never_twice(_runs(records, label), label)
    assert [e.enabled for e in schedule.entries()] == [False]


def test_kill_9_of_the_leader_beat_fires_no_entry_twice(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    _module, beats = _running(project, zk_client)
    leader = by_pid(beats, leader_pid(zk_client))
    standby = next(b for b in beats if b is not leader)

    leader.kill_group()
    killed = time.time()
    project.wait_records(lambda rs: len(_runs(rs, "static", killed)) >= 4, timeout=30)
    runs = _runs(project.read_records(), "static")
    after = [t - killed for t in runs if t >= killed]
    print(f"after kill -9 of the leader beat the entry ran again {after[0]:.2f}s later")
    assert after[0] <= SESSION_TIMEOUT * 2 + 3
    _never_twice(runs, "static")  # the tick due during the failover went out once
    assert leader_pid(zk_client) == standby.pid
    assert "standby" in standby.log()


def test_last_runs_survive_a_restart_of_both_beats(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    module, beats = _running(project, zk_client)
    for beat in beats:
        beat.stop()
    data, _stat = zk_client.get(f"{SCHEDULE}/runs/static")
    before = json.loads(data)
    assert before["total_run_count"] >= 3

    restarted = time.time()
    _two_beats(project, module, zk_client)
    project.wait_records(lambda rs: len(_runs(rs, "static", restarted)) >= 2, timeout=20)
    wait_until(
        lambda: (
            json.loads(zk_client.get(f"{SCHEDULE}/runs/static")[0])["total_run_count"]
            >= before["total_run_count"] + 2
        ),
        "the count goes on from where it was",
    )
    _never_twice(_runs(project.read_records(), "static"), "static")


@pytest.mark.parametrize(
    ("schedule_value", "message"),
    [
        ({"every": 0}, "every must be seconds > 0"),
        ({"crontab": {"minute": "*/5;rm"}}, "is not a cron field"),
        ({"solar": {"event": "noon", "lat": 0, "lon": 0}}, "event is one of"),
        ({"hourly": 1}, "unknown schedule kind"),
        ({"crontab": {"minute": "61"}}, "crontab minute '61': 61 is above 59"),
        ({"every": float("inf")}, "every must be seconds > 0 and at most"),
    ],
)
def test_a_bad_entry_is_refused_before_anything_is_written(
    schedule_value: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScheduleError, match=message):
        BeatEntry("e", "proj.tick", schedule_value)


def test_celery_schedules_are_stored_as_the_beats_will_read_them() -> None:
    from celery.schedules import crontab

    from zk_recipes_celery._celery_schedules import celery_check, from_celery

    stored = from_celery(crontab(minute=[0, 30], hour=7, day_of_week="mon-fri"))
    assert stored["crontab"]["minute"] == "0,30"
    assert stored["crontab"]["hour"] == "7"
    assert celery_check(stored).minute == {0, 30}
