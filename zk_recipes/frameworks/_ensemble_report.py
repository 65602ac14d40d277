"""The ensemble as an operator sees it: every server's role, zxid, load and config version.

``ensemble_report(client)`` asks each server of the ensemble the client
follows (``ZkClient.ensemble``; else the configured hosts) with two
four-letter words, side by side: ``srvr`` (mode, zxid, latency, outstanding
requests, connections) and ``conf`` (the config version the server has, from
its ``membership:`` part, ZooKeeper 3.5+). ``quorum`` says whether a majority
of the voting members answered as leader or follower, with one leader.
What ``zk-recipes ensemble`` prints. A server that refuses the words
(``4lw.commands.whitelist``) says so on its row; when every server refuses
them, ``problem`` says what to allow.
"""

from __future__ import annotations

import concurrent.futures
import socket
from typing import Any

from zk_recipes import ZkClient

_SRVR = {
    "Mode": "mode",
    "Zxid": "zxid",
    "Latency min/avg/max": "latency_ms",
    "Outstanding": "outstanding",
    "Connections": "connections",
    "Zookeeper version": "version",
}
_NUMBERS = ("outstanding", "connections")


def _word(host: str, port: int, word: str, timeout: float) -> str:
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(word.encode())
        return b"".join(iter(lambda: sock.recv(65536), b"")).decode("utf-8", "replace")


def _refused(answer: str) -> bool:
    return "not in the whitelist" in answer or "not executed" in answer


def probe_server(host: str, port: int, timeout: float = 2.0) -> dict[str, Any]:
    """One server's row: its ``srvr`` fields and its config version (``conf``), or ``error``."""
    row: dict[str, Any] = {"address": f"[{host}]:{port}" if ":" in host else f"{host}:{port}"}
    try:
        status = _word(host, port, "srvr", timeout)
        conf = _word(host, port, "conf", timeout)
    except OSError as exc:
        return row | {"error": f"no answer ({exc})"}
    if _refused(status):
        return row | {"error": "refuses srvr (4lw.commands.whitelist)", "refused": True}
    for line in status.splitlines():
        label, sep, value = line.partition(":")
        key = _SRVR.get(label.strip())
        if sep and key is not None:
            value = value.strip()
            row[key] = int(value) if key in _NUMBERS and value.isdigit() else value
    if "version" in row:
        row["version"] = str(row["version"]).split("-")[0].split(",")[0]
    if not _refused(conf):
        for line in conf.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "version":
                row["config_version"] = value.strip()
    if "mode" not in row:
        row["error"] = "srvr gave no mode: not serving (no quorum?)"
    return row


def ensemble_report(client: ZkClient, *, timeout: float = 2.0) -> dict[str, Any]:
    """Every server of the ensemble, probed side by side (see the module note)."""
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
        rows = list(pool.map(lambda s: probe_server(s[1], s[2], timeout), listed))
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
            "every server refuses the four-letter words srvr and conf: allow them "
            "(4lw.commands.whitelist=srvr,conf,...) on the servers; this command does not "
            "read the AdminServer"
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
                "<- this process" if s["this_process"] else str(s.get("error", "")),
            )
        )
    return rows
