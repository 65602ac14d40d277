"""What a served app keeps in ``app.state.zk_recipes``, and the one way to find it.

The lifespan (``_extension``) puts it there at start-up; the lock dependency
(``_locking.zk_lock``), which is made without the ``ZkRecipes`` at hand,
finds it from the request's app here, and "did you give the app the
lifespan?" is said in one place.
"""

from __future__ import annotations

import dataclasses

from starlette.types import ASGIApp

from zk_recipes import ProcessClient, RecipesConfig, RecipeUsageError
from zk_recipes.frameworks import Announcement, LockTarget

#: The attribute of ``app.state`` that holds an app's ``AppState``.
STATE_KEY = "zk_recipes"


@dataclasses.dataclass
class AppState:
    """One ``ZkRecipes``'s settings and its client in this process."""

    #: The ``ZkRecipes`` this state is of.
    extension: object
    #: The checked settings, read once by ``ZkRecipes()``.
    config: RecipesConfig
    #: The one client per process (made on first use, new after a fork).
    process_client: ProcessClient
    #: This process as an instance of ZK_RECIPES_SERVICE (None without one).
    announcement: Announcement | None = None

    def make_target(self, name: str, identifier: str | None, timeout: float | None) -> LockTarget:
        """The lock ``name`` of one call, with this process's client and prefix."""
        return LockTarget(
            name,
            self.process_client,
            prefix=self.config.prefix,
            identifier=identifier,
            timeout=timeout,
        )


#: The states whose lifespan is running in this process: a mounted sub-app (whose own
#: lifespan Starlette never runs) finds its parent's when there is one.
serving: list[AppState] = []


def state_of(app: ASGIApp) -> AppState:
    """The state the app's lifespan put in ``app.state``; a fix-it error without one.

    A sub-app mounted in the app (``app.mount("/v2", sub)``) has no lifespan
    of its own: it uses the one state whose lifespan runs in this process.
    """
    state = getattr(getattr(app, "state", None), STATE_KEY, None)
    if state is None and len(serving) == 1:
        state = serving[0]
    if not isinstance(state, AppState):
        raise RecipeUsageError(
            "this app has no zk-recipes state: its lifespan did not run ZkRecipes's. Give the "
            "app zk.lifespan (FastAPI(lifespan=zk.lifespan), or `async with zk.lifespan(app):` "
            "in your own lifespan); in tests, enter the app's lifespan "
            "(`async with app.router.lifespan_context(app):`)"
        )
    return state
