"""ZkScheduler against what goes wrong: entries no beat can run, and a lost reply to a run record.

Bad entries: written by hand into the schedule (as an older version, a script
or a Java tool could), before a real beat starts and while it runs; the beat
must skip each one, say so once with its node's path, and keep every other
entry ticking (issue 35: each of these stopped every beat with a CRITICAL
ValueError). The lost reply (review 3, M7): a scheduler in this process
writes its run record through a proxy that drops the server's replies; the
write applied, so the tick must still be sent, once.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

import zk_recipes_celery as zc
from zk_recipes import ConnectionState, ZkClient
from zk_recipes.frameworks import ScheduleError
from zk_recipes.testing import TcpProxy, wait_until
from zk_recipes_celery.beat import ZkScheduler
from zk_recipes_celery.testing import CeleryProject

from .test_zk_scheduler import APP, SCHEDULE, SCHEDULER, _runs

pytestmark = pytest.mark.slow

ENTRIES = f"{SCHEDULE}/entries"

#: Nodes a beat meets: the CLI's refused crontabs of issue 35, and worse.
BAD_NODES = {
    "minute-61": {"task": "proj.tick", "schedule": {"crontab": {"minute": "61"}}},
    "minute-x": {"task": "proj.tick", "schedule": {"crontab": {"minute": "x"}}},
    "step-0": {"task": "proj.tick", "schedule": {"crontab": {"minute": "*/0"}}},
    "hour-25": {"task": "proj.tick", "schedule": {"crontab": {"hour": "25"}}},
    "no-task": {"schedule": {"every": 1}},
    "every-forever": {"task": "proj.tick", "schedule": {"every": 1e300}},
}


def _bad(client: ZkClient, name: str, data: bytes) -> str:
    path = f"{ENTRIES}/{name}"
    client.create(path, data, parents=True)
    return path


def test_a_beat_skips_entries_it_cannot_run_says_so_once_and_keeps_ticking(
    project: CeleryProject, zk_client: ZkClient
) -> None:
    paths = [_bad(zk_client, name, json.dumps(doc).encode()) for name, doc in BAD_NODES.items()]
    paths.append(_bad(zk_client, "java", b"\xac\xed\x00\x05 a serialized Java object"))
    if importlib.util.find_spec("ephem") is None:  # written by a host that has it
        solar = {
            "task": "proj.tick",
            "schedule": {"solar": {"event": "sunset", "lat": 48.85, "lon": 2.35}},
        }
        paths.append(_bad(zk_client, "dusk", json.dumps(solar).encode()))
    module = project.write_app(APP)
    project.start_worker(module)
    beat = project.start_beat(module, scheduler=SCHEDULER)
    started = time.time()
    project.wait_records(lambda rs: len(_runs(rs, "static", started)) >= 3, timeout=20)

    late = _bad(zk_client, "late", json.dumps({"task": "t", "schedule": {"every": -1}}).encode())
    changed = time.time()
    project.wait_records(lambda rs: len(_runs(rs, "static", changed)) >= 3, timeout=20)
    assert beat.is_alive()
    log = beat.log()
    assert "CRITICAL" not in log
    for path in [*paths, late]:
        said = [line for line in log.splitlines() if f"schedule entry {path} is skipped" in line]
        assert len(said) == 1, f"{path}: said {len(said)} times"
    assert "61 is above 59" in log
    if importlib.util.find_spec("ephem") is None:
        assert "needs the ephem package" in log


@pytest.fixture
def proxied_app(zk_proxy: TcpProxy, zk_namespace: str) -> Iterator[Celery]:
    """An app whose ZooKeeper is behind ``zk_proxy``, sessions long enough for a tick to land."""
    app = Celery("m7", broker="memory://", set_as_current=False)
    app.conf.zk_recipes_hosts = zk_proxy.connect_string
    app.conf.zk_recipes_namespace = zk_namespace
    app.conf.zk_recipes_session_timeout = 6.0
    app.conf.zk_recipes_connection_timeout = 10.0
    app.conf.beat_schedule = {"e": {"task": "m7.tick", "schedule": 1.0}}
    app.task(name="m7.tick")(lambda: None)
    try:
        yield app
    finally:
        zc.close_clients()
        app.close()


class _Counting(ZkScheduler):
    """ZkScheduler that records the run count of each send instead of publishing it."""

    sent: list[int]

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kw: Any) -> Any:
        self.sent.append(self.schedule[entry.name].total_run_count)


def test_a_lost_reply_to_the_run_record_still_sends_the_tick_once(
    proxied_app: Celery, zk_proxy: TcpProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="zk_recipes.celery.beat")
    scheduler = _Counting(app=proxied_app)
    scheduler.sent = []
    try:
        client = zc.get_client(proxied_app)
        wait_until(lambda: scheduler._is_leader(), "this scheduler leads")

        def tick_until(count: int, timeout: float = 30.0) -> None:
            deadline = time.monotonic() + timeout
            while len(scheduler.sent) < count:
                assert time.monotonic() < deadline, f"sent {scheduler.sent}"
                time.sleep(max(0.0, min(scheduler.tick(), 0.05)))

        tick_until(2)
        # The next run record is applied by the server; its reply never comes. Once the
        # client has given the connection up, the network heals and it reconnects.
        zk_proxy.drop_replies()

        def heal_once_noticed() -> None:
            wait_until(lambda: client.state is not ConnectionState.CONNECTED, "noticed", 20)
            zk_proxy.heal()

        healer = threading.Thread(target=heal_once_noticed)
        healer.start()
        tick_until(4)
        healer.join(30)
        record = json.loads(client.get("/celery/schedule/m7/runs/e")[0])
    finally:
        scheduler.close()
    assert scheduler.sent == list(range(1, record["total_run_count"] + 1)), (
        "every recorded run was sent, once"
    )
    assert "the reply to its run record was lost; it was ours" in caplog.text


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"crontab": {"minute": "61"}}, "crontab minute '61': 61 is above 59"),
        ({"crontab": {"minute": "x"}}, "'x' is neither a number nor a month"),
        ({"crontab": {"minute": "*/0"}}, "a step of 0"),
        ({"crontab": {"hour": "25"}}, "crontab hour '25': 25 is above 23"),
        ({"every": 1e300}, "every must be seconds > 0 and at most"),
    ],
)
def test_beat_schedule_add_refuses_what_no_beat_could_run(
    app: Celery, zk_client: ZkClient, schedule: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScheduleError, match=re.escape(message)):
        zc.beat_schedule(app).add("e", "proj.tick", schedule)
    assert zk_client.exists("/celery/schedule/t/entries/e") is None


def test_beat_schedule_add_refuses_a_solar_entry_without_ephem(app: Celery) -> None:
    if importlib.util.find_spec("ephem") is not None:
        pytest.skip("ephem is installed here: the refusal is for a process without it")
    with pytest.raises(ScheduleError, match=r"needs the ephem package.*celery\[solar\]"):
        zc.beat_schedule(app).add(
            "dusk", "proj.tick", {"solar": {"event": "sunset", "lat": 1, "lon": 2}}
        )
