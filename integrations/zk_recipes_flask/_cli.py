"""``flask zk ...``: the ``zk-recipes`` commands with the app's configuration.

``lock``, ``leader``, ``holders`` and ``status`` are the very commands of the
``zk-recipes`` command line (``zk_recipes.cli.add_click_commands``): the same
options, waiting, signals, loss handling and exit codes. Only the settings
differ: the current app's, as ``init_app`` read them (``ZK_RECIPES_*`` keys),
never the environment; so there is no ``--hosts`` / ``--namespace``, and no
``server``. Each command connects a client of its own from the app's client
settings and closes it at the end (its nodes go at once), rather than the
app's process-wide client, which the app's own code may be using.
"""

from __future__ import annotations

import click
from flask.cli import AppGroup, with_appcontext

from zk_recipes import ConfigurationError, RecipesConfig, RecipeUsageError
from zk_recipes.cli import add_click_commands
from zk_recipes_flask._state import state_of

_HELP = """Coordinate through ZooKeeper with this app's settings (ZK_RECIPES_* keys).

\b
Examples:
  flask zk lock db-upgrade -- flask db upgrade      # every instance of a deploy
  flask zk lock --no-wait nightly-report -- flask report
  flask zk leader scheduler -- flask run-scheduler
  flask zk holders --json
  flask zk status

{EXIT_CODES}
"""


def _app_config(ctx: click.Context) -> RecipesConfig:
    """The current app's settings; a ConfigurationError (exit 78) without ``init_app``."""
    try:
        return state_of().config
    except RecipeUsageError as exc:
        raise ConfigurationError(str(exc)) from None


zk_group = AppGroup("zk", help=_HELP)
add_click_commands(zk_group, _app_config, prog="flask zk", decorate=with_appcontext)
