"""What the admin's ZooKeeper page shows: each alias's connection and who holds what.

Read on every call, nothing cached: the page is for looking at the ensemble
now. Per alias, in ``aliases()`` order ("default" first): the connection
(``zk_recipes.frameworks.connection_report`` of the alias's process client),
every server of the ensemble as it answers (``ensemble_server_rows``) and
every lock, semaphore and election under the namespace's root
(``zk_recipes.holders(client, "/")``), holders first, then the queue, as
the rows ``zk_recipes.frameworks`` makes for every status page (Flask's too).

Failure stays inside its alias: an ensemble that does not answer within
``CONNECT_SECONDS`` (or the alias's shorter ``CONNECTION_TIMEOUT``), wrong
settings or a read that fails give that alias an ``error`` and the page
still renders. Values are plain text; the template escapes them (owner data
is whatever a process wrote).
"""

from __future__ import annotations

import dataclasses

from zk_recipes import ConfigurationError, ZkRecipesError, holders
from zk_recipes.frameworks import (
    RecipeRow,
    connection_report,
    connection_rows,
    ensemble_server_rows,
    recipe_rows,
    spaced_hosts,
)
from zk_recipes_django import _clients, _settings

#: The longest the page waits for one alias's connection.
CONNECT_SECONDS = 3.0


@dataclasses.dataclass(frozen=True)
class AliasStatus:
    alias: str
    #: (label, value) rows about the connection, in display order.
    connection: tuple[tuple[str, str], ...]
    recipes: tuple[RecipeRow, ...] = ()
    #: Why the alias could not be read; None when it was.
    error: str | None = None
    #: Every server of the ensemble as it answered: a header, then a row per server.
    ensemble: tuple[tuple[str, ...], ...] = ()


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
            [row for row in connection_rows(connection_report(current)) if row[0] != "state"]
            if current is not None
            else [("hosts", spaced_hosts(settings.hosts))]
        )
        return AliasStatus(alias, (("state", "not connected"), *known), error=str(exc))
    report = connection_report(client)
    rows, servers = connection_rows(report), tuple(ensemble_server_rows(report))
    try:
        found = holders(client, "/")
    except ZkRecipesError as exc:
        return AliasStatus(
            alias, rows, error=f"reading the holders failed: {exc}", ensemble=servers
        )
    return AliasStatus(alias, rows, recipe_rows(found), ensemble=servers)
