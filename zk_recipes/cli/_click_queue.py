"""``queue dead list|requeue|purge``: a queue's dead letters, from a shell.

Added by ``add_click_commands`` to the ``zk-recipes`` group and ``flask zk``.
A dead letter is an item whose consumer failed ``max_attempts`` times, kept
under ``<path>-dead`` with its count and last error (docs/recipes/queues.md);
these commands read, put back and drop them, as ``DistributedQueue``'s
``dead_letters()``, ``requeue_dead()`` and ``purge_dead()`` do.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from zk_recipes import DistributedQueue
from zk_recipes.cli._arguments import check_path
from zk_recipes.cli._click_shared import (
    CONTEXT,
    BadArgument,
    ConfigOf,
    check_argument,
    connected,
    json_option,
)


def add_queue_commands(
    group: click.Group,
    config_of: ConfigOf,
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Add the ``queue`` group of commands to ``group``."""

    @group.group(context_settings=CONTEXT)
    def queue() -> None:
        """A queue's dead letters: items whose consumer failed max_attempts times.

        \b
        They wait under PATH-dead with their attempts and last error. Exit 69
        when ZooKeeper is unreachable, 2 for a bad argument, 1 when a named
        letter is not there.
        """

    @queue.group(context_settings=CONTEXT)
    def dead() -> None:
        """List, put back or drop the dead letters of the queue at PATH."""

    def command(function: Callable[..., Any]) -> click.Command:
        name = function.__name__.rstrip("_")  # list_: list
        made = dead.command(name, context_settings=CONTEXT)(function)
        if decorate is not None and made.callback is not None:
            made.callback = decorate(made.callback)
        return made

    @command
    @click.argument("path")
    @json_option
    @click.pass_context
    def list_(ctx: click.Context, path: str, as_json: bool) -> None:
        """The dead letters of the queue at PATH, oldest first, with their last error.

        \b
        Example:
          zk-recipes queue dead list /jobs
        """
        check_argument(lambda: check_path(path, example=""))
        with connected(config_of, ctx, at_once=True) as (client, _config):
            letters = DistributedQueue(client, path).dead_letters()
        if as_json:
            rows = [
                {
                    "name": letter.name,
                    "path": letter.path,
                    "attempts": letter.attempts,
                    "last_error": letter.last_error,
                    "items": [item.decode("utf-8", "replace") for item in letter.items],
                }
                for letter in letters
            ]
            click.echo(json.dumps(rows, indent=2))
            return
        if not letters:
            click.echo(f"no dead letters under {path}-dead")
            return
        for letter in letters:
            size = sum(len(item) for item in letter.items)
            click.echo(
                f"{letter.name}  {letter.attempts} attempts  {len(letter.items)} item(s), "
                f"{size} bytes  last error: {letter.last_error}"
            )

    def on_letters(action: str, summary: str, apply: Callable[..., int]) -> None:
        """Add the command ``action`` PATH [NAME...] | --all; exit 1 when a name is not there."""

        def run(ctx: click.Context, path: str, names: tuple[str, ...], every: bool) -> None:
            check_argument(lambda: check_path(path, example=""))
            if bool(names) == every:
                raise BadArgument(f"give the dead letters to {action} by NAME, or --all")
            with connected(config_of, ctx) as (client, _config):
                found = DistributedQueue(client, path)
                known = {letter.name for letter in found.dead_letters()}
                missing = sorted(set(names) - known)
                done = apply(found, None if every else list(names))
            click.echo(f"{action}d {done} dead letter(s) of {path}")
            if missing:
                click.echo(f"no dead letter {', '.join(missing)} under {path}-dead", err=True)
                sys.exit(1)

        run.__name__ = action
        run.__doc__ = summary
        options = click.option("--all", "every", is_flag=True, help=f"{action.title()} them all.")
        names = click.argument("names", nargs=-1, metavar="[NAME]...")
        command(click.pass_context(click.argument("path")(names(options(run)))))

    on_letters(
        "requeue",
        "Put dead letters of PATH back into the queue (attempts counted from 0 again).",
        DistributedQueue.requeue_dead,
    )
    on_letters("purge", "Delete dead letters of PATH for good.", DistributedQueue.purge_dead)
