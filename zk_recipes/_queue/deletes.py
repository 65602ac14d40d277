"""Deleting a queue item that was read: whose it is when the delete's reply was lost.

Both queues take an item by reading it, then deleting it; the delete decides
who has it. It succeeds: ours. NoNode on the first try: another consumer
took it. BadVersion: it changed since we read it, so not the item we read.
The connection (or the session) goes before the reply: the delete is sent
again once connected, and NoNode then cannot tell our first delete from
another consumer's: **the item is delivered** (at-least-once for that one
case, logged). Curator takes NoNode there for "another consumer had it",
and the item is gone for everyone.
"""

from __future__ import annotations

import logging
import time

from zk_recipes._client.client import ZkClient
from zk_recipes._client.steps import Reply, Steps, run_blocking
from zk_recipes._errors import (
    BadVersionError,
    ConnectionLostError,
    NoNodeError,
    OperationTimeoutError,
    SessionLost,
)
from zk_recipes._internals.waits import WaitConnected

log = logging.getLogger("zk_recipes.queue")


def delete_taken(client: ZkClient, item: str, version: int = -1, *, sent: bool = False) -> bool:
    """Delete ``item`` (at ``version``); True when it is ours to deliver.

    ``sent``: a delete of it went out already and its reply was lost.
    """
    return run_blocking(delete_taken_steps(client, item, version, sent=sent))


def delete_taken_steps(
    client: ZkClient, item: str, version: int = -1, *, sent: bool = False
) -> Steps[bool]:
    """``delete_taken`` as steps (the asyncio queues await them)."""
    lost = sent
    wait = client.settings.connection_timeout
    deadline = time.monotonic() + 2 * wait
    while True:
        try:
            yield Reply(client.delete_async(item, version), wait)
            return True
        except NoNodeError:
            if lost:
                log.info(
                    "queue item %s: the reply to its delete was lost and it is gone: "
                    "delivered (it may have been another consumer's too)",
                    item,
                )
            return lost
        except BadVersionError:
            return False  # changed since we read it: not the item we read
        except (ConnectionLostError, OperationTimeoutError, SessionLost):
            lost = True
            if time.monotonic() > deadline:
                raise
        yield WaitConnected(client, max(0.0, deadline - time.monotonic()))
