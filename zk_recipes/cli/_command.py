"""The ``zk-recipes`` command line, on click: options and help only; the work is in the engine.

Settings come from the environment (``ZK_RECIPES_HOSTS``, ``ZK_RECIPES_NAMESPACE``,
... see docs/settings.md), and ``--hosts`` / ``--namespace`` override them.
lock, leader, holders and status are the shared commands (``_click_commands``:
the same in ``flask zk``); each connects once, within the connection timeout
(``ExitCode.UNAVAILABLE`` otherwise), and closes its session on the way out,
so its nodes go at once. ``server`` is this command's own.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import click

import zk_recipes
from zk_recipes import ConfigurationError, RecipesConfig
from zk_recipes.cli._click_commands import add_click_commands
from zk_recipes.cli._click_shared import CONTEXT, fail
from zk_recipes.cli._exit_codes import ExitCode

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

{EXIT_CODES}
"""


class _Globals:
    def __init__(self, hosts: str | None, namespace: str | None) -> None:
        self.hosts = hosts
        self.namespace = namespace


def _read_config(ctx: click.Context) -> RecipesConfig:
    """The settings of the environment, ``--hosts`` and ``--namespace`` overriding it."""
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
        raise ConfigurationError(
            "no ZooKeeper to talk to: give --hosts zk1:2181,zk2:2181 or set ZK_RECIPES_HOSTS "
            "(zk-recipes server starts a local one for development)"
        )
    try:
        return zk_recipes.settings_from_env(environ)
    except ConfigurationError as exc:
        # The reader names the environment variable; the value came from the option.
        message = str(exc)
        for variable, option in given.items():
            message = message.replace(f"environment variable {variable}", option)
            message = message.replace(f"{variable}=", f"{option} ")
        # A hint that points to another setting points to its option: what a CLI user types.
        message = message.replace("as ZK_RECIPES_NAMESPACE instead", "as --namespace instead")
        raise ConfigurationError(message) from None


@click.group(context_settings=CONTEXT, help=_MAIN_HELP)
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


add_click_commands(cli, _read_config, prog="zk-recipes")


@cli.command(context_settings=CONTEXT)
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
        fail(
            ExitCode.NOT_INSTALLED,
            f"zk-recipes server needs the testing extra, which is not installed ({exc}): "
            "pip install 'zk-recipes[testing]'",
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
            fail(ExitCode.UNAVAILABLE, f"could not start ZooKeeper: {exc}")
        try:
            click.echo(f"ZooKeeper is serving at {zk.connect_string} (data in {zk.directory})")
            click.echo(f"  export ZK_RECIPES_HOSTS={zk.connect_string}")
            click.echo("Ctrl-C stops it and removes its data.")
            while not stop.wait(1.0):
                if not zk.is_running:
                    fail(ExitCode.UNAVAILABLE, f"ZooKeeper stopped: {zk.exit_status}")
        finally:
            zk.close()
        click.echo("ZooKeeper stopped; its data is removed.")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
