"""``manage.py zklock NAME [--timeout S | --no-wait] [--alias A] [--exec] -- COMMAND [ARGS...]``.

Runs another management command (in this process, through ``call_command``)
or with ``--exec`` a program (a child process) while holding the lock NAME:
the same lock as ``zk-recipes lock NAME`` on the same namespace and prefix.
Every pod of a deploy can run ``manage.py zklock migrate -- migrate``: one
migrates at a time, the others wait, then find nothing to do.

Exit codes: the command's own status when it ran; otherwise the operations
core's table (``zk_recipes.cli.ExitCode``): 75 busy (``--no-wait``), 124 timed
out, 79 lost while it ran, 69 ZooKeeper unreachable, 78 bad settings, 127 no
such command, 128 + N after signal N while waiting.
"""

from __future__ import annotations

from typing import Any

from zk_recipes.cli import run_locked
from zk_recipes.frameworks import lock_path
from zk_recipes_django._commands import GuardedRunCommand, check_name, connect, finish, seconds


class Command(GuardedRunCommand):
    help = (
        "Run a management command (or with --exec a program) while holding a ZooKeeper lock: "
        "manage.py zklock NAME [--timeout S | --no-wait] -- COMMAND [ARGS...]"
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="The lock's name, e.g. migrate (or an absolute path).")
        wait = parser.add_mutually_exclusive_group()
        wait.add_argument(
            "--timeout",
            default=None,
            metavar="SECONDS",
            help="Give up after waiting this long (exit 124).",
        )
        wait.add_argument(
            "--no-wait", action="store_true", help="Give up at once if it is held (exit 75)."
        )
        self.add_run_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        timeout = seconds(options["timeout"], "--timeout")
        grace = seconds(options["grace"], "--grace")
        job, label = self.job(options["command"], options["exec_"])
        check_name(lock_path, options["name"], options["alias"])
        at_once = options["no_wait"] or timeout == 0
        client, prefix = connect(options["alias"], timeout, at_once=at_once)
        code = run_locked(
            client,
            options["name"],
            job,
            wait=not options["no_wait"],
            timeout=timeout,
            grace=grace,
            prefix=prefix,
            identifier=label,
            out=self.stderr,
            exit_process_on_lost=self.standalone,
        )
        finish(code, f"zklock {options['name']}")
