"""What the Celery tests share beyond the public harness (``zk_recipes_celery.testing``)."""

from __future__ import annotations

from zk_recipes import ZkClient
from zk_recipes_celery.testing import CeleryProcess, Record

#: Session timeout the worker tests give their Celery processes (``ZK_SESSION_TIMEOUT``):
#: short, since the kill -9 tests wait for it to expire.
SESSION_TIMEOUT = 3.0

#: The beat election of the test apps (``Celery("proj")``: the beat name is the app's).
ELECTION = "/celery/beat/proj"


def times(records: list[Record], task: str, start: float, end: float = float("inf")) -> list[float]:
    """When ``task`` ran, from the records, within [start, end)."""
    return sorted(r["t"] for r in records if r["task"] == task and start <= r["t"] < end)


def leader_pid(client: ZkClient) -> int:
    """The pid of the beat that leads the election (its node's data is ``host:pid``)."""
    nodes = sorted(client.get_children(ELECTION), key=lambda n: n.rsplit("-", 1)[-1])
    data, _ = client.get(f"{ELECTION}/{nodes[0]}")
    return int(data.decode().rsplit(":", 1)[1])


def by_pid(processes: list[CeleryProcess], pid: int) -> CeleryProcess:
    return next(p for p in processes if p.pid == pid)
