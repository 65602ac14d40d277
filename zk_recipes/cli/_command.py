"""The ``zk-recipes`` command line, on click: options and help only; the work is in the engine.

Settings come from the environment (``ZK_RECIPES_HOSTS``, ``ZK_RECIPES_NAMESPACE``,
... see docs/settings.md), and ``--hosts`` / ``--namespace`` override them.
Every command that talks to ZooKeeper connects once, within the connection
timeout (``ExitCode.UNAVAILABLE`` otherwise), and closes its session on the
way out, so its nodes go at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import click

import zk_recipes
from zk_recipes import ConfigurationError, ConnectTimeoutError, RecipesConfig, ZkClient
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._guarded import DEFAULT_PREFIX, run_as_leader, run_locked
from zk_recipes.cli._reports import holders as print_holders, status as print_status

_F = TypeVar("_F", bound=Callable[..., Any])
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

_MAIN_HELP = """Coordinate processes through ZooKeeper: run a command under a lock or as
leader, see who holds what.

\b
Examples:
  export ZK_RECIPES_HOSTS=zk1:2181,zk2:2181,zk3:2181
  zk-recipes lock db-migrate -- ./manage.py migrate
  zk-recipes lock --no-wait nightly-report -- ./report.sh   # in cron, on every host
  zk-recipes leader beat -- celery -A proj beat
  zk-recipes holders --json
  zk-recipes server                                          # a throwaway local ZooKeeper

\b
Exit codes of lock and leader: the command's own status when it ran;
  {BUSY} busy (--no-wait), {TIMED_OUT} timed out, {LOST} lost while running (command stopped),
  {UNAVAILABLE} ZooKeeper unreachable, {CONFIG} bad settings, {USAGE} usage. See docs/cli.md.
"""
#: What the help texts say, filled in from the one table (``ExitCode``) and the defaults.
_FACTS = {code.name: int(code) for code in ExitCode} | {"PREFIX": DEFAULT_PREFIX}
_MAIN_HELP = _MAIN_HELP.format(**_FACTS)


def _facts_in_help(function: _F) -> _F:
    """Fill ``{LOST}``, ``{PREFIX}``... into a command's help (under ``@cli.command``)."""
    function.__doc__ = (function.__doc__ or "").format(**_FACTS)
    return function


class _Globals:
    def __init__(self, hosts: str | None, namespace: str | None) -> None:
        self.hosts = hosts
        self.namespace = namespace


def _fail(code: int, message: str) -> NoReturn:
    click.echo(f"zk-recipes: {message}", err=True)
    sys.exit(code)


def _read_config(ctx: click.Context) -> RecipesConfig:
    options: _Globals = ctx.find_object(_Globals) or _Globals(None, None)
    environ = dict(os.environ)
    given: dict[str, str] = {}  # environment variable -> the option that overrode it
    for variable, option, value in (
        ("ZK_RECIPES_HOSTS", "--hosts", options.hosts),
        ("ZK_RECIPES_NAMESPACE", "--namespace", options.namespace),
    ):
        if value is not None:
            environ[variable] = value
            given[variable] = option
    if not environ.get("ZK_RECIPES_HOSTS"):
        _fail(
            ExitCode.CONFIG,
            "no ZooKeeper to talk to: give --hosts zk1:2181,zk2:2181 or set ZK_RECIPES_HOSTS "
            "(zk-recipes server starts a local one for development)",
        )
    try:
        return zk_recipes.settings_from_env(environ)
    except ConfigurationError as exc:
        # The reader names the environment variable; the value came from the option.
        message = str(exc)
        for variable, option in given.items():
            message = message.replace(f"environment variable {variable}", option)
            message = message.replace(f"{variable}=", f"{option} ")
        _fail(ExitCode.CONFIG, message)


@contextlib.contextmanager
def _connected(ctx: click.Context) -> Iterator[tuple[ZkClient, RecipesConfig]]:
    config = _read_config(ctx)
    client = ZkClient(settings=config.client)
    try:
        try:
            client.start()
        except ConnectTimeoutError as exc:
            _fail(ExitCode.UNAVAILABLE, f"ZooKeeper is unreachable: {exc}")
        yield client, config
    finally:
        client.close()


@click.group(context_settings=_CONTEXT, help=_MAIN_HELP)
@click.option(
    "--hosts",
    metavar="HOST:PORT,...",
    help="The ensemble to talk to [env ZK_RECIPES_HOSTS].",
)
@click.option(
    "--namespace",
    metavar="NAME",
    help="Prefix of every path, like Curator's namespace [env ZK_RECIPES_NAMESPACE].",
)
@click.option("-v", "--verbose", count=True, help="Log more (-v: info, -vv: debug) to stderr.")
@click.version_option(zk_recipes.__version__, "--version", prog_name="zk-recipes")
@click.pass_context
def cli(ctx: click.Context, hosts: str | None, namespace: str | None, verbose: int) -> None:
    ctx.obj = _Globals(hosts, namespace)
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )


_wait_options: list[Callable[[Any], Any]] = [
    click.option(
        "--no-wait",
        is_flag=True,
        help=f"Give up at once if somebody else holds it (exit {ExitCode.BUSY:d}).",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help=f"Give up after waiting this long (exit {ExitCode.TIMED_OUT:d}). "
        "Default: wait as long as it takes.",
    ),
]
_run_options: list[Callable[[Any], Any]] = [
    click.option(
        "--grace",
        type=click.FloatRange(min=0),
        metavar="SECONDS",
        help="After a loss: SIGTERM, then SIGKILL after this long. Default: the margin "
        "simulated expiry leaves, (1 - simulated_expiry_fraction) x session timeout.",
    ),
    click.option(
        "--id",
        "identifier",
        metavar="TEXT",
        help="What holders shows as this holder's id. Default: the command line.",
    ),
]


def _with(options: list[Callable[[_F], _F]]) -> Callable[[_F], _F]:
    """Apply a shared list of click options, in order."""

    def decorate(function: _F) -> _F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


@cli.command(context_settings=_CONTEXT)
@click.argument("name")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@_with(_wait_options + _run_options)
@click.pass_context
@_facts_in_help
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
    as COMMAND ends. If the lock is lost while COMMAND runs (the session
    expired), COMMAND gets SIGTERM, then SIGKILL, and the exit code is {LOST}.
    SIGINT, SIGTERM and SIGHUP are passed on to COMMAND. NAME is a name
    (a node under {PREFIX}/locks/, ZK_RECIPES_PREFIX moves it) or an absolute path.

    \b
    Examples:
      zk-recipes lock db-migrate -- ./manage.py migrate
      zk-recipes lock --no-wait backup -- sh -c 'pg_dump app > /backup/app.sql'
      zk-recipes lock --timeout 60 deploy -- ./deploy.sh
    """
    if no_wait and timeout is not None:
        raise click.UsageError("give either --no-wait or --timeout, not both")
    with _connected(ctx) as (client, config):
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


@cli.command(context_settings=_CONTEXT)
@click.argument("name")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option(
    "--rejoin",
    is_flag=True,
    help=f"After losing leadership, stand by again instead of exiting with {ExitCode.LOST:d}.",
)
@_with(_run_options)
@click.pass_context
@_facts_in_help
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
    leader's process dies (even kill -9), a standby takes over within the
    session timeout. If leadership is lost while COMMAND runs, COMMAND gets
    SIGTERM, then SIGKILL, and the exit code is {LOST} (or, with --rejoin, this
    process stands by again). NAME is a name (under {PREFIX}/leaders/) or
    an absolute path; Curator LeaderLatches on the same path take part.

    \b
    Examples:
      zk-recipes leader beat -- celery -A proj beat
      zk-recipes leader --rejoin consumer -- ./consume.py
    """
    with _connected(ctx) as (client, config):
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


@cli.command(context_settings=_CONTEXT)
@click.argument("path", default="/")
@click.option("--json", "as_json", is_flag=True, help="One JSON document, for programs.")
@click.pass_context
def holders(ctx: click.Context, path: str, as_json: bool) -> None:
    """Show every lock, lease and election under PATH: holders, then the queue in order.

    \b
    Reads our nodes (host, pid, id, since) and Curator's (data shown as it is).
    Examples:
      zk-recipes holders
      zk-recipes holders /zk-recipes/locks --json | jq '.[].holders[].pid'
    """
    with _connected(ctx) as (client, _config):
        code = print_holders(client, path, as_json=as_json)
    sys.exit(code)


@cli.command(context_settings=_CONTEXT)
@click.option("--json", "as_json", is_flag=True, help="One JSON document, for programs.")
@click.pass_context
@_facts_in_help
def status(ctx: click.Context, as_json: bool) -> None:
    """Connect, and show the connection, session and server (version and mode).

    The server's version and mode come from its ``srvr`` four-letter word
    where its 4lw.commands.whitelist allows it. Exit 0 when connected, {UNAVAILABLE} when
    ZooKeeper cannot be reached.
    """
    with _connected(ctx) as (client, _config):
        code = print_status(client, as_json=as_json)
    sys.exit(code)


@cli.command(context_settings=_CONTEXT)
@click.option("--port", type=click.IntRange(1, 65535), help="Client port. Default: a free one.")
def server(port: int | None) -> None:
    """Run a throwaway local ZooKeeper in the foreground, for development.

    It prints its address; Ctrl-C (or SIGTERM) stops it and removes its data.
    Needs Java and ZooKeeper (Debian: apt-get install zookeeper) and the
    testing extra: pip install 'zk-recipes[testing]'.
    """
    try:
        from zk_recipes.testing import HarnessError, ZooKeeperServer
    except ImportError as exc:
        _fail(
            ExitCode.CONFIG,
            f"zk-recipes server needs the testing extra ({exc}): pip install 'zk-recipes[testing]'",
        )
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop.set())
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        try:
            zk = ZooKeeperServer(port=port)
            zk.start()
        except HarnessError as exc:
            _fail(ExitCode.UNAVAILABLE, f"could not start ZooKeeper: {exc}")
        try:
            click.echo(f"ZooKeeper is serving at {zk.connect_string} (data in {zk.directory})")
            click.echo(f"  export ZK_RECIPES_HOSTS={zk.connect_string}")
            click.echo("Ctrl-C stops it and removes its data.")
            while not stop.wait(1.0):
                if not zk.is_running:
                    _fail(ExitCode.UNAVAILABLE, f"ZooKeeper stopped: {zk.exit_status}")
        finally:
            zk.close()
        click.echo("ZooKeeper stopped; its data is removed.")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
