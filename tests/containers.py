"""Reading a recipe directory that the server may have reaped.

Recipe directories (a lock's, a queue's markers and dead letters, a
discovery service's) are CONTAINER nodes: the server deletes one soon after
its last child goes (every 0.1 s under the harness). "Nothing left" is then
an empty directory or a missing one.
"""

from __future__ import annotations

from zk_recipes import NoNodeError, ZkClient


def children_of(client: ZkClient, path: str) -> list[str]:
    """The children of ``path``; none when the server reaped it (or it never was)."""
    try:
        return client.get_children(path)
    except NoNodeError:
        return []
