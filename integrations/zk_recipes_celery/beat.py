"""Beat high availability: run ``celery beat`` on several hosts, publish from one.

Two ways, sharing one election per beat process (``_beat_election``):

- ``@leader_only`` (or ``@app.task(zk_leader_only=True)``) marks single
  tasks: any scheduler (PersistentScheduler, DatabaseScheduler, ...) sends
  them only from the leader beat while it is CONNECTED. The gate is in
  ``celery.beat.Scheduler.apply_entry`` (``_beat_gate``), wrapped once when
  the first ``@leader_only`` task is defined (the beat process imports the
  task modules before it starts its scheduler), never by a plain import: a
  beat that is not the leader drops the entry with a log line, a counter and
  the ``beat_publish_dropped`` signal.
- ``ZkScheduler`` (``celery beat -S zk_recipes_celery.beat:ZkScheduler``): the
  schedule itself in ZooKeeper, read by every beat, changed at runtime,
  sent by the leader (``_zk_schedule``).
- ``LeaderScheduler`` (``celery beat -S zk_recipes_celery.beat:LeaderScheduler``)
  gates every entry. It wraps the scheduler named by ``zk_recipes_beat_scheduler``
  (default PersistentScheduler; django-celery-beat's DatabaseScheduler
  works too). Standbys keep ticking: due entries are reserved (their
  ``last_run_at`` advances) but not sent, so a standby that takes over
  does not fire a burst of "overdue" entries. The leader records each send
  in ZooKeeper before it sends (``<prefix>/schedule/<beat name>/runs/<entry>``,
  ZkScheduler's run record: ``last_run_at``, ``total_run_count``), and a beat
  that becomes the leader sets each entry's ``last_run_at`` from those
  records before its next tick: an interval entry keeps the previous
  leader's phase (each beat's own phase is when it started), so it runs
  neither a second time inside one period nor up to two periods late. A
  beat that does not lead ticks at least every ``TAKEOVER_POLL`` second to
  notice it leads now.

Either way the role is decided once per due entry, before the entry advances
(``_beat_gate.decide``): while it is unknown (starting, or SUSPENDED) the entry
neither goes out nor advances and is looked at again shortly, so it is sent
late rather than twice, and never lost to a blip between two checks.

Failover: a leader that closes (beat stopped) deletes its node at once; one
that dies (kill -9) is replaced when the server expires its session, within
``zk_recipes_session_timeout``. The new leader sends the next due entry.
"""

from __future__ import annotations

from typing import Any, TypeVar

from celery import beat
from celery.utils.imports import symbol_by_name

from zk_recipes_celery._beat_election import BeatRole, beat_election
from zk_recipes_celery._beat_gate import (
    LEADER_ONLY_MARK,
    decide,
    decided_role,
    drop,
    is_leader_only,
)
from zk_recipes_celery._beat_sends import TAKEOVER_POLL, record_send, take_over
from zk_recipes_celery._hooks import install_once
from zk_recipes_celery._lifecycle import app_state
from zk_recipes_celery._zk_schedule import ZkStoreScheduler

__all__ = [
    "LeaderGate",
    "LeaderScheduler",
    "ZkScheduler",
    "is_leader_only",
    "leader_gated",
    "leader_only",
]

F = TypeVar("F")


def leader_only(fn: F) -> F:
    """Send this periodic task only from the leader beat; stack it under ``@app.task``:

        @app.task
        @leader_only
        def nightly_report(): ...

    Calls made outside beat (``.delay()`` from a web process or a shell) are
    not gated: the gate is about beat's schedule.
    """
    install_once()
    setattr(fn, LEADER_ONLY_MARK, True)
    return fn


# -- LeaderScheduler: gate every entry -------------------------------------------
class LeaderGate:
    """Mixin in front of a Scheduler class: only the leader sends; standbys keep in step."""

    _zk_gates_every_entry = True
    #: Whether the gate records the leader's sends and a new leader starts from them
    #: (ZkScheduler records its runs itself).
    _zk_records_sends = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        install_once()  # `-S ...LeaderScheduler` may be all of zk-recipes this beat imports
        #: The term this beat last took over in (BeatElection.terms).
        self._zk_term: int | None = None
        super().__init__(*args, **kwargs)
        self._zk_election = beat_election(self.app)  # type: ignore[attr-defined]
        self._zk_election.join()

    def tick(self, *args: Any, **kwargs: Any) -> Any:
        if not self._zk_records_sends:
            return super().tick(*args, **kwargs)  # type: ignore[misc]
        term = self._zk_election.leading_term()
        if term is not None and term != self._zk_term:
            self._zk_term = term
            take_over(self)
        interval = super().tick(*args, **kwargs)  # type: ignore[misc]
        if term is None and interval is not None:
            return min(interval, TAKEOVER_POLL)  # notice soon that this beat leads now
        return interval

    def is_due(self, entry: Any) -> Any:
        return decide(self, entry, self._zk_election, super().is_due(entry))  # type: ignore[misc]

    def apply_entry(self, entry: Any, producer: Any = None) -> Any:
        election = self._zk_election
        role = decided_role(self, entry)
        if role is None:  # applied without is_due (not by tick): decide now
            role = election.role()
        if role is BeatRole.STANDBY:
            drop(self, entry, election, "standby (schedule kept in step)")
            return None
        if role is not BeatRole.LEADER:
            drop(self, entry, election, "this beat does not know whether it leads")
            return None
        if self._zk_records_sends:
            record_send(self, entry)
        return super().apply_entry(entry, producer)  # type: ignore[misc]

    @property
    def info(self) -> str:
        inner = super().info  # type: ignore[misc]
        return f"{inner}\n    . zk-recipes election -> {self._zk_election.identifier}".lstrip()


_gated_classes: dict[type, type] = {}


def leader_gated(scheduler_cls: type) -> type:
    """A subclass of ``scheduler_cls`` that sends only from the leader beat (cached)."""
    install_once()
    gated = _gated_classes.get(scheduler_cls)
    if gated is None:
        gated = type(
            f"LeaderGated{scheduler_cls.__name__}",
            (LeaderGate, scheduler_cls),
            {"__module__": __name__, "__doc__": f"{scheduler_cls.__name__}, leader-gated."},
        )
        _gated_classes[scheduler_cls] = gated
    return gated


class LeaderScheduler(LeaderGate, beat.PersistentScheduler):  # type: ignore[misc]
    """``celery beat -S zk_recipes_celery.beat:LeaderScheduler``.

    Wraps PersistentScheduler, or the class named by ``zk_recipes_beat_scheduler``
    (e.g. ``django_celery_beat.schedulers:DatabaseScheduler``).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        app = kwargs.get("app")
        inner = symbol_by_name(app_state(app).config.beat_scheduler)
        if cls is LeaderScheduler and inner is not beat.PersistentScheduler:
            instance = leader_gated(inner)(*args, **kwargs)
            return instance
        return super().__new__(cls)


class ZkScheduler(LeaderGate, ZkStoreScheduler):
    """``celery beat -S zk_recipes_celery.beat:ZkScheduler``: the schedule held in ZooKeeper.

    Every beat reads the same entries (``beat_schedule(app)`` and ``zk-recipes
    beat`` change them at runtime); the leader alone sends, each tick at most
    once (see ``_zk_schedule``).
    """

    _zk_records_sends = False  # its runs are recorded, and read at a takeover, by the store
