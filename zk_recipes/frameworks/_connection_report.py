"""A client's connection, session and server as plain data: what status pages and ``status`` show.

``connection_report(client)`` reads what the client knows (state, hosts,
namespace, the server it is connected to, the session and its timeouts) and,
unless told not to, asks that server for its version and mode with the
``srvr`` four-letter word (``server_info``). Faces render it: the CLI's
``status`` as aligned text or JSON, the Django admin page and Flask's status
blueprint as rows (``connection_rows``), health checks as a few keys of it
(``health_report``: what the Flask and Starlette health routes answer).
"""

from __future__ import annotations

from typing import Any

from zk_recipes import ConnectionState, DistributedQueue, ProcessClient, ServiceDiscovery, ZkClient
from zk_recipes.frameworks._ensemble_report import ask_word, ensemble_report, refused, srvr_fields

#: The keys of a health answer taken from ``connection_report``.
HEALTH_KEYS = ("state", "session_id", "negotiated_session_timeout")

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
        answer = ask_word(host, port, "srvr", timeout)
    except OSError as exc:
        return {"error": f"srvr to {host}:{port} failed: {exc}"}
    if refused(answer):
        return {"error": f"the server refuses srvr (4lw.commands.whitelist): {answer.strip()}"}
    return srvr_fields(answer, _SRVR_FIELDS) or {"error": f"srvr to {host}:{port} gave no answer"}


def connection_report(client: ZkClient, *, server: bool = True) -> dict[str, Any]:
    """The client's connection, session and server, as plain data.

    ``server=False`` leaves the server's version and mode out (``"server":
    None``): asking for them is a round trip of its own (``server_info``),
    which a health check that must answer at once does without.
    """
    state = client.state
    address = client.connected_address
    session_id = client.session_id
    # The ensemble: the config the client follows, and (with ``server``) each server's
    # mode as it answers now (ensemble_report), the connected one's row among them.
    ensemble = _ensemble(client, probe=server and address is not None)
    report: dict[str, Any] = {
        "state": state.value if state is not None else "NOT_STARTED",
        "hosts": client.connect_string,
        "namespace": client.namespace or "",
        "connected_to": f"{address[0]}:{address[1]}" if address else None,
        "session_id": f"0x{session_id:x}" if session_id else None,
        "session_timeout": client.settings.session_timeout,
        "negotiated_session_timeout": client.negotiated_session_timeout,
        "server": _server(address, ensemble) if address and server else None,
        "ensemble": ensemble,
        # The instances this process announces with this client (discovery).
        "services": [f"{i.name}/{i.id}" for i in ServiceDiscovery.registered_by(client)],
        # The queues this process has open (a read or two each: not in a health check).
        "queues": DistributedQueue.report(client) if server else None,
    }
    return report


def _server(address: tuple[str, int], ensemble: dict[str, Any] | None) -> dict[str, Any]:
    """The connected server's ``server_info``: its row of the ensemble's probe if it has
    one (no second ``srvr``), else asked now."""
    for row in (ensemble or {}).get("probed") or ():
        if row["this_process"] and "mode" in row and "error" not in row:
            return {key: row[key] for key in _SRVR_FIELDS.values() if key in row}
    return server_info(*address)


def _ensemble(client: ZkClient, *, probe: bool) -> dict[str, Any] | None:
    """The followed config (no I/O), or with ``probe`` every server asked (``ensemble_report``)."""
    if probe:
        report = ensemble_report(client, timeout=1.0)
        return {
            "version": report["config_version"],
            "followed": report["followed"],
            "quorum": report["quorum"],
            "servers": [
                f"{s['address']} ({s['role']}, {s.get('mode') or s.get('error', '?')})"
                for s in report["servers"]
            ],
            # Each server as it answered, for a status page's table (ensemble_server_rows).
            "probed": report["servers"],
        }
    ensemble = client.ensemble
    if ensemble is None:
        return None
    return {
        "version": f"{ensemble.version:x}",
        "followed": True,
        "servers": [f"{s.address} ({s.role})" for s in ensemble.servers],
    }


def health_report(process_client: ProcessClient) -> tuple[int, dict[str, Any]]:
    """A health check's answer for a process's client: (HTTP status, JSON body).

    At once, without I/O: it reads the state of the client the process already
    has and never waits for a connection. With no client yet (or a closed
    one) it starts one in the background and answers 503 ``CONNECTING`` (or
    ``UNREACHABLE`` once an attempt failed); a load balancer's next probe sees
    the result. 200 while CONNECTED or RECONNECTED, 503 while SUSPENDED or
    LOST. Beside ``state``: ``connected`` (requests can be served),
    ``writable`` (connected to a server that takes writes) and ``last_error``
    (``ZkClient.connection_problem``), for monitors that should not compare
    strings.
    """
    client = process_client.current()
    problem = client.connection_problem if client is not None else None
    if client is None or client.is_closed or client.state is None:
        process_client.start_in_background()  # no-op while a start is under way
        body: dict[str, Any] = dict.fromkeys(HEALTH_KEYS)
        body["state"] = "UNREACHABLE" if problem else "CONNECTING"
        connected = writable = False
    else:
        report = connection_report(client, server=False)
        body = {key: report[key] for key in HEALTH_KEYS}
        connected = client.state.is_connected
        writable = connected and client.state is not ConnectionState.READ_ONLY
    body.update(connected=connected, writable=writable, last_error=problem)
    return (200 if connected else 503), body
