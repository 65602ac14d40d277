"""Writes bound to the session of a node's holder: decided at the moment they would be written.

A recipe that writes "as the holder" of a node (a queue consumer's commit
and its claim's delete, a registered instance's update, a persistent
node's data) must send that write only on the session that made the node:
once that session has ended, the node at that path may be someone else's,
and a fixed path with version 0 says nothing about whose it is (review 3's
Q1: a consumer on a new session committed through the next claimant's
claim).

Checking the session before handing a request over is not enough: a
request waits in kazoo's queue while the connection is down, and the
connection may come back on a new session before it is written. So the
check is made where the request is written, by whoever writes it: the
calling thread in a direct send (under the senders' lock, the socket of a
connection whose handshake is over) or kazoo's connection thread for a
queued one (``hooks._send_request``, under the same lock). A request whose
session is not the holder's any more is not written at all: its result
fails with ``HolderSessionLost`` and the wake-up byte it was queued with is
read back. Once written on the holder's session, the server runs it under
that session or, if the session has expired there, refuses it: either way
never under another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zk_recipes._errors import HolderSessionLost

#: True while the holder's session is still the connection's (and the client's) session.
Still = Callable[[], bool]


class Bound:
    """``request``, to be written only while ``still()``: kazoo reads it as the request itself."""

    __slots__ = ("path", "request", "still", "type")

    def __init__(self, request: Any, still: Still, path: str) -> None:
        self.request = request
        self.still = still
        self.type = request.type
        self.path = path

    def serialize(self) -> Any:
        return self.request.serialize()

    def deserialize(self, buffer: bytes, offset: int) -> Any:
        return self.request.deserialize(buffer, offset)

    def __repr__(self) -> str:
        return f"Bound({self.request!r})"


def refused(request: Any, result: Any) -> bool:
    """True (``result`` failed, nothing to write) for a bound request whose session ended."""
    if type(request) is not Bound or request.still():
        return False
    result.set_exception(
        HolderSessionLost(
            f"{request.path}: the session that made the node is no longer this client's "
            "session, so the write made as its holder was not sent (the node there may be "
            "someone else's now)"
        )
    )
    return True
