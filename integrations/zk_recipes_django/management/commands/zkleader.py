"""``manage.py zkleader NAME [--rejoin] [--alias A] [--exec] -- COMMAND [ARGS...]``.

A cold standby: waits until it is the leader of NAME (a LeaderLatch, the
same election as ``zk-recipes leader NAME``), then runs the command (a
management command in this process, or with ``--exec`` a program such as
``celery beat``) only while it leads. When leadership is lost the command is
stopped and the exit code is 79, or with ``--rejoin`` it stands by again.
"""

from __future__ import annotations

from typing import Any

from zk_recipes.cli import run_as_leader
from zk_recipes.frameworks import leader_path
from zk_recipes_django._commands import GuardedRunCommand, check_name, connect, finish, seconds


class Command(GuardedRunCommand):
    help = (
        "Stand by for leadership of NAME; run a management command (or with --exec a program) "
        "only while leader: manage.py zkleader NAME -- COMMAND [ARGS...]"
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="The election's name, e.g. consumer.")
        parser.add_argument(
            "--rejoin",
            action="store_true",
            help="After losing leadership, stand by again instead of exiting with 79.",
        )
        self.add_run_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        grace = seconds(options["grace"], "--grace")
        job, label = self.job(options["command"], options["exec_"])
        check_name(leader_path, options["name"], options["alias"])
        client, prefix = connect(options["alias"])
        code = run_as_leader(
            client,
            options["name"],
            job,
            rejoin=options["rejoin"],
            grace=grace,
            prefix=prefix,
            identifier=label,
            out=self.stderr,
            exit_process_on_lost=self.standalone,
        )
        finish(code, f"zkleader {options['name']}")
