"""Where Celery's recipes live, for ``zk_recipes.holders()`` and ``zk-recipes holders``.

Singleton tasks are locks at ``<prefix>/singleton/<task>/<key>``
(``CeleryZkConfig.singleton_root``), the beat election a leader latch at
``<prefix>/beat/<name>`` (``CeleryZkConfig.beat_path``) whose candidates
write ``host:pid`` (``_beat_election``). Two kinds of plain nodes are shown
too (base "node"): publish dedup's queued markers at
``<prefix>/queued/<task>/<key>`` ("celery queued": the task id, and the
worker's session once its run started), and the entries of a schedule held
in ZooKeeper that no beat can run ("celery beat entry (invalid)": the reason
as the id; valid entries are left out). Registered through this
distribution's entry point (group ``zk_recipes.layouts``), so a process that
never imported this package still reports them; the core knows nothing of
Celery.
"""

from __future__ import annotations

import re

from zk_recipes import Owner, RecipeLayout
from zk_recipes.frameworks import InvalidEntry, parse_entry

#: The path segments under the prefix (``_config.CeleryZkConfig``).
SINGLETON_SEGMENT = "singleton"
BEAT_SEGMENT = "beat"
#: Publish-time deduplication's markers (``_publish``).
QUEUED_SEGMENT = "queued"

_BEAT_ID = re.compile(r"([^\s:]+):(\d+)")
#: The name an entry is parsed under when only its data is known.
_UNNAMED = "?"


def beat_owner(data: str) -> Owner | None:
    """The owner a beat candidate names: its ``host:pid``."""
    match = _BEAT_ID.fullmatch(data)
    return Owner(host=match.group(1), pid=int(match.group(2))) if match else None


def invalid_entry(data: str) -> Owner | None:
    """For a schedule entry no beat can run: an owner whose id says why; None when it is valid."""
    found = parse_entry(_UNNAMED, data.encode(), _UNNAMED)
    if not isinstance(found, InvalidEntry):
        return None
    return Owner(id="invalid: " + found.reason.removeprefix(f"entry {_UNNAMED}: "))


LAYOUTS = (
    RecipeLayout("celery singleton", base="lock", path=f"{SINGLETON_SEGMENT}/*/*"),
    RecipeLayout(
        "celery beat", base="leader latch", path=f"{BEAT_SEGMENT}/*", owner_of_data=beat_owner
    ),
    RecipeLayout("celery queued", base="node", path=f"{QUEUED_SEGMENT}/*/*"),
    RecipeLayout(
        "celery beat entry (invalid)",
        base="node",
        path="schedule/*/entries/*",
        owner_of_data=invalid_entry,
    ),
)
