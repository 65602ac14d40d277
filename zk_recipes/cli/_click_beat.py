"""``beat add|list|remove|enable|disable``: the schedule Celery's ZkScheduler reads, at runtime.

Added by ``add_click_commands`` to the ``zk-recipes`` group and ``flask zk``.
The layout and JSON are the framework kit's (``BeatSchedule``), so no
Celery is needed here: the beats see a change within their next tick.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from zk_recipes import NoNodeError, ZkClient
from zk_recipes.cli._click_shared import CONTEXT, BadArgument, ConfigOf, connected, json_option
from zk_recipes.frameworks import (
    BeatEntry,
    BeatSchedule,
    ScheduleError,
    check_dependencies,
    check_schedule,
    crontab_schedule,
    schedule_path,
)

#: Where the Celery integration keeps its nodes unless ``zk_recipes_prefix`` moves them.
CELERY_PREFIX = "/celery"


def _where(function: Callable[..., Any]) -> Callable[..., Any]:
    function = click.option(
        "--beat",
        "beat_name",
        required=True,
        help="The beat name: the Celery app's name, unless zk_recipes_beat_name sets another.",
    )(function)
    return click.option(
        "--prefix",
        default=CELERY_PREFIX,
        show_default=True,
        help="The Celery integration's zk_recipes_prefix.",
    )(function)


def _json(value: str | None, option: str, kind: type) -> Any:
    if value is None:
        return kind()
    try:
        found = json.loads(value)
    except ValueError as exc:
        raise BadArgument(f"{option}: not JSON ({exc})") from None
    if not isinstance(found, kind):
        raise BadArgument(f"{option}: a JSON {'list' if kind is list else 'object'}, got {value}")
    return found


def _schedule(every: float | None, crontab: str | None, solar: str | None) -> dict[str, Any]:
    given = [x for x in (every, crontab, solar) if x is not None]
    if len(given) != 1:
        raise BadArgument("give one of --every SECONDS, --crontab 'M H DOM MON DOW', --solar")
    try:
        if every is not None:
            return check_schedule({"every": every})
        if crontab is not None:
            return crontab_schedule(crontab)
        assert solar is not None
        event, _, place = solar.partition(":")
        lat, _, lon = place.partition(":")
        try:
            where = {"lat": float(lat), "lon": float(lon)}
        except ValueError:
            raise BadArgument(
                f"--solar {solar!r}: give EVENT:LAT:LON, like sunset:48.85:2.35"
            ) from None
        schedule = check_schedule({"solar": {"event": event, **where}})
        check_dependencies(schedule)
        return schedule
    except ScheduleError as exc:
        raise BadArgument(str(exc)) from None


def _describe(schedule: dict[str, Any]) -> str:
    kind, value = next(iter(schedule.items()))
    if kind == "every":
        return f"every {value:g}s"
    if kind == "crontab":
        fields = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
        return "crontab " + " ".join(value[f] for f in fields)
    return f"solar {value['event']} {value['lat']:g},{value['lon']:g}"


def _elsewhere(client: ZkClient, prefix: str, beat_name: str) -> list[str]:
    """Why a list may be empty: the schedules of other beat names, or of other prefixes."""
    hints = []
    schedules = schedule_path(prefix, beat_name).rsplit("/", 1)[0]
    try:
        others = sorted(client.get_children(schedules))
    except NoNodeError:
        others = []
    if others:
        hints.append(f"beats with a schedule under {prefix}: {', '.join(others)} (--beat NAME)")
    try:
        tops = [name for name in client.get_children("/") if name != "zookeeper"]
    except NoNodeError:  # pragma: no cover - the root is always there
        tops = []
    pending = [
        (f"/{top}", client.exists_async(schedule_path(f"/{top}", beat_name)))
        for top in sorted(tops)
        if f"/{top}" != prefix.rstrip("/")
    ]
    timeout = client.settings.connection_timeout
    found = [where for where, request in pending if request.result(timeout) is not None]
    if found:
        hints.append(
            f"beat {beat_name} has a schedule under {', '.join(found)}: "
            f"give --prefix {found[0]} (the zk_recipes_prefix its entries were written with)"
        )
    if not hints:
        hints.append(
            f"entries written with another zk_recipes_prefix are listed with --prefix PREFIX "
            f"(default {CELERY_PREFIX})"
        )
    return hints


def add_beat_commands(
    group: click.Group,
    config_of: ConfigOf,
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Add the ``beat`` group of commands to ``group``."""

    @group.group(context_settings=CONTEXT)
    def beat() -> None:
        """Change the beat schedule Celery's ZkScheduler reads, while the beats run.

        \b
        Every beat started with -S zk_recipes_celery.beat:ZkScheduler reads the
        entries under PREFIX/schedule/BEAT and sees a change within a second;
        the leader beat sends. Entries are checked as Celery's scheduler parses
        them before anything is written; one that is not (written by hand, or by
        an older version) is listed as INVALID and skipped by every beat. Exit 69
        when ZooKeeper is unreachable, 2 for a bad argument, 1 when there is no
        such entry.
        """

    def command(function: Callable[..., Any]) -> click.Command:
        name = function.__name__.rstrip("_")  # list_: list
        made = beat.command(name, context_settings=CONTEXT)(function)
        if decorate is not None and made.callback is not None:
            made.callback = decorate(made.callback)
        return made

    @command
    @click.argument("name")
    @click.argument("task")
    @click.option("--every", type=float, metavar="SECONDS", help="An interval schedule.")
    @click.option("--crontab", metavar="'M H DOM MON DOW'", help="A crontab, in cron's order.")
    @click.option("--solar", metavar="EVENT:LAT:LON", help="e.g. sunset:48.85:2.35")
    @click.option("--args", "args_json", metavar="JSON", help="The task's arguments, a list.")
    @click.option("--kwargs", "kwargs_json", metavar="JSON", help="Its keyword arguments.")
    @click.option("--options", "options_json", metavar="JSON", help="apply_async options.")
    @click.option("--disabled", is_flag=True, help="Store it, but do not send it yet.")
    @_where
    @click.pass_context
    def add(
        ctx: click.Context,
        name: str,
        task: str,
        every: float | None,
        crontab: str | None,
        solar: str | None,
        args_json: str | None,
        kwargs_json: str | None,
        options_json: str | None,
        disabled: bool,
        beat_name: str,
        prefix: str,
    ) -> None:
        """Add the entry NAME running TASK, or change it (its last run is kept).

        \b
        Examples:
          zk-recipes beat add --beat proj report proj.report --every 300
          zk-recipes beat add --beat proj nightly proj.cleanup --crontab '0 3 * * *'
        """
        try:
            entry = BeatEntry(
                name,
                task,
                _schedule(every, crontab, solar),
                tuple(_json(args_json, "--args", list)),
                _json(kwargs_json, "--kwargs", dict),
                _json(options_json, "--options", dict),
                enabled=not disabled,
            )
        except ScheduleError as exc:
            raise BadArgument(str(exc)) from None
        with connected(config_of, ctx) as (client, _config):
            made = BeatSchedule(client, prefix, beat_name).put(entry)
        click.echo(f"{'added' if made else 'changed'} {name}: {task}, {_describe(entry.schedule)}")

    @command
    @json_option
    @_where
    @click.pass_context
    def list_(ctx: click.Context, as_json: bool, beat_name: str, prefix: str) -> None:
        """List the entries, with when the leader last sent each."""
        with connected(config_of, ctx, at_once=True) as (client, _config):
            schedule = BeatSchedule(client, prefix, beat_name)
            entries, invalid = schedule.read()
            runs = schedule.last_runs()
            hints = [] if entries or invalid else _elsewhere(client, prefix, beat_name)
        if as_json:
            rows: list[dict[str, Any]] = []
            for entry in entries:
                run = runs.get(entry.name)
                rows.append(
                    {
                        **entry.as_dict(),
                        "last_run_at": run[0].last_run_at if run else None,
                        "total_run_count": run[0].total_run_count if run else 0,
                        "invalid": None,
                    }
                )
            rows.extend(bad.as_dict() for bad in invalid)
            click.echo(json.dumps(sorted(rows, key=lambda row: row["name"]), indent=2))
            for hint in hints:
                click.echo(hint, err=True)
            return
        if not entries and not invalid:
            click.echo(f"no entries under {schedule.entries_path}")
            for hint in hints:
                click.echo(hint)
            return
        for bad in invalid:
            click.echo(f"{bad.name}  INVALID (skipped by every beat): {bad.reason}  [{bad.path}]")
        for entry in entries:
            run = runs.get(entry.name)
            last = "never"
            if run is not None:
                at = datetime.datetime.fromtimestamp(run[0].last_run_at, datetime.timezone.utc)
                last = f"{at:%Y-%m-%d %H:%M:%S}Z ({run[0].total_run_count} runs)"
            state = "" if entry.enabled else "  [disabled]"
            click.echo(
                f"{entry.name}  {entry.task}  {_describe(entry.schedule)}  last: {last}{state}"
            )

    def on_entry(action: str, summary: str, change: Callable[[BeatSchedule, str], object]) -> None:
        """Add the command ``action`` NAME, which applies ``change``; exit 1 without that entry."""

        def run(ctx: click.Context, name: str, beat_name: str, prefix: str) -> None:
            with connected(config_of, ctx) as (client, _config):
                try:
                    found = change(BeatSchedule(client, prefix, beat_name), name)
                except NoNodeError:
                    found = False
            if not found:
                click.echo(f"no entry {name} in beat {beat_name}", err=True)
                sys.exit(1)
            click.echo(f"{action}d {name}")

        run.__name__ = action
        run.__doc__ = summary
        command(click.pass_context(_where(click.argument("name")(run))))

    on_entry("enable", "Send the entry NAME again.", lambda s, n: s.set_enabled(n, True))
    on_entry(
        "disable",
        "Keep the entry NAME (and its last run) but send it no more until enabled.",
        lambda s, n: s.set_enabled(n, False),
    )
    on_entry("remove", "Remove the entry NAME and its last run.", BeatSchedule.remove)
