"""What the admin's ZooKeeper page shows: each alias's connection and who holds what.

Read on every call, nothing cached: the page is for looking at the ensemble
now. Per alias, in ``aliases()`` order ("default" first): the connection
(``zk_recipes.cli.connection_report`` of the alias's process client) and
every lock, semaphore and election under the namespace's root
(``zk_recipes.holders(client, "/")``), holders first, then the queue.

Failure stays inside its alias: an ensemble that does not answer within
``CONNECT_SECONDS`` (or the alias's shorter ``CONNECTION_TIMEOUT``), wrong
settings or a read that fails give that alias an ``error`` and the page
still renders. Values are plain text; the template escapes them (owner data
is whatever a process wrote).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Sequence
from typing import Any

from zk_recipes import ConfigurationError, QueuedNode, RecipeHolders, ZkRecipesError, holders
from zk_recipes.cli import connection_report
from zk_recipes_django import _clients, _settings

#: The longest the page waits for one alias's connection.
CONNECT_SECONDS = 3.0


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
    path: str
    kind: str
    nodes: tuple[NodeRow, ...]


@dataclasses.dataclass(frozen=True)
class AliasStatus:
    alias: str
    #: (label, value) rows about the connection, in display order.
    connection: tuple[tuple[str, str], ...]
    recipes: tuple[RecipeRow, ...] = ()
    #: Why the alias could not be read; None when it was.
    error: str | None = None


def read_all() -> list[AliasStatus]:
    """Every alias of ``ZK_RECIPES``; SettingsError when the setting itself is unusable."""
    return [read_alias(alias) for alias in _settings.aliases()]


def read_alias(alias: str) -> AliasStatus:
    """One alias: its connection and its recipes, or what went wrong."""
    try:
        settings = _settings.config(alias).client
    except ConfigurationError as exc:
        return AliasStatus(alias, (), error=str(exc))
    bound = min(CONNECT_SECONDS, settings.connection_timeout)
    try:
        client = _clients.get_client(alias, timeout=bound)
    except ZkRecipesError as exc:
        # What the alias's client knows, if one was made; no state: it has none yet.
        current = _clients.current_client(alias)
        known = (
            [row for row in _connection_rows(connection_report(current)) if row[0] != "state"]
            if current is not None
            else [("hosts", _spaced(settings.hosts))]
        )
        return AliasStatus(alias, (("state", "not connected"), *known), error=str(exc))
    rows = _connection_rows(connection_report(client))
    try:
        found = holders(client, "/")
    except ZkRecipesError as exc:
        return AliasStatus(alias, rows, error=f"reading the holders failed: {exc}")
    now = datetime.datetime.now(datetime.timezone.utc)
    return AliasStatus(alias, rows, tuple(_recipe_row(recipe, now) for recipe in found))


def _connection_rows(report: dict[str, Any]) -> tuple[tuple[str, str], ...]:
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
        ("hosts", _spaced(str(report["hosts"]))),
        ("namespace", str(report["namespace"] or "(none)")),
        ("connected to", str(report["connected_to"] or "-")),
        ("session", str(report["session_id"] or "-")),
        ("session timeout", timeout),
        ("server", described),
    )


def _spaced(hosts: str) -> str:
    """``zk1:2181, zk2:2181``: a long ensemble wraps between servers, not inside one."""
    return ", ".join(host.strip() for host in hosts.split(","))


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
        age=_age((now - since).total_seconds()),
        fencing_token=node.fencing_token,
        session_id=f"{node.session_id:#x}",
    )


def _age(seconds: float) -> str:
    """``12s``, ``3m``, ``5h``, ``2d`` (a clock behind ours reads as 0s)."""
    whole = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size:
            return f"{whole // size}{unit}"
    return f"{whole}s"
