"""What one app keeps in ``app.extensions["zk_recipes"]``, and the one way to find it.

The extension (``_extension``), its locks (``_locking``), its status
blueprint (``_status``) and ``flask zk`` (``_cli``) all look an app's state up
here, so none of them imports another to find it (flask-sqlalchemy's
``cli.py`` reads ``current_app.extensions`` the same way), and "did you
forget ``init_app``?" is said in one place.
"""

from __future__ import annotations

import dataclasses

from flask import Flask, current_app, has_app_context

from zk_recipes import ProcessClient, RecipesConfig, RecipeUsageError
from zk_recipes.frameworks import Announcement

#: The key of our state in ``app.extensions``.
EXTENSION_KEY = "zk_recipes"


@dataclasses.dataclass
class AppState:
    """One app's settings and its client in this process."""

    #: The ``ZkRecipes`` instance whose ``init_app`` made this state.
    extension: object
    #: The app's checked settings, read once by ``init_app``.
    config: RecipesConfig
    #: The app's one client per process (made on first use, new after a fork).
    process_client: ProcessClient
    #: This process as an instance of ZK_RECIPES_SERVICE (None without one).
    announcement: Announcement | None = None


def state_of(
    app: Flask | None = None, *, extension: object = None, call: str = "get_client"
) -> AppState:
    """The state of ``app`` (default: ``current_app``); a fix-it error without one.

    With ``extension``, the state must also be that extension's: an app
    initialised by another ``ZkRecipes`` instance is refused, naming the fix.
    ``call`` is the method the caller was called as, for the hint.
    """
    if app is None:
        if not has_app_context():
            raise RecipeUsageError(
                f"no app context: call zk.{call}() inside a request, a CLI command or "
                f"`with app.app_context():`, or pass the app: zk.{call}(app)"
            )
        app = current_app._get_current_object()  # type: ignore[attr-defined]
    state = app.extensions.get(EXTENSION_KEY)
    if not isinstance(state, AppState):
        raise RecipeUsageError(
            f"ZkRecipes was not initialised for the app {app.name!r}: call zk.init_app(app)"
        )
    if extension is not None and state.extension is not extension:
        raise RecipeUsageError(
            f"the app {app.name!r} was initialised by another ZkRecipes instance: use that "
            "one, or init_app this one on another app"
        )
    return state
