"""The click commands every command line shares: lock, leader, announce, holders, services, status.

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

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

import click

from zk_recipes import (
    DEFAULT_PREFIX,
    ClientStateError,
    ConfigurationError,
    ConnectionLostError,
    ConnectTimeoutError,
    RecipesConfig,
    ServiceInstance,
    ServiceType,
    SessionLost,
    ZkClient,
    ZkTimeoutError,
)
from zk_recipes.cli._announced import run_announced
from zk_recipes.cli._arguments import check_path, parse_seconds
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._guarded import run_as_leader, run_locked
from zk_recipes.cli._outage import connect_timeout
from zk_recipes.cli._reports import print_holders, print_services, print_status
from zk_recipes.frameworks import leader_path, lock_path

_F = TypeVar("_F", bound=Callable[..., Any])
#: How a face reads its settings for one command.
ConfigOf = Callable[[click.Context], RecipesConfig]
CONTEXT: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

_EXIT_CODES = """\b
Exit codes of lock and leader: the command's own status when it ran;
  {BUSY} busy (--no-wait), {TIMED_OUT} timed out, {LOST} lost while running (command stopped),
  {UNAVAILABLE} ZooKeeper unreachable, {CONFIG} bad settings, {USAGE} usage. See docs/cli.md."""


def facts(prog: str, default_prefix: str = DEFAULT_PREFIX) -> dict[str, object]:
    """What the help texts say: the exit codes by name, the prefix, the program's name."""
    codes: dict[str, object] = {code.name: int(code) for code in ExitCode}
    return codes | {
        "PREFIX": default_prefix,
        "PROG": prog,
        "EXIT_CODES": _EXIT_CODES.format(**codes),
    }


def fail(code: int, message: str) -> NoReturn:
    """Say why on stderr and exit with ``code``."""
    click.echo(f"zk-recipes: {message}", err=True)
    sys.exit(code)


def settings(config_of: ConfigOf, ctx: click.Context) -> RecipesConfig:
    """The face's settings; exit ``CONFIG`` with the reason when they are wrong."""
    try:
        return config_of(ctx)
    except ConfigurationError as exc:
        fail(ExitCode.CONFIG, str(exc))


def check_argument(check: Callable[[], object]) -> None:
    """Run ``check``; a ``ConfigurationError`` it raises is a bad argument: exit ``USAGE``.

    One line, like ``fail``'s, naming the argument as typed: the settings are
    read before (exit ``CONFIG``), so what is left wrong is the command line.
    """
    try:
        check()
    except ConfigurationError as exc:
        raise BadArgument(str(exc)) from None


@contextlib.contextmanager
def connected(
    config_of: ConfigOf,
    ctx: click.Context,
    timeout: float | None = None,
    *,
    at_once: bool = False,
) -> Iterator[tuple[ZkClient, RecipesConfig]]:
    """A started client of the face's settings, closed on the way out; exits on failure.

    Connecting waits the connection timeout at most, cut to ``timeout`` (the
    command's ``--timeout``), and ends as soon as every server has refused
    the connection when ``at_once`` (a command that must not wait:
    ``--no-wait``, ``status``, ``holders``): the outage rule of ``_outage``. Past the
    connection, an argument the checks let through exits ``USAGE`` and a
    connection that breaks exits ``UNAVAILABLE``: one line, no traceback.
    """
    config = settings(config_of, ctx)
    client = ZkClient(settings=config.client)
    try:
        try:
            client.start(
                connect_timeout(config.client.connection_timeout, timeout), refused_ends=at_once
            )
        except ConnectTimeoutError as exc:
            fail(ExitCode.UNAVAILABLE, f"ZooKeeper is unreachable: {exc}")
        except ConfigurationError as exc:  # the server refused the credentials
            fail(ExitCode.CONFIG, str(exc))
        try:
            yield client, config
        except ConfigurationError as exc:
            fail(ExitCode.USAGE, str(exc))
        except (ConnectionLostError, ZkTimeoutError, SessionLost, ClientStateError) as exc:
            fail(ExitCode.UNAVAILABLE, f"ZooKeeper is unreachable: {exc}")
    finally:
        client.close()


class BadArgument(click.ClickException):
    """A bad argument's value: one line on stderr, as ``fail`` writes it, and exit ``USAGE``.

    Not click's ``BadParameter``, which prints the usage and a hint around
    the message: the message itself says what to give instead.
    """

    exit_code = ExitCode.USAGE

    def show(self, file: Any = None) -> None:
        click.echo(f"zk-recipes: {self.format_message()}", err=True)


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2 on
    """A finite number of seconds >= 0 (``--timeout``, ``--grace``): no ``nan``, no ``inf``."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_seconds(value)
        except ConfigurationError as exc:
            option = param.opts[0] if param is not None and param.opts else "SECONDS"
            raise BadArgument(f"{option} {exc}") from None


_wait_options: list[Callable[[Any], Any]] = [
    click.option(
        "--no-wait",
        is_flag=True,
        help=f"Give up at once if somebody else holds it (exit {ExitCode.BUSY:d}).",
    ),
    click.option(
        "--timeout",
        type=Seconds(),
        metavar="SECONDS",
        help=f"Give up after waiting this long (exit {ExitCode.TIMED_OUT:d}). "
        "Default: wait as long as it takes.",
    ),
]
_run_options: list[Callable[[Any], Any]] = [
    click.option(
        "--grace",
        type=Seconds(),
        metavar="SECONDS",
        help="After a loss: SIGTERM to COMMAND's process group, then SIGKILL after this "
        "long. Default: half the margin before the server may expire the session, "
        "(1 - simulated_expiry_fraction) x session timeout / 2.",
    ),
    click.option(
        "--id",
        "identifier",
        metavar="TEXT",
        help="What holders shows as this holder's id. Default: the command line.",
    ),
]
_json_option = click.option(
    "--json", "as_json", is_flag=True, help="One JSON document, for programs."
)


def _with(options: list[Callable[[_F], _F]]) -> Callable[[_F], _F]:
    """Apply a shared list of click options, in order."""

    def decorate(function: _F) -> _F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate


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
    @_with(_wait_options + _run_options)
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
    @_with(_run_options)
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

    @add
    @click.argument("name")
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    @click.option("--port", type=click.IntRange(0, 65535), help="The port COMMAND listens on.")
    @click.option("--ssl-port", type=click.IntRange(0, 65535), help="Its TLS port.")
    @click.option(
        "--address", help="Where to reach it. Default: this host's first non-loopback IPv4."
    )
    @click.option("--id", "instance_id", help="The instance id. Default: a random UUID.")
    @click.option(
        "--payload",
        metavar="JSON",
        help='JSON: a string, number, or an object starting with "@class" (the Java class '
        "a Java reader reads it as).",
    )
    @click.option("--uri-spec", metavar="TEMPLATE", help="e.g. '{scheme}://{address}:{port}'.")
    @click.option(
        "--type",
        "service_type",
        type=click.Choice(["dynamic", "static", "permanent"], case_sensitive=False),
        default="dynamic",
        show_default=True,
        help="dynamic: an ephemeral node.",
    )
    @click.option(
        "--base-path", default="/services", show_default=True, help="Where services live."
    )
    @click.option(
        "--grace",
        type=Seconds(),
        metavar="SECONDS",
        help="When COMMAND ends, what it left in its process group gets SIGTERM, then "
        "SIGKILL after this long. Default: as lock's.",
    )
    @click.pass_context
    def announce(
        ctx: click.Context,
        name: str,
        command: tuple[str, ...],
        port: int | None,
        ssl_port: int | None,
        address: str | None,
        instance_id: str | None,
        payload: str | None,
        uri_spec: str | None,
        service_type: str,
        base_path: str,
        grace: float | None,
    ) -> None:
        """Run COMMAND with an instance of service NAME registered, exactly while it runs.

        \b
        The instance (curator-x-discovery's layout and JSON under --base-path, so
        Curator's ServiceDiscovery, ServiceCache and ServiceProvider see it) is
        registered as COMMAND starts and unregistered the moment it ends. COMMAND
        runs in a process group of its own; SIGINT, SIGTERM and SIGHUP are passed
        on, and if this process dies, even by kill -9, the group is stopped and
        the node goes with the session. ZooKeeper unreachable: exit {UNAVAILABLE};
        an instance id registered by another process: exit {CONFIG}.

        \b
        Examples:
          {PROG} announce orders --port 8080 -- gunicorn app:app -b 0.0.0.0:8080
          {PROG} announce orders --port 80 --uri-spec '{{scheme}}://{{address}}:{{port}}' -- ./s
        """
        kwargs: dict[str, object] = {
            "port": port,
            "ssl_port": ssl_port,
            "service_type": ServiceType(service_type.upper()),
        }
        if address is not None:
            kwargs["address"] = address
        if instance_id is not None:
            kwargs["id"] = instance_id
        if uri_spec is not None:
            kwargs["uri_spec"] = uri_spec
        if payload is not None:
            try:
                kwargs["payload"] = json.loads(payload)
            except ValueError as exc:
                raise BadArgument(f"--payload is not JSON: {exc}") from None
        instance: list[ServiceInstance] = []
        check_argument(lambda: instance.append(ServiceInstance(name=name, **kwargs)))  # type: ignore[arg-type]
        check_argument(lambda: check_path(base_path, "--base-path", example=""))
        with connected(config_of, ctx) as (client, _config):
            code = run_announced(client, instance[0], command, base_path=base_path, grace=grace)
        sys.exit(code)

    @add
    @click.argument("name", required=False)
    @click.option(
        "--base-path", default="/services", show_default=True, help="Where services live."
    )
    @_json_option
    @click.pass_context
    def services(ctx: click.Context, name: str | None, base_path: str, as_json: bool) -> None:
        """List the services under --base-path, or the instances of NAME (Curator's too).

        \b
        Examples:
          {PROG} services
          {PROG} services orders --json | jq '.orders[].port'
        """
        check_argument(lambda: check_path(base_path, "--base-path", example=""))
        with connected(config_of, ctx, at_once=True) as (client, _config):
            code = print_services(client, base_path, name, as_json=as_json)
        sys.exit(code)

    @add
    @click.argument("path", default="/")
    @_json_option
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

    @add
    @_json_option
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
