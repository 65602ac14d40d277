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
checked before anything is written, as Celery's scheduler will parse them
(``_beat_checks``: crontab fields and their ranges, intervals, a solar
schedule's ``ephem``): a clear error, nothing stored. An entry that does not
parse when read (written by hand, by an older version, by another tool) is
an ``InvalidEntry``: ``read()`` returns it with the reason, and every reader
skips it, never fatal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from zk_recipes import BadVersionError, NodeExistsError, NoNodeError, ZkClient, ZnodeStat
from zk_recipes.frameworks._beat_checks import (
    CRONTAB_FIELDS as CRONTAB_FIELDS,
    SOLAR_EVENTS as SOLAR_EVENTS,
    ScheduleError as ScheduleError,
    check_dependencies as check_dependencies,
    check_schedule as check_schedule,
)

log = logging.getLogger("zk_recipes.beat")

#: The segment under a face's prefix where beat schedules live.
SCHEDULE_SEGMENT = "schedule"
ENTRIES = "entries"
RUNS = "runs"


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
        try:
            object.__setattr__(self, "schedule", check_schedule(self.schedule))
        except ScheduleError as exc:
            raise ScheduleError(f"entry {self.name}: {exc}") from None
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
        except ValueError as exc:  # UnicodeDecodeError included
            raise ScheduleError(f"entry {name}: not JSON ({exc})") from None
        if not isinstance(document, dict):
            raise ScheduleError(f"entry {name}: not a JSON object")
        missing = [key for key in ("task", "schedule") if key not in document]
        if missing:
            raise ScheduleError(f"entry {name}: no {' and no '.join(map(repr, missing))}")
        try:
            return cls(
                name=name,
                task=document["task"],
                schedule=document["schedule"],
                args=document.get("args", ()),
                kwargs=document.get("kwargs", {}),
                options=document.get("options", {}),
                enabled=bool(document.get("enabled", True)),
            )
        except ScheduleError as exc:
            said = str(exc)
            raise ScheduleError(
                said if said.startswith("entry ") else f"entry {name}: {said}"
            ) from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise ScheduleError(f"entry {name}: does not parse ({exc!r})") from None

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


@dataclasses.dataclass(frozen=True)
class InvalidEntry:
    """An entry node its readers skip (written by hand, by an older version, by another tool)."""

    name: str
    #: The node's path (relative to the client's namespace).
    path: str
    #: What is wrong with it, as ``BeatEntry.from_bytes`` says.
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "invalid": self.reason}


def parse_entry(name: str, data: bytes, path: str) -> BeatEntry | InvalidEntry:
    """The entry stored at ``path``, or why it is invalid: never raises for bad data."""
    try:
        return BeatEntry.from_bytes(name, data)
    except ScheduleError as exc:
        return InvalidEntry(name, path, str(exc))


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
        """Every valid entry, by name (an invalid one is logged and left out; see ``read``)."""
        entries, invalid = self.read()
        for bad in invalid:
            log.warning("beat entry %s is invalid, skipped: %s", bad.path, bad.reason)
        return entries

    def read(self) -> tuple[list[BeatEntry], list[InvalidEntry]]:
        """Every entry, by name: those that parse, and those that do not, with the reason."""
        try:
            names = sorted(self.client.get_children(self.entries_path))
        except NoNodeError:
            return [], []
        pending = [(name, self.client.get_async(f"{self.entries_path}/{name}")) for name in names]
        timeout = self.client.settings.connection_timeout
        entries: list[BeatEntry] = []
        invalid: list[InvalidEntry] = []
        for name, request in pending:
            try:
                data, _stat = request.result(timeout)
            except NoNodeError:
                continue  # removed meanwhile
            found = parse_entry(name, data, f"{self.entries_path}/{name}")
            if isinstance(found, InvalidEntry):
                invalid.append(found)
            else:
                entries.append(found)
        return entries, invalid

    def get(self, name: str) -> BeatEntry | None:
        """The entry ``name``; None when there is none, or it is invalid (logged)."""
        path = f"{self.entries_path}/{name}"
        try:
            data, _stat = self.client.get(path)
        except NoNodeError:
            return None
        found = parse_entry(name, data, path)
        if isinstance(found, InvalidEntry):
            log.warning("beat entry %s is invalid, skipped: %s", path, found.reason)
            return None
        return found

    def put(self, entry: BeatEntry) -> bool:
        """Store ``entry`` (made, or changed in place); True when it was new.

        ScheduleError, writing nothing, for a schedule this process could not
        run either (a solar one without ``ephem``: ``check_dependencies``).
        """
        check_dependencies(entry.schedule)
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
