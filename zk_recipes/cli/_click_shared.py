"""What the click commands share: settings, the connection, argument types, the options.

``_click_commands`` (lock, leader, holders, status) and ``_click_discovery``
(announce, services) are built from these, for the ``zk-recipes`` group and
Flask's ``flask zk`` alike.
"""

from __future__ import annotations

import contextlib
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
    SessionLost,
    ZkClient,
    ZkTimeoutError,
)
from zk_recipes.cli._arguments import parse_seconds
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._outage import connect_timeout

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


wait_options: list[Callable[[Any], Any]] = [
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
run_options: list[Callable[[Any], Any]] = [
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
json_option = click.option(
    "--json", "as_json", is_flag=True, help="One JSON document, for programs."
)


def with_options(options: list[Callable[[_F], _F]]) -> Callable[[_F], _F]:
    """Apply a shared list of click options, in order."""

    def decorate(function: _F) -> _F:
        for option in reversed(options):
            function = option(function)
        return function

    return decorate
