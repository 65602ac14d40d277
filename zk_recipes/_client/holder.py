"""The write-time check of a write made as a node's holder (``kazoo/bound.py`` applies it).

A node with a fixed path is not told from the next holder's by its path and
version: once the session that made it has ended, the server deletes it and
the next holder's node at that path starts at version 0 again. So a write
as its holder (``ZkClient.transaction(session=)``, ``set``, ``delete``) goes
out only while that session is both the client's live session (its loss
epoch has not moved: the tracker's LOST, declared or told) and the
connection's (kazoo may be on a new session before the tracker hears of it).
"""

from __future__ import annotations

from zk_recipes._client.kazoo import KazooConnection
from zk_recipes._client.kazoo.bound import Still
from zk_recipes._client.session import SessionTracker
from zk_recipes._errors import HolderSessionLost


def holder_check(tracker: SessionTracker, session_id: int, conn: KazooConnection) -> Still:
    """True while ``session_id`` is the client's live session and ``conn``'s.

    ``HolderSessionLost`` now when it already is not: nothing is sent.
    """
    epoch = tracker.epoch_of(session_id)
    if epoch is None:
        raise HolderSessionLost(
            f"session {session_id:#x}, which made the node, is not this client's live "
            "session any more: the write made as its holder was not sent"
        )

    def still() -> bool:
        return tracker.epoch == epoch and conn.session_id == session_id

    return still
