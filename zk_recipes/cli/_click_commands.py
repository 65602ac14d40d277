"""The click commands every command line shares: lock, leader, holders, status (and discovery's).

Built once, by ``add_click_commands(group, config_of, ...)``, and added to the
``zk-recipes`` group (settings from the environment and ``--hosts`` /
``--namespace``) and to Flask's ``flask zk`` (the current app's settings). A
face gives only where the settings come from: ``config_of(ctx)`` returns a
``RecipesConfig``, or raises ``ConfigurationError`` (exit ``CONFIG`` with its
message). The rest is the same everywhere: each command makes a client of its
own from ``config.client``, connects within the connection timeout (and
``lock``'s ``--timeout``; ``UNAVAILABLE`` otherwise), and closes it on the way
out, so its nodes go at once; the work is the engine's (``run_locked``, ``run_as_leader``,
``holders``, ``status``), and so are the exit codes.

The help texts name their facts, ``{LOST}``, ``{PREFIX}``, ``{PROG}``, and
take them from the one table (``ExitCode``) and the face's defaults, the
group's own help included (``{EXIT_CODES}`` there is the summary line).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from zk_recipes import DEFAULT_PREFIX
from zk_recipes.cli._arguments import check_path
from zk_recipes.cli._click_beat import add_beat_commands
from zk_recipes.cli._click_dedup import add_dedup_commands
from zk_recipes.cli._click_discovery import add_discovery_commands
from zk_recipes.cli._click_ensemble import add_ensemble_commands
from zk_recipes.cli._click_queue import add_queue_commands
from zk_recipes.cli._click_shared import (
    CONTEXT,
    ConfigOf,
    check_argument,
    connected,
    facts,
    json_option,
    run_options,
    settings,
    wait_options,
    with_options,
)
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._guarded import run_as_leader, run_locked
from zk_recipes.cli._reports import print_holders, print_status
from zk_recipes.frameworks import leader_path, lock_path


def add_click_commands(
    group: click.Group,
    config_of: ConfigOf,
    *,
    prog: str,
    default_prefix: str = DEFAULT_PREFIX,
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Add lock, leader, holders and status to ``group``; fill the facts into its help.

    ``prog`` is how the help's examples call the group (``zk-recipes``,
    ``flask zk``); ``decorate`` wraps each command's callback (Flask's
    ``with_appcontext``).
    """
    filled = facts(prog, default_prefix)

    def add(function: Callable[..., Any]) -> click.Command:
        function.__doc__ = (function.__doc__ or "").format(**filled)
        made = click.command(context_settings=CONTEXT)(function)
        if decorate is not None and made.callback is not None:
            made.callback = decorate(made.callback)
        group.add_command(made)
        return made

    @add
    @click.argument("name")
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    @with_options(wait_options + run_options)
    @click.pass_context
    def lock(
        ctx: click.Context,
        name: str,
        command: tuple[str, ...],
        no_wait: bool,
        timeout: float | None,
        grace: float | None,
        identifier: str | None,
    ) -> None:
        """Run COMMAND while holding the lock NAME.

        \b
        One process at a time, on any host, runs COMMAND; the others wait their
        turn (or give up, with --no-wait / --timeout). The lock is released as soon
        as COMMAND ends. COMMAND runs in a process group of its own: if the lock
        is lost while it runs (the session expired), the group gets SIGTERM, then
        SIGKILL, and the exit code is {LOST}; if this process dies, even by kill -9,
        the group is stopped too. SIGINT, SIGTERM and SIGHUP are passed on to the
        group. ZooKeeper unreachable: exit {UNAVAILABLE}, within --timeout. NAME is a
        name (a node under {PREFIX}/locks/, ZK_RECIPES_PREFIX moves it) or an
        absolute path.

        \b
        Examples:
          {PROG} lock db-migrate -- ./migrate.sh
          {PROG} lock --no-wait backup -- sh -c 'pg_dump app > /backup/app.sql'
          {PROG} lock --timeout 60 deploy -- ./deploy.sh
        """
        if no_wait and timeout is not None:
            raise click.UsageError("give either --no-wait or --timeout, not both")
        prefix = settings(config_of, ctx).prefix
        check_argument(lambda: lock_path(name, prefix))
        at_once = no_wait or timeout == 0
        with connected(config_of, ctx, timeout, at_once=at_once) as (client, config):
            code = run_locked(
                client,
                name,
                command,
                wait=not no_wait,
                timeout=timeout,
                grace=grace,
                prefix=config.prefix,
                identifier=identifier or config.identifier,
            )
        sys.exit(code)

    @add
    @click.argument("name")
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    @click.option(
        "--rejoin",
        is_flag=True,
        help=f"After losing leadership, stand by again instead of exiting with {ExitCode.LOST:d}.",
    )
    @with_options(run_options)
    @click.pass_context
    def leader(
        ctx: click.Context,
        name: str,
        command: tuple[str, ...],
        rejoin: bool,
        grace: float | None,
        identifier: str | None,
    ) -> None:
        """Stand by for leadership of NAME; run COMMAND only while leader (cold standby).

        \b
        Start it on several hosts: one runs COMMAND, the others wait. If the
        leader's process dies (even kill -9), its COMMAND is stopped with it and a
        standby takes over within the session timeout. If leadership is lost while
        COMMAND runs, COMMAND's process group gets SIGTERM, then SIGKILL, and the
        exit code is {LOST} (or, with --rejoin, this process stands by again).
        ZooKeeper unreachable for the connection timeout: exit {UNAVAILABLE}. NAME is
        a name (under {PREFIX}/leaders/) or an absolute path; Curator
        LeaderLatches on the same path take part.

        \b
        Examples:
          {PROG} leader beat -- celery -A proj beat
          {PROG} leader --rejoin consumer -- ./consume.py
        """
        prefix = settings(config_of, ctx).prefix
        check_argument(lambda: leader_path(name, prefix))
        with connected(config_of, ctx) as (client, config):
            code = run_as_leader(
                client,
                name,
                command,
                rejoin=rejoin,
                grace=grace,
                prefix=config.prefix,
                identifier=identifier or config.identifier,
            )
        sys.exit(code)

    add_discovery_commands(add, config_of)
    add_beat_commands(group, config_of, decorate)
    add_dedup_commands(group, config_of, decorate)
    add_queue_commands(group, config_of, decorate)

    @add
    @click.argument("path", default="/")
    @json_option
    @click.pass_context
    def holders(ctx: click.Context, path: str, as_json: bool) -> None:
        """Show every lock, lease and election under PATH: holders, then the queue in order.

        \b
        Reads our nodes (host, pid, id, since) and Curator's (data shown as it is).
        Examples:
          {PROG} holders
          {PROG} holders {PREFIX}/locks --json | jq '.[].holders[].pid'
        """
        check_argument(lambda: check_path(path, example=settings(config_of, ctx).prefix))
        with connected(config_of, ctx, at_once=True) as (client, _config):
            code = print_holders(client, path, as_json=as_json)
        sys.exit(code)

    add_ensemble_commands(group, config_of, filled, decorate)

    @add
    @json_option
    @click.pass_context
    def status(ctx: click.Context, as_json: bool) -> None:
        """Connect, and show the connection, session and server (version and mode).

        The server's version and mode come from its ``srvr`` four-letter word
        where its 4lw.commands.whitelist allows it. Exit 0 when connected, {UNAVAILABLE} when
        ZooKeeper cannot be reached.
        """
        with connected(config_of, ctx, at_once=True) as (client, _config):
            code = print_status(client, as_json=as_json)
        sys.exit(code)

    if group.help:
        group.help = group.help.format(**filled)
