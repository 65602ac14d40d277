"""What ``status`` and ``holders`` print: the connection, the server, and who holds what.

The data comes from the framework kit's ``connection_report`` and from the
core's ``holders()``; this module only renders it, for people (the status
pages' rows as aligned text, a table) or for programs (``as_json``: one JSON
document on ``out``, stable key names).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

import zk_recipes
from zk_recipes import ConnectionState, ZkClient
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.frameworks import connection_report, connection_rows

_USABLE = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED, ConnectionState.READ_ONLY)


def print_status(client: ZkClient, *, as_json: bool = False, out: TextIO | None = None) -> int:
    """Print the connection report; 0 while connected, ``ExitCode.UNAVAILABLE`` otherwise."""
    out = sys.stdout if out is None else out
    report = connection_report(client)
    if as_json:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        rows = connection_rows(report)
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            out.write(f"{label:<{width}}  {value}\n")
    out.flush()
    return 0 if client.state in _USABLE else ExitCode.UNAVAILABLE


def print_holders(
    client: ZkClient, path: str = "/", *, as_json: bool = False, out: TextIO | None = None
) -> int:
    """Print every lock, lease and election under ``path`` with its holders and queue; 0."""
    out = sys.stdout if out is None else out
    report = zk_recipes.holders(client, path)
    if as_json:
        out.write(json.dumps([recipe.as_dict() for recipe in report], indent=2) + "\n")
    elif not report:
        out.write(f"no locks, leases or elections under {path}\n")
    else:
        table = zk_recipes.holders_table(report)
        out.write(table if table.endswith("\n") else table + "\n")
    out.flush()
    return 0
