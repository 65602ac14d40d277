"""Where Celery's recipes live, for ``zk_recipes.holders()`` and ``zk-recipes holders``.

Singleton tasks are locks at ``<prefix>/singleton/<task>/<key>``
(``CeleryZkConfig.singleton_root``), the beat election a leader latch at
``<prefix>/beat/<name>`` (``CeleryZkConfig.beat_path``) whose candidates
write ``host:pid`` (``_beat_election``). Registered through this
distribution's entry point (group ``zk_recipes.layouts``), so a process that
never imported this package still reports them as "celery singleton" and
"celery beat"; the core knows nothing of Celery.
"""

from __future__ import annotations

import re

from zk_recipes import Owner, RecipeLayout

#: The path segments under the prefix (``_config.CeleryZkConfig``).
SINGLETON_SEGMENT = "singleton"
BEAT_SEGMENT = "beat"
#: Publish-time deduplication's markers (``_publish``): not a recipe, not reported.
QUEUED_SEGMENT = "queued"

_BEAT_ID = re.compile(r"([^\s:]+):(\d+)")


def beat_owner(data: str) -> Owner | None:
    """The owner a beat candidate names: its ``host:pid``."""
    match = _BEAT_ID.fullmatch(data)
    return Owner(host=match.group(1), pid=int(match.group(2))) if match else None


LAYOUTS = (
    RecipeLayout("celery singleton", base="lock", path=f"{SINGLETON_SEGMENT}/*/*"),
    RecipeLayout(
        "celery beat", base="leader latch", path=f"{BEAT_SEGMENT}/*", owner_of_data=beat_owner
    ),
)
