"""The operations core: run a command under a lock or as leader, report holders and status.

Plain functions that return exit codes (``ExitCode``), shared by every face:
the ``zk-recipes`` command (``main``, on click), Django's ``manage.py zklock``
/ ``zkleader`` / ``zkstatus`` and Flask's ``flask zk ...``::

    from zk_recipes import ZkClient
    from zk_recipes.cli import run_locked

    with ZkClient("zk1:2181") as client:
        code = run_locked(client, "db-migrate", ["./manage.py", "migrate"], timeout=600)

The frameworks' lock decorators share their machinery here too: a lock name
template over a function's parameters (``LockNameTemplate``) and one call's
lock, taken on the calling thread or, for async code, on a thread of its own
(``LockTarget``, ``release_lock_async``), on the same ``lock_path`` as
``zk-recipes lock NAME``; and their status pages the rows they show
(``connection_rows``, ``recipe_rows``).

Importing this module imports neither click nor any web framework; ``main()``
imports click. See docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from zk_recipes.cli._acquiring import (
    LockTarget as LockTarget,
    release_lock_async as release_lock_async,
)
from zk_recipes.cli._exit_codes import (
    ExitCode as ExitCode,
)
from zk_recipes.cli._guarded import (
    DEFAULT_PREFIX as DEFAULT_PREFIX,
    default_grace as default_grace,
    leader_path as leader_path,
    lock_path as lock_path,
    run_as_leader as run_as_leader,
    run_locked as run_locked,
)
from zk_recipes.cli._in_process import (
    Interrupted as Interrupted,
)
from zk_recipes.cli._lock_names import (
    LockNameTemplate as LockNameTemplate,
)
from zk_recipes.cli._pages import (
    NodeRow as NodeRow,
    RecipeRow as RecipeRow,
    connection_rows as connection_rows,
    recipe_rows as recipe_rows,
    spaced_hosts as spaced_hosts,
)
from zk_recipes.cli._reports import (
    connection_report as connection_report,
    holders as holders,
    server_info as server_info,
    status as status,
)


def main(argv: Sequence[str] | None = None) -> None:
    """The ``zk-recipes`` console script (and ``python -m zk_recipes``)."""
    from zk_recipes.cli._command import cli

    cli.main(args=list(argv) if argv is not None else None, prog_name="zk-recipes")


__all__ = [
    "DEFAULT_PREFIX",
    "ExitCode",
    "Interrupted",
    "LockNameTemplate",
    "LockTarget",
    "NodeRow",
    "RecipeRow",
    "connection_report",
    "connection_rows",
    "default_grace",
    "holders",
    "leader_path",
    "lock_path",
    "main",
    "recipe_rows",
    "release_lock_async",
    "run_as_leader",
    "run_locked",
    "server_info",
    "spaced_hosts",
    "status",
]
