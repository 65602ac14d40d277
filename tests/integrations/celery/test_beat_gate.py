"""The beat gate decides once per due entry: a SUSPENDED blip delays an entry, never drops it.

Celery's real scheduler objects, in process, on a real ZooKeeper reached
through a proxy the test cuts (black-holes) to make this beat's connection
SUSPENDED; tasks run eagerly, so "sent" means "ran here". Both gates: a
``@leader_only`` task in a plain ``Scheduler``, and ``leader_gated`` (what
``LeaderScheduler`` is) around every entry.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery, _state, beat as celery_beat
from celery.beat import ScheduleEntry

import zk_recipes_celery as zc
from zk_recipes.testing import TcpProxy, free_ports, wait_until
from zk_recipes_celery._beat_election import BeatRole, beat_election
from zk_recipes_celery._beat_gate import UNKNOWN_ROLE_POLL

pytestmark = pytest.mark.slow

KINDS = ("leader_only", "leader_gated")
PAST = datetime.timedelta(hours=2)


@pytest.fixture
def app(zk_proxy: TcpProxy, zk_namespace: str) -> Iterator[Celery]:
    """An eager app whose ZooKeeper connection goes through ``zk_proxy``."""
    app = Celery("gate", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.task_always_eager = True
    app.conf.zk_recipes_hosts = zk_proxy.connect_string
    app.conf.zk_recipes_namespace = zk_namespace
    app.conf.zk_recipes_session_timeout = 4.0
    yield app
    zk_proxy.heal()
    zc.close_clients()
    app.close()
    _state._set_task_join_will_block(False)


class Beat:
    """A scheduler of ``kind`` with one entry, due now, of a task that records its runs."""

    def __init__(self, app: Celery, kind: str) -> None:
        self.sent: list[str] = []
        name = f"t.gate.{kind}"

        def report() -> None:
            self.sent.append("report")

        if kind == "leader_only":
            app.task(name=name, shared=False)(zc.leader_only(report))
            scheduler_cls: Any = celery_beat.Scheduler
        else:
            app.task(name=name, shared=False)(report)
            scheduler_cls = zc.leader_gated(celery_beat.Scheduler)
        self.due_since = app.now() - PAST
        entry = ScheduleEntry(
            name="report",
            task=name,
            schedule=datetime.timedelta(hours=1),
            last_run_at=self.due_since,
            app=app,
        )
        self.scheduler: Any = scheduler_cls(app=app, lazy=True, schedule={"report": entry})
        self.election = beat_election(app)
        self.election.join()

    @property
    def entry(self) -> Any:
        return self.scheduler.schedule["report"]

    def wait_role(self, role: BeatRole) -> None:
        wait_until(lambda: self.election.role() is role, f"this beat's role {role}", timeout=30)


@pytest.mark.parametrize("kind", KINDS)
def test_a_due_entry_waits_while_the_role_is_unknown_and_goes_out_late(
    app: Celery, zk_proxy: TcpProxy, kind: str
) -> None:
    beat = Beat(app, kind)
    beat.wait_role(BeatRole.LEADER)
    zk_proxy.blackhole()
    beat.wait_role(BeatRole.UNKNOWN)  # SUSPENDED (or LOST): nobody knows who leads

    delay = beat.scheduler.tick()

    assert beat.sent == []
    assert beat.entry.last_run_at == beat.due_since, "the entry must not advance unsent"
    assert delay <= UNKNOWN_ROLE_POLL

    zk_proxy.heal()
    beat.wait_role(BeatRole.LEADER)
    wait_until(lambda: (beat.scheduler.tick(), beat.sent)[1], "the late entry sent", timeout=10)
    assert beat.sent == ["report"]
    assert beat.entry.last_run_at > beat.due_since


@pytest.mark.parametrize("kind", KINDS)
def test_a_blip_between_the_decision_and_the_send_does_not_drop_the_entry(
    app: Celery, zk_proxy: TcpProxy, kind: str
) -> None:
    beat = Beat(app, kind)
    beat.wait_role(BeatRole.LEADER)
    entry = beat.entry

    # Celery's tick, one step at a time, with the connection SUSPENDED in the middle.
    assert beat.scheduler.is_due(entry).is_due  # decided here: this beat leads
    zk_proxy.blackhole()
    beat.wait_role(BeatRole.UNKNOWN)
    beat.scheduler.reserve(entry)
    beat.scheduler.apply_entry(entry)

    assert beat.sent == ["report"], "decided once: sent (the blip came after the decision)"


def test_an_unreachable_ensemble_is_said_once_with_the_reason(
    zk_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    (port,) = free_ports(1)
    app = Celery("nowhere", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.zk_recipes_hosts = f"127.0.0.1:{port}"
    app.conf.zk_recipes_namespace = zk_namespace
    try:
        with caplog.at_level(logging.DEBUG, logger="zk_recipes.celery.beat"):
            election = beat_election(app)
            election.join()
            wait_until(
                lambda: len([r for r in caplog.records if "cannot join" in r.getMessage()]) >= 3,
                "three attempts to join",
                timeout=30,
            )
            assert election.role() is BeatRole.UNKNOWN
        attempts = [r for r in caplog.records if "cannot join" in r.getMessage()]
        assert [r.levelno for r in attempts[:3]] == [logging.WARNING, logging.DEBUG, logging.DEBUG]
        said = attempts[0].getMessage()
        assert f"127.0.0.1:{port}" in said
        assert "Connection refused" in said
        assert "no leader-only entry is sent" in said
    finally:
        zc.close_clients()
        app.close()
