"""The ``zk-recipes`` command's engine: run a command under a lock or as leader, print status.

Plain functions that return exit codes (``ExitCode``), shared by every
command-line face: the ``zk-recipes`` command (``main``, on click), Django's
``manage.py zklock`` / ``zkleader`` / ``zkstatus`` and Flask's ``flask zk
...`` (the same click commands as ``zk-recipes``, added by
``add_click_commands``)::

    from zk_recipes import ZkClient
    from zk_recipes.cli import run_locked

    with ZkClient("zk1:2181") as client:
        code = run_locked(client, "db-migrate", ["./manage.py", "migrate"], timeout=600)

Every face checks its arguments the same way before it connects
(``parse_seconds`` for ``--timeout``/``--grace``, ``check_path`` for a PATH to
read, the kit's ``lock_path``/``leader_path`` for a NAME): a bad one is one
line and ``ExitCode.USAGE``. What the web faces share with it (lock paths,
lock name templates, the decorated call, status rows) is the framework kit's:
``zk_recipes.frameworks``.

Importing this module imports neither click nor any web framework; ``main()``
and ``add_click_commands()`` import click. See docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from zk_recipes import DEFAULT_PREFIX
from zk_recipes.cli._arguments import (
    check_path as check_path,
    parse_seconds as parse_seconds,
)
from zk_recipes.cli._exit_codes import (
    ExitCode as ExitCode,
)
from zk_recipes.cli._guarded import (
    default_grace as default_grace,
    run_as_leader as run_as_leader,
    run_locked as run_locked,
)
from zk_recipes.cli._in_process import (
    Interrupted as Interrupted,
)
from zk_recipes.cli._outage import (
    connect_timeout as connect_timeout,
)
from zk_recipes.cli._reports import (
    print_holders as print_holders,
    print_status as print_status,
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
    "ExitCode",
    "Interrupted",
    "add_click_commands",
    "check_path",
    "connect_timeout",
    "default_grace",
    "main",
    "parse_seconds",
    "print_holders",
    "print_status",
    "run_as_leader",
    "run_locked",
]
