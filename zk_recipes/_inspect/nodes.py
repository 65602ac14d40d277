"""Plain nodes in ``holders()``: the markers a face keeps, each reported as a recipe of its kind.

A face that keeps plain nodes of its own (Celery's queued markers of
publish dedup, at ``<prefix>/queued/<task>/<key>``) registers a
``RecipeLayout`` with base ``"node"``: every node of the walk at such a
place is read (pipelined with the rest) and reported under the layout's
kind, the node itself as its one holder, with the owner its data names
(our owner JSON: ``host``, ``pid``, ``id``, ``since``), its session (the
ephemeralOwner: 0 for a persistent node) and its czxid. A layout's
``owner_of_data`` reads data that is not owner JSON, and decides for a node
whether it is reported at all (None: left out). The core knows no face.
"""

from __future__ import annotations

from collections.abc import Iterable

from zk_recipes._inspect.layouts import NODE, RecipeLayout, kind_of
from zk_recipes._inspect.recipe_holders import QueuedNode, RecipeHolders
from zk_recipes._types import Owner, ZnodeStat


class MarkedNodes:
    """The nodes of a walk that a face's ``"node"`` layout names, before they are read."""

    def __init__(self, listed: Iterable[str]) -> None:
        self._found = [(p, layout) for p in listed if (layout := kind_of(NODE, p)) is not None]

    def node_paths(self) -> list[str]:
        return [path for path, _layout in self._found]

    def reports(self, nodes: dict[str, tuple[bytes, ZnodeStat]]) -> Iterable[RecipeHolders]:
        for path, layout in self._found:
            if path in nodes:  # else gone meanwhile
                report = _report(path, layout, *nodes[path])
                if report is not None:
                    yield report


def _report(path: str, layout: RecipeLayout, raw: bytes, stat: ZnodeStat) -> RecipeHolders | None:
    owner = Owner.from_bytes(raw)
    text = raw.decode("utf-8", "replace")
    if layout.owner_of_data is not None:
        named = layout.owner_of_data(text)
        if named is None:
            return None
        owner = named
    node = QueuedNode(
        node=path,
        sequence=0,
        holding=True,
        position=0,
        session_id=stat.ephemeral_owner,
        since=owner.since if owner.since is not None else stat.mtime / 1000.0,
        fencing_token=stat.czxid,
        owner=owner,
        data=None if owner else text,
        identifier=owner.id,
    )
    return RecipeHolders(path, layout.kind, (node,), ())
