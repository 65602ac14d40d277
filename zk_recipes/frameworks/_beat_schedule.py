"""A beat schedule held in ZooKeeper: its znodes and JSON, for Celery's ZkScheduler and the CLI.

Celery's ``ZkScheduler`` reads it into every beat; ``zk-recipes beat
add|list|remove|enable|disable`` and ``zk_recipes_celery.beat_schedule(app)``
change it at runtime. The format is plain JSON, so this module (and the
command line) needs no Celery::

    <prefix>/schedule/<beat name>/entries/<entry name>   PERSISTENT: the entry
    <prefix>/schedule/<beat name>/runs/<entry name>      PERSISTENT: its last run,
                                                          written by the leader beat only

An entry: ``{"task": "proj.report", "schedule": {...}, "args": [...],
"kwargs": {...}, "options": {...}, "enabled": true}``, where the schedule
is one of ``{"every": 30.0}`` (seconds), ``{"crontab": {"minute": "*/5",
"hour": "*", "day_of_week": "*", "day_of_month": "*", "month_of_year":
"*"}}`` or ``{"solar": {"event": "sunset", "lat": 48.85, "lon": 2.35}}``.
A run: ``{"last_run_at": <epoch seconds>, "total_run_count": <n>}``.

Entry names are node names: no ``/``, not ``.`` or ``..``. Values are
checked before anything is written (a clear error, nothing stored); an
entry that does not parse when read (written by hand) is skipped and
logged by its reader, never fatal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from zk_recipes import (
    BadVersionError,
    ConfigurationError,
    NodeExistsError,
    NoNodeError,
    ZkClient,
    ZnodeStat,
)

log = logging.getLogger("zk_recipes.beat")

#: The segment under a face's prefix where beat schedules live.
SCHEDULE_SEGMENT = "schedule"
ENTRIES = "entries"
RUNS = "runs"

#: Celery's solar events (celery.schedules.solar._all_events).
SOLAR_EVENTS = (
    "dawn_astronomical",
    "dawn_nautical",
    "dawn_civil",
    "sunrise",
    "solar_noon",
    "sunset",
    "dusk_civil",
    "dusk_nautical",
    "dusk_astronomical",
)
CRONTAB_FIELDS = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-]+$")


class ScheduleError(ConfigurationError):
    """A schedule entry that cannot be stored or read: what is wrong, and nothing was written."""


def check_schedule(schedule: object) -> dict[str, Any]:
    """``schedule`` checked, as stored: ``{"every": s}``, a crontab or a solar schedule."""
    if not isinstance(schedule, Mapping) or len(schedule) != 1:
        raise ScheduleError(
            'a schedule is one of {"every": seconds}, {"crontab": {...}} or {"solar": {...}}, '
            f"got {schedule!r}"
        )
    kind, value = next(iter(schedule.items()))
    if kind == "every":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ScheduleError(f"every must be seconds > 0, got {value!r}")
        return {"every": float(value)}
    if kind == "crontab":
        if not isinstance(value, Mapping) or set(value) - set(CRONTAB_FIELDS):
            raise ScheduleError(f"a crontab has the fields {CRONTAB_FIELDS}, got {value!r}")
        fields = {name: str(value.get(name, "*")) for name in CRONTAB_FIELDS}
        for name, field in fields.items():
            if not _CRON_FIELD.match(field):
                raise ScheduleError(f"crontab {name} {field!r} is not a cron field")
        return {"crontab": fields}
    if kind == "solar":
        if not isinstance(value, Mapping) or value.get("event") not in SOLAR_EVENTS:
            raise ScheduleError(f"a solar schedule's event is one of {SOLAR_EVENTS}, got {value!r}")
        lat, lon = value.get("lat"), value.get("lon")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lat, lon)):
            raise ScheduleError(f"a solar schedule needs numbers lat and lon, got {value!r}")
        assert isinstance(lat, (int, float))
        assert isinstance(lon, (int, float))
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            raise ScheduleError(f"lat must be within -90..90 and lon -180..180, got {value!r}")
        return {"solar": {"event": value["event"], "lat": float(lat), "lon": float(lon)}}
    raise ScheduleError(f"unknown schedule kind {kind!r}: every, crontab or solar")


def crontab_schedule(expression: str) -> dict[str, Any]:
    """``"*/5 * * * *"`` (minute hour day-of-month month day-of-week, cron's order) as stored."""
    parts = expression.split()
    if len(parts) != 5:
        raise ScheduleError(
            f"a crontab has 5 fields (minute hour day-of-month month day-of-week), "
            f"got {expression!r}"
        )
    minute, hour, day_of_month, month_of_year, day_of_week = parts
    return check_schedule(
        {
            "crontab": {
                "minute": minute,
                "hour": hour,
                "day_of_week": day_of_week,
                "day_of_month": day_of_month,
                "month_of_year": month_of_year,
            }
        }
    )


@dataclasses.dataclass(frozen=True)
class BeatEntry:
    """One entry of a schedule held in ZooKeeper (see the module note for its JSON)."""

    name: str
    task: str
    schedule: dict[str, Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    enabled: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "/" in self.name:
            raise ScheduleError(f"an entry name is a non-empty str without '/', got {self.name!r}")
        if self.name in (".", "..") or self.name == "zookeeper":
            raise ScheduleError(f"{self.name!r} cannot be an entry name")
        if not isinstance(self.task, str) or not self.task:
            raise ScheduleError(f"entry {self.name}: task must be a task name, got {self.task!r}")
        object.__setattr__(self, "schedule", check_schedule(self.schedule))
        if not isinstance(self.args, (list, tuple)):
            raise ScheduleError(f"entry {self.name}: args must be a list, got {self.args!r}")
        object.__setattr__(self, "args", tuple(self.args))
        for what in ("kwargs", "options"):
            if not isinstance(getattr(self, what), Mapping):
                raise ScheduleError(f"entry {self.name}: {what} must be a JSON object")
        if not isinstance(self.enabled, bool):
            raise ScheduleError(f"entry {self.name}: enabled must be true or false")
        try:
            self.to_bytes()
        except (TypeError, ValueError) as exc:
            raise ScheduleError(f"entry {self.name}: not JSON-serialisable ({exc})") from exc

    def to_bytes(self) -> bytes:
        document = {
            "task": self.task,
            "schedule": self.schedule,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "options": dict(self.options),
            "enabled": self.enabled,
        }
        return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> BeatEntry:
        """Parse a stored entry; ScheduleError (saying what is wrong) when it does not parse."""
        try:
            document = json.loads(data)
            return cls(
                name=name,
                task=document["task"],
                schedule=document["schedule"],
                args=tuple(document.get("args", ())),
                kwargs=dict(document.get("kwargs", {})),
                options=dict(document.get("options", {})),
                enabled=bool(document.get("enabled", True)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ScheduleError(f"beat entry {name} does not parse: {exc!r}") from exc

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, **json.loads(self.to_bytes())}


@dataclasses.dataclass(frozen=True)
class LastRun:
    """When the leader last sent an entry, and how many times in all."""

    last_run_at: float
    total_run_count: int

    def to_bytes(self) -> bytes:
        return json.dumps(
            {"last_run_at": self.last_run_at, "total_run_count": self.total_run_count}
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LastRun | None:
        try:
            document = json.loads(data)
            return cls(float(document["last_run_at"]), int(document["total_run_count"]))
        except (ValueError, KeyError, TypeError):
            return None


def schedule_path(prefix: str, beat_name: str) -> str:
    """``<prefix>/schedule/<beat name>``: one schedule per beat election name."""
    return f"{prefix.rstrip('/')}/{SCHEDULE_SEGMENT}/{beat_name}"


class BeatSchedule:
    """The entries of one schedule in ZooKeeper: read, add or change, enable, disable, remove."""

    def __init__(self, client: ZkClient, prefix: str = "/celery", beat_name: str = "default"):
        self.client = client
        self.path = schedule_path(prefix, beat_name)
        self.entries_path = f"{self.path}/{ENTRIES}"
        self.runs_path = f"{self.path}/{RUNS}"

    def entries(self) -> list[BeatEntry]:
        """Every readable entry, by name (one that does not parse is logged and left out)."""
        try:
            names = sorted(self.client.get_children(self.entries_path))
        except NoNodeError:
            return []
        found = []
        for name in names:
            entry = self.get(name)
            if entry is not None:
                found.append(entry)
        return found

    def get(self, name: str) -> BeatEntry | None:
        try:
            data, _stat = self.client.get(f"{self.entries_path}/{name}")
        except NoNodeError:
            return None
        try:
            return BeatEntry.from_bytes(name, data)
        except ScheduleError as exc:
            log.warning("%s (at %s/%s): skipped", exc, self.entries_path, name)
            return None

    def put(self, entry: BeatEntry) -> bool:
        """Store ``entry`` (made, or changed in place); True when it was new."""
        path = f"{self.entries_path}/{entry.name}"
        data = entry.to_bytes()
        try:
            self.client.create(path, data, parents=True)
            return True
        except NodeExistsError:
            self.client.set(path, data)
            return False

    def put_if_changed(self, entry: BeatEntry) -> bool:
        """Store ``entry`` unless the same definition is there already; True when written."""
        try:
            data, _stat = self.client.get(f"{self.entries_path}/{entry.name}")
        except NoNodeError:
            data = b""
        if data == entry.to_bytes():
            return False
        self.put(entry)
        return True

    def set_enabled(self, name: str, enabled: bool) -> BeatEntry:
        """Enable or disable an entry (NoNodeError when there is none of that name)."""
        path = f"{self.entries_path}/{name}"
        for _attempt in range(5):
            data, stat = self.client.get(path)
            entry = dataclasses.replace(BeatEntry.from_bytes(name, data), enabled=enabled)
            try:
                self.client.set(path, entry.to_bytes(), version=stat.version)
                return entry
            except BadVersionError:
                continue  # changed meanwhile: apply to the new definition
        raise ScheduleError(f"beat entry {name} kept changing; try again")

    def remove(self, name: str) -> bool:
        """Remove an entry and its last run; False when there was none."""
        path = f"{self.entries_path}/{name}"
        if self.client.exists(path) is None:
            return False
        self.client.delete(path)  # first: a leader that claims meanwhile finds no entry
        self.client.delete(f"{self.runs_path}/{name}")  # a missing node is no error
        return True

    def last_runs(self) -> dict[str, tuple[LastRun, ZnodeStat]]:
        """Each entry's last run as the leader recorded it."""
        try:
            names = self.client.get_children(self.runs_path)
        except NoNodeError:
            return {}
        found = {}
        for name in names:
            with contextlib.suppress(NoNodeError):
                data, stat = self.client.get(f"{self.runs_path}/{name}")
                run = LastRun.from_bytes(data)
                if run is not None:
                    found[name] = (run, stat)
        return found


def entry_from_options(
    name: str,
    task: str,
    schedule: Mapping[str, Any],
    *,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    enabled: bool = True,
) -> BeatEntry:
    """A checked ``BeatEntry`` (ScheduleError naming what is wrong)."""
    return BeatEntry(
        name, task, dict(schedule), tuple(args), dict(kwargs or {}), dict(options or {}), enabled
    )
