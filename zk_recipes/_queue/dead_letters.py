"""The dead letters of a queue: items whose consumer failed ``max_attempts`` times.

They wait under ``<path>-dead/<item name>`` (``retrying.py``), each the
item's node as it was, with the count of attempts and the last error in its
trailer (``items.py``). Listed, put back (a new node in the queue, with the
same name prefix: priority, due time and id kept, and no attempts counted)
or dropped here; ``zk-recipes queue dead ...`` does the same from a shell.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

from zk_recipes import _paths
from zk_recipes._client.client import ZkClient
from zk_recipes._errors import NoNodeError, TransactionFailedError, TransactionOutcomeUnknown
from zk_recipes._queue.items import CorruptedItemError, from_bytes, split, to_bytes
from zk_recipes._types import CreateMode

#: The dead letters' directory beside a queue's.
SUFFIX = "-dead"


@dataclasses.dataclass(frozen=True)
class DeadLetter:
    """One item set aside after its consumer failed on it ``attempts`` times."""

    #: The node's name (the item's name in the queue).
    name: str
    #: Its node, ``<queue path>-dead/<name>``.
    path: str
    #: Failed attempts, and the last error (``TypeName: message``).
    attempts: int
    last_error: str
    #: The node's items, as bytes (a ``put_multi`` node holds several).
    items: tuple[bytes, ...]


def dead_letters(client: ZkClient, path: str) -> list[DeadLetter]:
    """The dead letters of the queue at ``path``, oldest first (unparsable nodes skipped)."""
    directory = path + SUFFIX
    try:
        names = client.retry(lambda: client.get_children(directory))
    except NoNodeError:
        return []
    replies = [(name, client.get_async(_paths.join(directory, name))) for name in names]
    found: list[DeadLetter] = []
    for name, reply in replies:
        try:
            data, _stat = reply.result(client.settings.connection_timeout)
            body, attempts, error = split(data)
            items = tuple(from_bytes(body))
        except (NoNodeError, CorruptedItemError):
            continue
        found.append(DeadLetter(name, _paths.join(directory, name), attempts, error, items))
    return sorted(found, key=lambda letter: letter.name[-10:])


def requeue(client: ZkClient, path: str, names: Iterable[str] | None = None) -> int:
    """Put dead letters back into the queue (all, or those ``names``); how many were put back.

    Each is one transaction: a new node in the queue with the letter's
    items, its name's prefix kept and no attempts counted, and the letter's
    delete. A lost reply is settled by the letter: gone, it was put back.
    """
    wanted = None if names is None else set(names)
    moved = 0
    for letter in dead_letters(client, path):
        if wanted is not None and letter.name not in wanted:
            continue
        body = to_bytes(list(letter.items))
        # Its name's prefix kept (priority, due time, id); Curator's requeue keeps only the
        # id queue's (CURATOR-224).
        prefix = letter.name[:-10] if len(letter.name) > 10 else "queue-"
        for _try in range(2):
            tx = client.transaction()
            tx.create(_paths.join(path, prefix), body, mode=CreateMode.PERSISTENT_SEQUENTIAL)
            tx.delete(letter.path)
            try:
                tx.commit(stats=False)
            except TransactionFailedError as exc:
                if exc.index == 1:
                    break  # requeued or dropped by someone else meanwhile
                raise
            except TransactionOutcomeUnknown:
                if client.retry(functools.partial(client.exists, letter.path)) is not None:
                    continue  # not applied: the letter is still there
            moved += 1
            break
    return moved


def purge(client: ZkClient, path: str, names: Iterable[str] | None = None) -> int:
    """Delete dead letters (all, or those ``names``); how many were deleted."""
    wanted = None if names is None else set(names)
    deleted = 0
    for letter in dead_letters(client, path):
        if wanted is None or letter.name in wanted:
            try:
                client.retry(functools.partial(_delete, client, letter.path))
            except NoNodeError:
                continue
            deleted += 1
    return deleted


def _delete(client: ZkClient, path: str) -> None:
    client.delete_async(path).result(client.settings.connection_timeout)
