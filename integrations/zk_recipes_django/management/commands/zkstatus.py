"""``manage.py zkstatus [--json] [--alias A ...] [--path P]``.

For each alias of ``settings.ZK_RECIPES`` (or those named): the connection
(state, server, session, negotiated session timeout) and every lock, lease
and election under the namespace with its holders and queue (who, since
when, fencing token), from the core's ``zk_recipes.holders``. Exit 0 when
every alias is connected, 69 when one is unreachable, 78 for bad settings.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

import zk_recipes
from zk_recipes import ConfigurationError, ZkRecipesError
from zk_recipes.cli import ExitCode, check_path, print_holders, print_status
from zk_recipes.frameworks import connection_report
from zk_recipes_django import _clients, _settings

#: How long zkstatus waits for each alias's connection.
CONNECT_SECONDS = 5.0


class Command(BaseCommand):  # type: ignore[misc]
    help = "Show the ZooKeeper connection of each alias, and the holders and queues under it."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON, for scripts.")
        parser.add_argument(
            "--alias",
            action="append",
            dest="aliases",
            help="Only this alias of settings.ZK_RECIPES (may be repeated; default: all).",
        )
        parser.add_argument(
            "--path", default="/", help="Where to look for holders (default: the namespace's root)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            names = options["aliases"] or _settings.aliases()
            for alias in names:
                _settings.config(alias)
        except ConfigurationError as exc:
            raise CommandError(str(exc), returncode=ExitCode.CONFIG) from None
        try:
            check_path(options["path"], "--path")
        except ConfigurationError as exc:
            raise CommandError(str(exc), returncode=ExitCode.USAGE) from None
        reports = {alias: self._report(alias, options["path"]) for alias in names}
        if options["json"]:
            self.stdout.write(json.dumps({"aliases": reports}, indent=2))
        else:
            for alias in names:
                self._print(alias, options["path"], reports[alias].get("error"))
        unreachable = sorted(alias for alias, report in reports.items() if "error" in report)
        if unreachable:
            raise CommandError(
                f"ZooKeeper unreachable for {', '.join(unreachable)}",
                returncode=ExitCode.UNAVAILABLE,
            )

    def _report(self, alias: str, path: str) -> dict[str, Any]:
        try:
            # A refused connection or a name that does not resolve answers at once;
            # a server that does not answer gets CONNECT_SECONDS.
            client = _clients.process_client(alias).available(wait=CONNECT_SECONDS)
        except ZkRecipesError as exc:
            return {"hosts": _settings.config(alias).client.hosts, "error": str(exc)}
        return {
            "connection": connection_report(client),
            "holders": [recipe.as_dict() for recipe in zk_recipes.holders(client, path)],
        }

    def _print(self, alias: str, path: str, error: str | None) -> None:
        out = self.stdout
        out.write(self.style.MIGRATE_HEADING(f"ZooKeeper alias {alias!r}"))
        client = _clients.current_client(alias)
        if error is not None or client is None:
            out.write(f"  unreachable: {error or _settings.config(alias).client.hosts}")
            return
        print_status(client, out=out)
        out.write("")
        print_holders(client, path, out=out)
        out.write("")
