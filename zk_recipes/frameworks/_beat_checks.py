"""A beat schedule's checks: a stored schedule is refused unless Celery's scheduler can run it.

Every writer of the schedule held in ZooKeeper (``zk-recipes beat add``,
``zk_recipes_celery.beat_schedule(app)``, the import of ``beat_schedule``)
checks here, and every reader (the beats, ``beat list``, the status pages)
checks the same way, so an entry Celery would refuse is refused when it is
written, with the reason, and one written by hand, by an older version or by
another tool is skipped by its reader, never fatal.

The crontab fields are parsed as Celery's ``celery.schedules.crontab_parser``
parses them, without importing Celery (the command line needs none): the
same grammar (``*``, numbers, names, ``a-b`` ranges that wrap around,
``*/n`` and ``a-b/n`` steps, ``,`` lists), the same leniencies (a month or
weekday name in any field, its first three letters counting), the same
refusals (a value outside the field's range, a zero step, a negative number,
a day of the month that no month of the entry has).
tests/cli/test_beat_commands.py checks the two parsers agree on a corpus.

A solar schedule needs the ``ephem`` package where the beats run (Celery's
``solar`` extra): ``check_dependencies`` refuses one at write time when it
is missing from the writing process, and a beat without it skips the entry.
"""

from __future__ import annotations

import datetime
import importlib.util
import math
import re
from collections.abc import Mapping
from typing import Any

from zk_recipes import ConfigurationError

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
#: The stored crontab's fields, and each one's (count, first value) as Celery expands it.
CRONTAB_RANGES = {
    "minute": (60, 0),
    "hour": (24, 0),
    "day_of_week": (7, 0),
    "day_of_month": (31, 1),
    "month_of_year": (12, 1),
}
CRONTAB_FIELDS = tuple(CRONTAB_RANGES)
#: The longest interval: Celery adds it to a date, which must stay before the year 10000.
MAX_EVERY = 100 * 365.25 * 86400.0
#: The package a solar schedule needs, and how to install it.
SOLAR_PACKAGE = "ephem"
SOLAR_FIX = "pip install 'celery[solar]' (or pip install ephem)"

_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,\-]+$")
# Celery's crontab_parser patterns, tried in this order, anchored at the start only.
_RANGE_STEPS = re.compile(r"(\w+?)-(\w+)/(\w+)?")
_RANGE = re.compile(r"(\w+?)-(\w+)")
_STAR_STEPS = re.compile(r"\*/(\w+)?")
_STAR = re.compile(r"^\*$")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: Days in each month, February's longest (celery.schedules.CRON_DAYS_IN_MONTH).
_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


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
        return {"every": _every(value)}
    if kind == "crontab":
        return {"crontab": _crontab(value)}
    if kind == "solar":
        return {"solar": _solar(value)}
    raise ScheduleError(f"unknown schedule kind {kind!r}: every, crontab or solar")


def check_dependencies(schedule: Mapping[str, Any]) -> None:
    """Refuse a checked schedule that this process could not run (a solar one without ephem)."""
    if "solar" in schedule and importlib.util.find_spec(SOLAR_PACKAGE) is None:
        raise ScheduleError(
            f"a solar schedule needs the {SOLAR_PACKAGE} package, which is not installed here; "
            f"install it where this runs and where the beats run: {SOLAR_FIX}"
        )


def _every(value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= MAX_EVERY
        or not datetime.timedelta(seconds=value)
    ):
        raise ScheduleError(
            f"every must be seconds > 0 and at most {MAX_EVERY:.0f} (100 years), got {value!r}"
        )
    return float(value)


def _crontab(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or set(value) - set(CRONTAB_FIELDS):
        raise ScheduleError(f"a crontab has the fields {CRONTAB_FIELDS}, got {value!r}")
    fields = {name: str(value.get(name, "*")) for name in CRONTAB_FIELDS}
    expanded = {name: parse_cron_field(name, field) for name, field in fields.items()}
    days, months = expanded["day_of_month"], expanded["month_of_year"]
    if not any(day <= _DAYS_IN_MONTH[month - 1] for month in months for day in days):
        raise ScheduleError(
            f"crontab day_of_month {fields['day_of_month']!r} never occurs in "
            f"month_of_year {fields['month_of_year']!r}"
        )
    return fields


def parse_cron_field(name: str, field: str) -> set[int]:
    """The values of crontab field ``name`` (``minute``, ...), as Celery expands ``field``."""
    count, first = CRONTAB_RANGES[name]
    last = first + count - 1
    if not _CRON_FIELD.match(field):
        raise ScheduleError(f"crontab {name} {field!r} is not a cron field")
    try:
        found: set[int] = set()
        for part in field.split(","):
            if not part:
                raise ValueError("an empty part between commas")
            found.update(_part(part, first, last))
        return found
    except ValueError as exc:
        raise ScheduleError(
            f"crontab {name} {field!r}: {exc} ({name} takes {first}-{last}, month or weekday "
            "names, ranges a-b, steps */n and a-b/n, and lists of them)"
        ) from None


def _part(part: str, first: int, last: int) -> list[int]:
    match = _RANGE_STEPS.match(part)
    if match:
        start, end, step = match.groups()
        if not step:
            raise ValueError("a step after '/' is missing")
        return _range(start, end, first, last)[:: _step(step)]
    match = _RANGE.match(part)
    if match:
        return _range(match.group(1), match.group(2), first, last)
    match = _STAR_STEPS.match(part)
    if match:
        if not match.group(1):
            raise ValueError("a step after '/' is missing")
        return list(range(first, last + 1))[:: _step(match.group(1))]
    if _STAR.match(part):
        return list(range(first, last + 1))
    return [_number(part, first, last)]


def _step(text: str) -> int:
    try:
        step = int(text)
    except ValueError:
        raise ValueError(f"the step {text!r} is not a number") from None
    if step == 0:
        raise ValueError("a step of 0")
    return step


def _range(start: str, end: str, first: int, last: int) -> list[int]:
    low, high = _number(start, first, last), _number(end, first, last)
    if high < low:  # wraps around, as Celery's does: 22-2 is 22, 23, 0, 1, 2
        return list(range(low, last + 1)) + list(range(first, high + 1))
    return list(range(low, high + 1))


def _number(text: str, first: int, last: int) -> int:
    if text.startswith("-"):
        raise ValueError("negative numbers are not supported")
    try:
        value = int(text)
    except ValueError:
        abbreviation = text[:3].lower()
        if abbreviation in _MONTHS:
            value = _MONTHS.index(abbreviation) + 1
        elif abbreviation in _WEEKDAYS:
            value = _WEEKDAYS.index(abbreviation)
        else:
            raise ValueError(f"{text!r} is neither a number nor a month or weekday name") from None
    if value > last:
        raise ValueError(f"{value} is above {last}")
    if value < first:
        raise ValueError(f"{value} is below {first}")
    return value


def _solar(value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or value.get("event") not in SOLAR_EVENTS:
        raise ScheduleError(f"a solar schedule's event is one of {SOLAR_EVENTS}, got {value!r}")
    lat, lon = value.get("lat"), value.get("lon")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lat, lon)):
        raise ScheduleError(f"a solar schedule needs numbers lat and lon, got {value!r}")
    assert isinstance(lat, (int, float))
    assert isinstance(lon, (int, float))
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ScheduleError(f"lat must be within -90..90 and lon -180..180, got {value!r}")
    return {"event": value["event"], "lat": float(lat), "lon": float(lon)}
