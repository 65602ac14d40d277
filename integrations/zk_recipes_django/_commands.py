"""What ``zklock``, ``zkleader`` and locked commands share: one engine, Django's manners.

The engine is the operations core's (``zk_recipes.cli.run_locked`` /
``run_as_leader``): the same waiting, signals, loss handling and exit codes
as the ``zk-recipes`` command line. This module adds Django's side:

- the command after ``--`` is another management command, run in this
  process with ``call_command`` (same settings, database connections and
  exit semantics), or with ``--exec`` a program run as a child process;
- a non-zero outcome becomes ``CommandError(returncode=N)``, so
  ``manage.py`` exits with the documented code and ``call_command`` callers
  can read ``exc.returncode``;
- when run from the command line, a command still running ``grace`` seconds
  after a loss ends the process (``exit_process_on_lost``); through
  ``call_command`` it is only interrupted (``LockLost`` raised in it).
"""

from __future__ import annotations

import argparse
import difflib
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError

from zk_recipes import ConfigurationError, ZkClient, ZkRecipesError
from zk_recipes.cli import ExitCode, connect_timeout, parse_seconds
from zk_recipes_django import _clients, _settings


def split_command(args: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """``[options..., "--", command...]`` -> (options, command); command None without ``--``."""
    args = list(args)
    if "--" not in args:
        return args, None
    at = args.index("--")
    return args[:at], args[at + 1 :]


class GuardedRunCommand(BaseCommand):  # type: ignore[misc]
    """A command whose arguments end with ``-- COMMAND [ARGS...]``, run under a hold.

    argparse cannot take a command line after ``--`` beside options of its
    own, so the parser splits the arguments at the first ``--`` itself.
    """

    #: Set by ``run_from_argv``: the process is this command (``manage.py ...``).
    standalone = False

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parse = parser.parse_args

        def parse_args(args: Sequence[str] | None = None, namespace: Any = None) -> Any:
            options, command = split_command(args or [])
            parsed = parse(options, namespace)
            if command is not None:
                parsed.command = command
            return parsed

        parser.parse_args = parse_args
        return parser

    def add_run_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--alias",
            default=_settings.DEFAULT_ALIAS,
            help='The ZooKeeper alias of settings.ZK_RECIPES (default: "default").',
        )
        parser.add_argument(
            "--exec",
            dest="exec_",
            action="store_true",
            help="Run COMMAND as a program in a child process (signals passed on; terminated "
            "if the hold is lost), not as a management command in this process.",
        )
        parser.add_argument(
            "--grace",
            default=None,
            metavar="SECONDS",
            help="Seconds between SIGTERM and SIGKILL (--exec), or before this process exits, "
            "after a loss (default: what the session timeout leaves before the server acts).",
        )
        parser.add_argument(
            "command",
            nargs="*",
            metavar="-- COMMAND",
            help="After --: a management command and its arguments, or with --exec a program.",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        self.standalone = True
        super().run_from_argv(argv)

    # -- for the subclasses ------------------------------------------------------
    def job(
        self, command: Sequence[str] | None, exec_: bool
    ) -> tuple[list[str] | Callable[[], int], str]:
        """What to run: (argv or in-process call, the command line owner data names)."""
        if not command:
            raise CommandError(
                "no command to run: give one after --, e.g. manage.py zklock migrate -- migrate",
                returncode=ExitCode.USAGE,
            )
        argv = list(command)
        if exec_:
            return argv, shlex.join(argv)
        name = argv[0]
        commands = get_commands()
        if name not in commands:
            close = difflib.get_close_matches(name, list(commands), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise CommandError(
                f"unknown management command {name!r}{hint}: give a management command after "
                "--, or use --exec to run a program",
                returncode=ExitCode.NOT_FOUND,
            )
        return self.in_process(argv), "manage.py " + shlex.join(argv)

    def in_process(self, argv: list[str]) -> Callable[[], int]:
        """``call_command(argv...)`` as the engine's in-process job; its status."""

        def run_command() -> int:
            try:
                call_command(*argv, stdout=self.stdout._out, stderr=self.stderr._out)
            except CommandError as exc:
                self.stderr.write(f"CommandError: {exc}")
                return int(getattr(exc, "returncode", 1))
            except SystemExit as exc:
                return exit_status(exc.code)
            return 0

        run_command.__qualname__ = f"manage.py {shlex.join(argv)}"
        return run_command


_MEANINGS: dict[int, str] = {
    ExitCode.BUSY: "busy",
    ExitCode.TIMED_OUT: "timed out",
    ExitCode.LOST: "lost while the command ran",
    ExitCode.UNAVAILABLE: "ZooKeeper unreachable",
    ExitCode.CONFIG: "bad settings",
    ExitCode.NOT_FOUND: "command not found",
    ExitCode.CANNOT_RUN: "command cannot run",
}


def seconds(value: object, option: str) -> float | None:
    """``--timeout`` / ``--grace`` as given (text, or a number through call_command).

    Checked here rather than by argparse, whose error prints the whole usage
    first: a bad value is one line and exit 2, like ``zk-recipes``'s.
    """
    if value is None:
        return None
    try:
        return parse_seconds(value)
    except ConfigurationError as exc:
        raise CommandError(f"{option} {exc}", returncode=ExitCode.USAGE) from None


def check_name(path_of: Callable[[str, str], str], name: str, alias: str) -> None:
    """NAME checked before connecting: exit 2 when it makes no path (78 for the settings).

    ``path_of`` is the kit's ``lock_path`` or ``leader_path``: the name is
    checked against the alias's prefix, as the lock will be.
    """
    try:
        prefix = _settings.config(alias).prefix
    except ConfigurationError as exc:
        raise CommandError(str(exc), returncode=ExitCode.CONFIG) from None
    try:
        path_of(name, prefix)
    except ConfigurationError as exc:
        raise CommandError(str(exc), returncode=ExitCode.USAGE) from None


def connect(
    alias: str, timeout: float | None = None, *, at_once: bool = False
) -> tuple[ZkClient, str]:
    """The alias's connected client and prefix; CommandError with the exit code if not.

    Waits up to the alias's ``CONNECTION_TIMEOUT`` for the connection, and no
    longer than ``timeout`` (the command's ``--timeout``); with ``at_once``
    (``--no-wait``) no longer than it takes every server to refuse the
    connection: the outage rule of ``zk_recipes.cli`` (``connect_timeout``).
    """
    try:
        config = _settings.config(alias)
        wait = connect_timeout(config.client.connection_timeout, timeout)
        client = _clients.process_client(alias).get(wait, refused_ends=at_once)
        return client, config.prefix
    except ConfigurationError as exc:
        raise CommandError(str(exc), returncode=ExitCode.CONFIG) from None
    except ZkRecipesError as exc:
        raise CommandError(
            f"ZooKeeper alias {alias!r} is unreachable: {exc}", returncode=ExitCode.UNAVAILABLE
        ) from None


def finish(code: int, what: str) -> None:
    """Return for 0; otherwise raise CommandError carrying ``code`` (``manage.py``'s exit)."""
    if code == 0:
        return
    meaning = _MEANINGS.get(code)
    text = f"{what}: {meaning}" if meaning else f"{what}: the command exited with status {code}"
    raise CommandError(f"{text} (exit {code})", returncode=code)


def exit_status(code: object) -> int:
    """``SystemExit.code`` as a process's exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


class LockedCommandMixin:
    """A management command that always runs under its ZooKeeper lock.

        class Command(LockedCommandMixin, BaseCommand):
            lock_name = "nightly-report"        # default: the command's name
            lock_timeout = 600                  # default: wait as long as it takes

            def handle(self, *args, **options): ...

    Adds ``--no-wait`` (exit 75 when held) and ``--timeout S`` (exit 124) to
    the command, or ``--lock-timeout`` if it has a ``--timeout`` of its own.
    The lock is the one ``manage.py zklock NAME`` and ``zk-recipes lock NAME``
    take. A loss interrupts ``handle()`` (``LockLost`` raised in it) and the
    command exits with 79; see ``_in_process``.
    """

    #: The lock's name under ``<prefix>/locks/``; None: the command's name.
    lock_name: str | None = None
    #: The ZooKeeper alias of ``settings.ZK_RECIPES``.
    lock_alias: str = _settings.DEFAULT_ALIAS
    #: Seconds to wait for the lock by default; None waits as long as it takes.
    lock_timeout: float | None = None
    #: False: give up at once by default (``--no-wait`` without being asked).
    lock_wait: bool = True

    _standalone = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _settings.note_use(cls.lock_alias, f"the command {cls.__module__}")

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        parser = super().create_parser(prog_name, subcommand, **kwargs)  # type: ignore[misc]
        group = parser.add_argument_group("ZooKeeper lock")
        group.add_argument(
            "--no-wait",
            dest="zk_lock_no_wait",
            action="store_true",
            help="Give up at once if another process holds the command's lock (exit 75).",
        )
        flag = "--lock-timeout" if "--timeout" in parser._option_string_actions else "--timeout"
        self._zk_timeout_flag = flag
        group.add_argument(
            flag,
            dest="zk_lock_timeout",
            default=None,
            metavar="SECONDS",
            help="Give up after S seconds of waiting for the command's lock (exit 124).",
        )
        return parser

    def run_from_argv(self, argv: list[str]) -> None:
        self._standalone = True
        super().run_from_argv(argv)  # type: ignore[misc]

    def execute(self, *args: Any, **options: Any) -> Any:
        from zk_recipes.cli import run_locked

        no_wait = bool(options.pop("zk_lock_no_wait", False)) or not self.lock_wait
        flag = getattr(self, "_zk_timeout_flag", "--timeout")
        timeout = seconds(options.pop("zk_lock_timeout", None), flag)
        if timeout is None and not no_wait:
            timeout = self.lock_timeout
        name = self.lock_name or type(self).__module__.rsplit(".", 1)[-1]
        client, prefix = connect(
            self.lock_alias, None if no_wait else timeout, at_once=no_wait or timeout == 0
        )
        result: list[Any] = []

        def run_command() -> int:
            result.append(super(LockedCommandMixin, self).execute(*args, **options))  # type: ignore[misc]
            return 0

        run_command.__qualname__ = f"manage.py {name}"
        code = run_locked(
            client,
            name,
            run_command,
            wait=not no_wait,
            timeout=None if no_wait else timeout,
            prefix=prefix,
            identifier=f"manage.py {name}",
            out=self.stderr,  # type: ignore[attr-defined]
            exit_process_on_lost=self._standalone,
        )
        finish(code, f"the lock {name} of this command")
        return result[0] if result else None
