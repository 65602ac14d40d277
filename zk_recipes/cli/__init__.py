"""The operations core: run a command under a lock or as leader, report holders and status.

Plain functions that return exit codes (``ExitCode``), shared by every face:
the ``zk-recipes`` command (``main``, on click), Django's ``manage.py zklock``
/ ``zkleader`` / ``zkstatus`` and Flask's ``flask zk ...`` (the same click
commands as ``zk-recipes``, added by ``add_click_commands``)::

    from zk_recipes import ZkClient
    from zk_recipes.cli import run_locked

    with ZkClient("zk1:2181") as client:
        code = run_locked(client, "db-migrate", ["./manage.py", "migrate"], timeout=600)

The frameworks' lock decorators share their machinery here too: a lock name
template over a function's parameters (``LockNameTemplate``) and one call's
lock, taken on the calling thread or, for async code, on a thread of its own
(``LockTarget``, ``release_lock_async``), on the same ``lock_path`` as
``zk-recipes lock NAME``; the decorated call and the block themselves
(``LockPlan`` + ``locked_call``, ``LockedBlock``, ``HeldLocks`` for
``current_lock()``), each framework passing only its own answers; and their
status pages the rows they show (``connection_rows``, ``recipe_rows``).

Importing this module imports neither click nor any web framework; ``main()``
and ``add_click_commands()`` import click. See docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

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
from zk_recipes.cli._locked_calls import (
    HeldLocks as HeldLocks,
    LockedBlock as LockedBlock,
    LockPlan as LockPlan,
    check_on_busy as check_on_busy,
    locked_call as locked_call,
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

if TYPE_CHECKING:
    import click

    from zk_recipes import RecipesConfig


def main(argv: Sequence[str] | None = None) -> None:
    """The ``zk-recipes`` console script (and ``python -m zk_recipes``)."""
    from zk_recipes.cli._command import cli

    cli.main(args=list(argv) if argv is not None else None, prog_name="zk-recipes")


def add_click_commands(
    group: click.Group,
    config_of: Callable[[click.Context], RecipesConfig],
    *,
    prog: str,
    default_prefix: str = DEFAULT_PREFIX,
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Add ``zk-recipes``'s lock, leader, holders and status commands to a click group.

    For a framework's command line (``flask zk``): the same options, help,
    behaviour and exit codes, on the framework's settings. ``config_of(ctx)``
    returns them for one command (a ``ConfigurationError`` it raises exits
    with ``ExitCode.CONFIG``); each command connects a client of its own
    (``ExitCode.UNAVAILABLE`` when it cannot within the connection timeout)
    and closes it at the end. ``prog`` is how the help's examples call the
    group; ``{EXIT_CODES}``, ``{PREFIX}`` (``default_prefix``) and ``{PROG}``
    in the group's help are filled in. ``decorate`` wraps each command's
    callback (Flask's ``with_appcontext``).
    """
    from zk_recipes.cli._click_commands import add_click_commands as add

    add(group, config_of, prog=prog, default_prefix=default_prefix, decorate=decorate)


__all__ = [
    "DEFAULT_PREFIX",
    "ExitCode",
    "HeldLocks",
    "Interrupted",
    "LockNameTemplate",
    "LockPlan",
    "LockTarget",
    "LockedBlock",
    "NodeRow",
    "RecipeRow",
    "add_click_commands",
    "check_on_busy",
    "connection_report",
    "connection_rows",
    "default_grace",
    "holders",
    "leader_path",
    "lock_path",
    "locked_call",
    "main",
    "recipe_rows",
    "release_lock_async",
    "run_as_leader",
    "run_locked",
    "server_info",
    "spaced_hosts",
    "status",
]
