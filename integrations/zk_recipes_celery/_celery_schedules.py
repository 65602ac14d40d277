"""A schedule held in ZooKeeper, as Celery sees it: its schedule objects, and its runtime writer.

``to_celery`` / ``from_celery`` turn the stored JSON (the framework kit's
``check_schedule``) into Celery's ``schedule``/``crontab``/``solar`` and back;
``celery_check`` builds Celery's object to refuse what Celery would refuse.
``beat_schedule(app)`` (``CeleryBeatSchedule``) adds, changes, disables and
removes entries at runtime; ``import_entry`` writes ``app.conf.beat_schedule``'s
at a beat's start. ``ZkScheduler`` (_zk_schedule) reads them.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from typing import Any

from celery import schedules

from zk_recipes.frameworks import (
    BeatEntry,
    BeatSchedule,
    ScheduleError,
    check_dependencies,
    check_schedule,
)
from zk_recipes_celery._lifecycle import app_state


def to_celery(schedule: Mapping[str, Any], app: Any) -> Any:
    """A stored schedule (``check_schedule``'s JSON) as Celery's schedule object."""
    kind, value = next(iter(schedule.items()))
    if kind == "every":
        return schedules.schedule(datetime.timedelta(seconds=value), app=app)
    if kind == "crontab":
        return schedules.crontab(app=app, **value)
    return schedules.solar(value["event"], value["lat"], value["lon"], app=app)


def celery_check(schedule: Mapping[str, Any], app: Any = None) -> Any:
    """Celery's schedule object for a stored schedule; ScheduleError with Celery's reason."""
    try:
        return to_celery(schedule, app)
    except Exception as exc:  # Celery's ValueError, ParseException, ImproperlyConfigured, ...
        raise ScheduleError(f"Celery refuses the schedule {dict(schedule)}: {exc}") from None


def _cron_field(value: Any) -> str:
    """A crontab field as given to Celery (a str, an int, or an iterable of ints) as a str."""
    if isinstance(value, (str, int)):
        return str(value)
    return ",".join(str(v) for v in sorted(value))


def from_celery(schedule: Any) -> dict[str, Any]:
    """A ``beat_schedule`` schedule (seconds, timedelta, schedule, crontab, solar) as JSON."""
    if isinstance(schedule, (int, float)) and not isinstance(schedule, bool):
        return check_schedule({"every": schedule})
    if isinstance(schedule, datetime.timedelta):
        return check_schedule({"every": schedule.total_seconds()})
    if isinstance(schedule, schedules.crontab):
        fields = {
            "minute": schedule._orig_minute,
            "hour": schedule._orig_hour,
            "day_of_week": schedule._orig_day_of_week,
            "day_of_month": schedule._orig_day_of_month,
            "month_of_year": schedule._orig_month_of_year,
        }
        return check_schedule({"crontab": {k: _cron_field(v) for k, v in fields.items()}})
    if isinstance(schedule, schedules.solar):
        return check_schedule(
            {"solar": {"event": schedule.event, "lat": schedule.lat, "lon": schedule.lon}}
        )
    if isinstance(schedule, schedules.schedule):
        return check_schedule({"every": schedule.run_every.total_seconds()})
    raise ScheduleError(
        f"ZkScheduler stores interval, crontab and solar schedules, got {schedule!r}"
    )


def entry_from_conf(name: str, spec: Mapping[str, Any]) -> BeatEntry:
    """One ``app.conf.beat_schedule`` entry as a stored entry."""
    return BeatEntry(
        name=name,
        task=spec["task"],
        schedule=from_celery(spec["schedule"]),
        args=tuple(spec.get("args", ())),
        kwargs=dict(spec.get("kwargs", {})),
        options=dict(spec.get("options", {})),
    )


def import_entry(store: BeatSchedule, entry: BeatEntry) -> bool:
    """Write a ``beat_schedule`` entry unless the same definition is stored; True when written.

    The configuration wins for the definition of the entries it names; an
    entry disabled (or enabled) at runtime stays so across restarts.
    """
    stored = store.get(entry.name)
    if stored is not None:
        entry = dataclasses.replace(entry, enabled=stored.enabled)
        if stored == entry:
            return False
    store.put(entry)
    return True


class CeleryBeatSchedule(BeatSchedule):
    """The schedule ZkScheduler reads, changed at runtime: ``beat_schedule(app)``."""

    def add(
        self,
        name: str,
        task: str,
        schedule: Any,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        options: Mapping[str, Any] | None = None,
        enabled: bool = True,
    ) -> BeatEntry:
        """Add or change an entry; ``schedule``: seconds, a timedelta, a Celery
        ``schedule``/``crontab``/``solar``, or the stored JSON. Every beat sees it
        within its next tick (a second at most).

        ScheduleError, writing nothing, for a schedule the beats could not run:
        checked as the CLI checks it, then built with Celery's own classes."""
        stored = dict(schedule) if isinstance(schedule, Mapping) else from_celery(schedule)
        entry = BeatEntry(
            name, task, stored, tuple(args), dict(kwargs or {}), dict(options or {}), enabled
        )
        check_dependencies(entry.schedule)
        celery_check(entry.schedule)  # the beats build the same: they could not either
        self.put(entry)
        return entry

    def enable(self, name: str) -> BeatEntry:
        return self.set_enabled(name, True)

    def disable(self, name: str) -> BeatEntry:
        """Keep the entry (and its last run) but send it no more until enabled."""
        return self.set_enabled(name, False)


def beat_schedule(app: Any = None) -> CeleryBeatSchedule:
    """The ZooKeeper-held schedule of ``app`` (default: the current app) for its beat name."""
    state = app_state(app)
    config = state.config
    return CeleryBeatSchedule(state.process_client.get(), config.prefix, config.beat_name)
