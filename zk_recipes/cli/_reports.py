"""What ``status`` and ``holders`` print: the connection, the server, and who holds what.

The data comes from the client and from the core's ``holders()``; this
module only renders it, for people (aligned text, a table) or for programs
(``as_json``: one JSON document on ``out``, stable key names).
"""

from __future__ import annotations

import json
import socket
import sys
from typing import Any, TextIO

import zk_recipes
from zk_recipes import ConnectionState, ZkClient
from zk_recipes.cli._exit_codes import ExitCode

_USABLE = (ConnectionState.CONNECTED, ConnectionState.RECONNECTED, ConnectionState.READ_ONLY)
#: ``srvr`` line label -> our key.
_SRVR_FIELDS = {
    "Zookeeper version": "version",
    "Mode": "mode",
    "Connections": "connections",
    "Outstanding": "outstanding",
    "Zxid": "zxid",
    "Node count": "node_count",
}


def server_info(host: str, port: int, timeout: float = 2.0) -> dict[str, Any]:
    """Version and mode of one server from its ``srvr`` four-letter word.

    Servers allow only the words in ``4lw.commands.whitelist`` (3.5+; ``srvr``
    is in the default list); when it is refused, or the port does not answer
    in ``timeout``, the result says so under ``"error"`` instead.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(b"srvr")
            answer = b"".join(iter(lambda: sock.recv(65536), b"")).decode("utf-8", "replace")
    except OSError as exc:
        return {"error": f"srvr to {host}:{port} failed: {exc}"}
    if "not in the whitelist" in answer or "not executed" in answer:
        return {"error": f"the server refuses srvr (4lw.commands.whitelist): {answer.strip()}"}
    info: dict[str, Any] = {}
    for line in answer.splitlines():
        label, sep, value = line.partition(":")
        key = _SRVR_FIELDS.get(label.strip())
        if sep and key is not None:
            value = value.strip()
            info[key] = int(value) if value.isdigit() else value
    if "version" in info:
        info["version"] = str(info["version"]).split(",")[0].split("-")[0]
    return info or {"error": f"srvr to {host}:{port} gave no answer"}


def connection_report(client: ZkClient, *, server: bool = True) -> dict[str, Any]:
    """The client's connection, session and server, as plain data.

    ``server=False`` leaves the server's version and mode out (``"server":
    None``): asking for them is a round trip of its own (``server_info``),
    which a health check that must answer at once does without.
    """
    state = client.state
    address = client.connected_address
    session_id = client.session_id
    report: dict[str, Any] = {
        "state": state.value if state is not None else "NOT_STARTED",
        "hosts": client.connect_string,
        "namespace": client.namespace or "",
        "connected_to": f"{address[0]}:{address[1]}" if address else None,
        "session_id": f"0x{session_id:x}" if session_id else None,
        "session_timeout": client.settings.session_timeout,
        "negotiated_session_timeout": client.negotiated_session_timeout,
        "server": server_info(*address) if address and server else None,
    }
    return report


def status(client: ZkClient, *, as_json: bool = False, out: TextIO | None = None) -> int:
    """Print the connection report; 0 while connected, ``ExitCode.UNAVAILABLE`` otherwise."""
    out = sys.stdout if out is None else out
    report = connection_report(client)
    if as_json:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        server = report["server"] or {}
        rows = [
            ("state", report["state"]),
            ("hosts", report["hosts"]),
            ("namespace", report["namespace"] or "(none)"),
            ("connected to", report["connected_to"] or "-"),
            ("session", report["session_id"] or "-"),
            (
                "session timeout",
                f"{report['negotiated_session_timeout']:g}s negotiated "
                f"({report['session_timeout']:g}s requested)"
                if report["negotiated_session_timeout"]
                else f"{report['session_timeout']:g}s requested",
            ),
            (
                "server",
                server.get("error")
                or f"ZooKeeper {server.get('version', '?')}, mode {server.get('mode', '?')}",
            ),
        ]
        width = max(len(label) for label, _ in rows)
        for label, value in rows:
            out.write(f"{label:<{width}}  {value}\n")
    out.flush()
    return 0 if client.state in _USABLE else ExitCode.UNAVAILABLE


def holders(
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
