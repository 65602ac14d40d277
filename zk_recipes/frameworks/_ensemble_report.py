"""The ensemble as an operator sees it: every server's role, zxid, load and config version.

``ensemble_report(client)`` asks each server of the ensemble the client
follows (``ZkClient.ensemble``; else the configured hosts) with two
four-letter words, side by side: ``srvr`` (mode, zxid, latency, outstanding
requests, connections) and ``conf`` (the config version the server has, from
its ``membership:`` part, ZooKeeper 3.5+). A server that refuses the words
(``4lw.commands.whitelist``; 3.5+ always allows ``srvr``, not always
``conf``) or does not answer them on its client port (a TLS-only client port,
a firewall) is asked through its AdminServer instead (``GET /commands/srvr``,
JSON: the same fields but the config version, which the AdminServer does not
tell), on ``admin_port`` (ZooKeeper's default 8080, or a port per server).
``quorum`` says whether a majority of the voting members answered as leader
or follower, with one leader. What ``zk-recipes ensemble`` prints. When no
server answers either way, ``problem`` says what to allow.
"""

from __future__ import annotations

import concurrent.futures
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from zk_recipes import ZkClient

#: ``srvr`` line label -> a row's key.
_SRVR = {
    "Mode": "mode",
    "Zxid": "zxid",
    "Latency min/avg/max": "latency_ms",
    "Outstanding": "outstanding",
    "Connections": "connections",
    "Zookeeper version": "version",
}
#: The keys whose values are counts (ints), whichever labels a caller reads.
_NUMBERS = ("outstanding", "connections", "node_count")
#: ZooKeeper's default AdminServer port (``admin.serverPort``).
ADMIN_PORT = 8080
#: A port for every server, or a port per server address (``host:client_port``).
AdminPorts = int | Mapping[str, int] | None


def ask_word(host: str, port: int, word: str, timeout: float) -> str:
    """A four-letter word's whole answer (OSError if the port does not answer in time)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(word.encode())
        return b"".join(iter(lambda: sock.recv(65536), b"")).decode("utf-8", "replace")


def refused(answer: str) -> bool:
    """The server refused the word (``4lw.commands.whitelist``)."""
    return "not in the whitelist" in answer or "not executed" in answer


def short_version(version: str) -> str:
    """``3.8.0`` of ``3.8.0-<commit>, built on <date>``."""
    return version.split(",")[0].split("-")[0]


def srvr_fields(answer: str, labels: Mapping[str, str] = _SRVR) -> dict[str, Any]:
    """The fields of a ``srvr`` answer named in ``labels`` (label -> key), counts as ints."""
    fields: dict[str, Any] = {}
    for line in answer.splitlines():
        label, sep, value = line.partition(":")
        key = labels.get(label.strip())
        if sep and key is not None:
            value = value.strip()
            fields[key] = int(value) if key in _NUMBERS and value.isdigit() else value
    if "version" in fields:
        fields["version"] = short_version(str(fields["version"]))
    return fields


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def probe_server(
    host: str, port: int, timeout: float = 2.0, *, admin_port: int | None = None
) -> dict[str, Any]:
    """One server's row: its ``srvr`` fields and config version (``conf``), or ``error``.

    A server that refuses the words is asked through its AdminServer on
    ``admin_port``, if given (the row's ``source`` says which answered).
    """
    row: dict[str, Any] = {"address": _address(host, port)}
    try:
        status = ask_word(host, port, "srvr", timeout)
        conf = ask_word(host, port, "conf", timeout)
    except OSError as exc:
        if admin_port is not None:
            return _admin_row(row, host, admin_port, timeout, f"no answer on {port} ({exc})")
        return row | {"error": f"no answer ({exc})"}
    if refused(status):  # ZooKeeper 3.5+ always allows srvr; an older or patched server
        if admin_port is not None:
            return _admin_row(row, host, admin_port, timeout, "refuses srvr")
        return row | {"error": "refuses srvr (4lw.commands.whitelist)", "refused": True}
    row["source"] = "4lw"
    row.update(srvr_fields(status))
    if refused(conf):
        row["note"] = "refuses conf (4lw.commands.whitelist): its config version is not known"
    else:
        for line in conf.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "version":
                row["config_version"] = value.strip()
    if "mode" not in row:
        row["error"] = "srvr gave no mode: not serving (no quorum?)"
    return row


def _admin_row(
    row: dict[str, Any], host: str, admin_port: int, timeout: float, why: str
) -> dict[str, Any]:
    """``row`` from the AdminServer's ``srvr`` (JSON), for a server the words did not reach."""
    url = f"http://{_address(host, admin_port)}/commands/srvr"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            answer = json.loads(response.read())
    except (OSError, ValueError) as exc:  # refused, timed out, an HTTP error, not JSON
        return row | {"error": f"{why}, and no AdminServer at {url} ({exc})", "refused": True}
    row["source"] = "admin"
    stats = answer.get("server_stats") if isinstance(answer, dict) else None
    if not isinstance(stats, dict):
        error = answer.get("error") if isinstance(answer, dict) else None
        return row | {"error": f"the AdminServer gave no server stats ({error or answer!r})"}
    row["mode"] = stats.get("server_state", "-")
    zxid = stats.get("last_processed_zxid")
    if isinstance(zxid, int):
        row["zxid"] = hex(zxid)
    latency = [stats.get(k) for k in ("min_latency", "avg_latency", "max_latency")]
    if all(isinstance(v, int | float) for v in latency):
        row["latency_ms"] = "/".join(str(v) for v in latency)
    for key, field in (
        ("outstanding", "outstanding_requests"),
        ("connections", "num_alive_client_connections"),
    ):
        if isinstance(stats.get(field), int):
            row[key] = stats[field]
    if isinstance(answer.get("version"), str):
        row["version"] = short_version(answer["version"])
    return row


def _admin_port_of(admin_ports: AdminPorts, host: str, port: int) -> int | None:
    if admin_ports is None or isinstance(admin_ports, int):
        return admin_ports
    return admin_ports.get(_address(host, port))


def ensemble_report(
    client: ZkClient, *, timeout: float = 2.0, admin_ports: AdminPorts = ADMIN_PORT
) -> dict[str, Any]:
    """Every server of the ensemble, probed side by side (see the module note).

    ``admin_ports``: where a server that refuses the four-letter words has its
    AdminServer (one port for all, a port per ``host:client_port``, or None: not asked).
    """
    ensemble = client.wait_ensemble(timeout)  # the connection's first read, if not in yet
    listed: list[tuple[int | None, str, int, str]] = []
    if ensemble is not None:
        listed = [(s.id, s.host, s.port, s.role) for s in ensemble.servers]
    else:
        for entry in client.connect_string.split(","):
            host, _, port_text = entry.rpartition(":")
            listed.append((None, host.strip("[]"), int(port_text), "participant"))
    address = client.connected_address
    with concurrent.futures.ThreadPoolExecutor(max(1, len(listed))) as pool:
        rows = list(
            pool.map(
                lambda s: probe_server(
                    s[1], s[2], timeout, admin_port=_admin_port_of(admin_ports, s[1], s[2])
                ),
                listed,
            )
        )
    servers = []
    for (myid, host, port, role), row in zip(listed, rows, strict=True):
        here = address is not None and (str(address[0]), int(address[1])) == (host, port)
        servers.append({"id": myid, "role": role, **row, "this_process": here})
    voting = [s for s in servers if s["role"] == "participant"]
    serving = [s for s in voting if s.get("mode") in ("leader", "follower")]
    leaders = [s for s in servers if s.get("mode") == "leader"]
    quorum = len(serving) > len(voting) // 2 and len(leaders) == 1
    problem = None
    if servers and all(s.get("refused") for s in servers):
        problem = (
            "no server answers the four-letter words srvr and conf on its client port and "
            "no AdminServer answers: allow the words (4lw.commands.whitelist=srvr,conf,...) "
            "or name each AdminServer's port (admin.serverPort; --admin-port)"
        )
    elif not quorum:
        problem = (
            f"no quorum answers: {len(serving)} of {len(voting)} voting servers serve, "
            f"{len(leaders)} leader(s)"
        )
    return {
        "followed": ensemble is not None,
        "config_version": f"{ensemble.version:x}" if ensemble is not None else None,
        "connected_to": f"{address[0]}:{address[1]}" if address else None,
        "servers": servers,
        "quorum": quorum,
        "problem": problem,
    }


def ensemble_rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """A table of ``ensemble_report``: a header, then a row per server."""
    rows: list[tuple[str, ...]] = [
        ("id", "address", "role", "mode", "zxid", "latency ms", "outst.", "conns", "config", "")
    ]
    for s in report["servers"]:
        rows.append(
            (
                "-" if s["id"] is None else str(s["id"]),
                s["address"],
                s["role"],
                str(s.get("mode", "-")),
                str(s.get("zxid", "-")),
                str(s.get("latency_ms", "-")),
                str(s.get("outstanding", "-")),
                str(s.get("connections", "-")),
                str(s.get("config_version", "-")),
                "<- this process" if s["this_process"] else str(s.get("error", s.get("note", ""))),
            )
        )
    return rows


def ensemble_server_rows(connection_report: dict[str, Any]) -> list[tuple[str, ...]]:
    """The servers a ``connection_report`` asked (``server=True``), as ``ensemble_rows``
    makes them (a header, then a row per server): a status page's ensemble table.
    Empty when the report did not ask them."""
    ensemble = connection_report.get("ensemble") or {}
    probed = ensemble.get("probed")
    return ensemble_rows({"servers": probed}) if probed else []
