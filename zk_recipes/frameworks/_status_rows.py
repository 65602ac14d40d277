"""The status pages' rows: the connection report and the holders, as rows to render.

Django's admin page and Flask's status blueprint show the same two tables:
the connection (``connection_rows``: label and value, from
``connection_report``) and every recipe under a path with its queue
(``recipe_rows``: from ``zk_recipes.holders``, holders first, then the
waiting). Values are plain text; the pages' templates escape them (owner
data is whatever a process wrote).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Sequence
from typing import Any

from zk_recipes import QueuedNode, RecipeHolders


@dataclasses.dataclass(frozen=True)
class NodeRow:
    """One contender node of a recipe, as a table row."""

    #: 1-based place in the recipe's queue (holders first).
    position: int
    #: "holder" or "waiting", with a read-write lock's mode: "holder (read)".
    role: str
    holding: bool
    #: ``host:pid`` from our owner data, else the node's data (Curator: an IP address).
    owner: str
    thread: str
    #: The recipe's identifier (a Celery task id, an election participant's id).
    identifier: str
    since: datetime.datetime
    #: How long ago ``since`` was, ``12s`` / ``3m`` / ``5h`` / ``2d``.
    age: str
    fencing_token: int
    session_id: str


@dataclasses.dataclass(frozen=True)
class RecipeRow:
    """One recipe (a lock, a semaphore, an election) and its queue, as table rows."""

    path: str
    kind: str
    nodes: tuple[NodeRow, ...]


def connection_rows(report: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(label, value) rows of a ``connection_report``, in display order."""
    negotiated = report["negotiated_session_timeout"]
    timeout = f"{report['session_timeout']:g}s requested"
    if negotiated:
        timeout = f"{negotiated:g}s negotiated ({timeout})"
    server: dict[str, Any] = report["server"] or {}
    if "error" in server:
        described = str(server["error"])
    elif server:
        described = f"ZooKeeper {server.get('version', '?')}, mode {server.get('mode', '?')}"
    else:
        described = "-"
    return (
        ("state", str(report["state"])),
        ("hosts", spaced_hosts(str(report["hosts"]))),
        ("namespace", str(report["namespace"] or "(none)")),
        ("connected to", str(report["connected_to"] or "-")),
        ("session", str(report["session_id"] or "-")),
        ("session timeout", timeout),
        ("server", described),
        ("ensemble", _ensemble(report.get("ensemble"))),
        ("announced", ", ".join(report.get("services") or ()) or "-"),
        ("queues", _queues(report.get("queues") or [])),
    )


def _ensemble(ensemble: dict[str, Any] | None) -> str:
    """``config 100000003 (followed): 10.0.0.4:2181 (participant, leader), ...``."""
    if not ensemble:
        return "not followed (the configured hosts)"
    where = f"config {ensemble['version']}" if ensemble.get("followed") else "configured hosts"
    if ensemble.get("quorum") is False:
        where += ", NO QUORUM"
    return f"{where}: " + ", ".join(ensemble["servers"])


def _queues(queues: list[dict[str, Any]]) -> str:
    """``/jobs: 12 items, 1 claimed (one in hand), 2 dead``, per queue this process has open."""
    said = []
    for queue in queues:
        if "error" in queue:
            said.append(f"{queue['path']}: {queue['error']}")
            continue
        text = f"{queue['path']}: {queue.get('items', '?')} items"
        if "claimed" in queue:
            text += f", {queue['claimed']} claimed"
        if queue.get("in_progress"):
            text += " (one in hand)"
        if queue.get("retrying"):
            text += f", {queue['retrying']} to try again"
        if queue.get("dead"):
            text += f", {queue['dead']} dead"
        said.append(text)
    return "; ".join(said) or "-"


def spaced_hosts(hosts: str) -> str:
    """``zk1:2181, zk2:2181``: a long ensemble wraps between servers, not inside one."""
    return ", ".join(host.strip() for host in hosts.split(","))


def recipe_rows(
    recipes: Iterable[RecipeHolders], now: datetime.datetime | None = None
) -> tuple[RecipeRow, ...]:
    """Rows of ``zk_recipes.holders(...)``; ages are counted to ``now`` (default: now, UTC)."""
    if now is None:
        now = datetime.datetime.now(datetime.timezone.utc)
    return tuple(_recipe_row(recipe, now) for recipe in recipes)


def _recipe_row(recipe: RecipeHolders, now: datetime.datetime) -> RecipeRow:
    queue: Sequence[QueuedNode] = (*recipe.holders, *recipe.waiting)
    return RecipeRow(
        recipe.path,
        recipe.kind,
        tuple(_node_row(node, place, now) for place, node in enumerate(queue, start=1)),
    )


def _node_row(node: QueuedNode, place: int, now: datetime.datetime) -> NodeRow:
    owner = node.owner
    if owner.host is not None:
        who = owner.host if owner.pid is None else f"{owner.host}:{owner.pid}"
    else:
        # Not our owner JSON: Curator's IP address, or an identifier shown under "id".
        who = (node.data or "") if node.identifier is None else ""
    role = "holder" if node.holding else "waiting"
    since = datetime.datetime.fromtimestamp(node.since, datetime.timezone.utc)
    return NodeRow(
        position=place,
        role=f"{role} ({node.mode})" if node.mode else role,
        holding=node.holding,
        owner=who,
        thread=owner.thread or "",
        identifier=node.identifier or "",
        since=since,
        age=node.age(now.timestamp()),
        fencing_token=node.fencing_token,
        session_id=f"{node.session_id:#x}",
    )
