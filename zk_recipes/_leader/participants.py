"""What the two elections share: who takes part, and which states end leadership.

``Participant`` is one candidate as ``participants()`` reports it (Curator's
Participant: the id is the node's data as UTF-8, the first candidate whose
node still exists leads). ``ErrorPolicy`` is Curator's
ConnectionStateErrorPolicy: STANDARD gives leadership up on SUSPENDED,
SESSION only on LOST.
"""

from __future__ import annotations

import dataclasses
import enum

from zk_recipes._internals.contenders import ContenderQueue
from zk_recipes._internals.holding import read_nodes


class ErrorPolicy(enum.Enum):
    """Which connection states end leadership (Curator's ConnectionStateErrorPolicy)."""

    #: SUSPENDED and LOST (Curator's StandardConnectionStateErrorPolicy).
    STANDARD = "STANDARD"
    #: LOST only (Curator's SessionConnectionStateErrorPolicy). The client declares
    #: LOST before the server can expire the session, so a partitioned leader
    #: still steps down before anybody else can be elected.
    SESSION = "SESSION"


@dataclasses.dataclass(frozen=True)
class Participant:
    """One candidate of an election, as ``participants()`` reports it."""

    #: The candidate's identifier (its node's data as UTF-8; Curator's ``getId()``).
    id: str
    #: True for the first candidate whose node still exists (Curator's rule).
    is_leader: bool
    #: The candidate's node, relative to the client's namespace.
    node: str


def read_participants(queue: ContenderQueue) -> list[Participant]:
    """Every candidate in queue order, reads pipelined; the first whose node still exists leads."""
    paths = [queue.node_path(name) for name in queue.participants()]
    return [
        Participant(data.decode("utf-8", "replace"), index == 0, path)
        for index, (path, data) in enumerate(read_nodes(queue.client, paths))
    ]
