"""A queue directory's size, against what a Java peer can list.

A getChildren reply must fit the client's jute.maxbuffer (1 MB by default in
Java): about 52,000 ``queue-`` names. Past that, Curator peers cannot list
the queue at all (Curator's TN4), so a queue nearing it says so, once a
minute, in the log of whoever lists it.
"""

from __future__ import annotations

import logging
import time

from zk_recipes._queue.taking import PREFIX

log = logging.getLogger("zk_recipes.queue")

#: How many ``queue-<seq10>`` names fit a 1 MB getChildren reply (4 bytes of length each).
JAVA_LIST_LIMIT = (1024 * 1024 - 1) // (4 + len(PREFIX) + 10)
#: Where the warning starts: 80 % of that.
WARN_CHILDREN = JAVA_LIST_LIMIT * 8 // 10


class SizeWarning:
    """One queue's warning as its directory nears ``JAVA_LIST_LIMIT`` (once a minute at most)."""

    def __init__(self) -> None:
        self._warned_at = -1e9

    def check(self, path: str, names: list[str]) -> None:
        if len(names) < WARN_CHILDREN:
            return
        now = time.monotonic()
        if now - self._warned_at < 60.0:
            return
        self._warned_at = now
        log.warning(
            "the queue %s holds %d nodes: near the ~%d a Java peer can list with the default "
            "1 MB jute.maxbuffer; consume faster, put_multi, or shard the queue",
            path,
            len(names),
            JAVA_LIST_LIMIT,
        )
