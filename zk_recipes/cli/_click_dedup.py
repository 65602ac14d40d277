"""``dedup list|clear``: publish dedup's queued markers (Celery's ``unique_on_publish``).

Added by ``add_click_commands`` beside ``beat``, to the ``zk-recipes`` group
and ``flask zk``. The markers' layout is the framework kit's
(``read_markers``, ``clear_marker``), so no Celery is needed here. A marker
hands every publish of its key the task id it names; ``clear`` lets the
next publish queue a new task when that task will never run (its message
was lost, or its worker is gone before the run started).
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from zk_recipes.cli._click_beat import CELERY_PREFIX
from zk_recipes.cli._click_shared import CONTEXT, ConfigOf, connected, json_option
from zk_recipes.frameworks import QueuedMarker, clear_marker, queued_root, read_markers


def _prefix(function: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--prefix",
        default=CELERY_PREFIX,
        show_default=True,
        help="The Celery integration's zk_recipes_prefix.",
    )(function)


def _age(seconds: float) -> str:
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _row(marker: QueuedMarker, now: float) -> str:
    who = f"{marker.host}:{marker.pid}" if marker.host else "?"
    if marker.running:
        state = f"running ({who}, session {marker.session_id:#x})"
    else:
        state = f"queued (published by {who})"
    written = datetime.datetime.fromtimestamp(marker.written, datetime.timezone.utc)
    since = f"{written:%Y-%m-%d %H:%M:%S}Z ({_age(now - marker.written)} ago)"
    return f"{marker.task}  {marker.key[:12]}  {marker.task_id}  {state}  since {since}"


def add_dedup_commands(
    group: click.Group,
    config_of: ConfigOf,
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Add the ``dedup`` group of commands to ``group``."""

    @group.group(context_settings=CONTEXT)
    def dedup() -> None:
        """Publish dedup's queued markers (Celery's unique_on_publish): list or clear them.

        \b
        A marker at PREFIX/queued/TASK/KEY hands every publish of its key the
        task id it names while that task is queued or running. A running task's
        marker goes with its worker's session; a queued one expires after
        publish_expiry. Exit 69 when ZooKeeper is unreachable, 2 for a bad
        argument, 1 when no marker names a task id given to clear.
        """

    def command(function: Callable[..., Any]) -> click.Command:
        name = function.__name__.rstrip("_")  # list_: list
        made = dedup.command(name, context_settings=CONTEXT)(function)
        if decorate is not None and made.callback is not None:
            made.callback = decorate(made.callback)
        return made

    @command
    @click.option("--task", "task_name", metavar="NAME", help="Only the markers of this task.")
    @json_option
    @_prefix
    @click.pass_context
    def list_(ctx: click.Context, task_name: str | None, as_json: bool, prefix: str) -> None:
        """List the markers: task, key, the task id they hand back, queued or running, since."""
        root = queued_root(prefix)
        with connected(config_of, ctx, at_once=True) as (client, _config):
            markers = read_markers(client, root)
        markers = [m for m in markers if task_name is None or m.task == task_name]
        if as_json:
            click.echo(json.dumps([m.as_dict() for m in markers], indent=2))
            return
        if not markers:
            click.echo(f"no queued markers under {root} (another zk_recipes_prefix: --prefix)")
            return
        now = time.time()
        for marker in markers:
            click.echo(_row(marker, now))

    @command
    @click.argument("task_ids", metavar="TASK_ID...", nargs=-1, required=True)
    @_prefix
    @click.pass_context
    def clear(ctx: click.Context, task_ids: tuple[str, ...], prefix: str) -> None:
        """Clear the markers naming TASK_ID...: the next publish of their key queues a new task.

        \b
        The run lock still keeps two runs of one key apart if the task turns out
        to be alive. Example:
          zk-recipes dedup clear 0b6c4d1e-6f7a-4c9e-9d35-1f5cf2f0e0a1
        """
        root = queued_root(prefix)
        cleared: set[str] = set()
        with connected(config_of, ctx) as (client, _config):
            for marker in read_markers(client, root, task_ids=set(task_ids)):
                if clear_marker(client, marker.path, marker.task_id):
                    cleared.add(marker.task_id)
                    note = " (its task was running)" if marker.running else ""
                    click.echo(f"cleared {marker.path}: task {marker.task_id}{note}")
        missing = [task_id for task_id in task_ids if task_id not in cleared]
        for task_id in missing:
            click.echo(f"no queued marker under {root} names task {task_id}", err=True)
        if missing:
            sys.exit(1)
