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
from zk_recipes.frameworks import (
    ADMIN_PORT,
    AdminPorts,
    connection_report,
    connection_rows,
    ensemble_report,
    ensemble_rows,
)

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


def print_ensemble(
    client: ZkClient,
    *,
    as_json: bool = False,
    out: TextIO | None = None,
    admin_ports: AdminPorts = ADMIN_PORT,
) -> int:
    """Print every server of the ensemble; 0 when a quorum answers, else UNAVAILABLE."""
    out = sys.stdout if out is None else out
    report = ensemble_report(client, admin_ports=admin_ports)
    if as_json:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        if report["followed"]:
            out.write(f"the ensemble's config version {report['config_version']} (followed)\n")
        else:
            out.write("the configured hosts (the ensemble's own config is not followed)\n")
        rows = ensemble_rows(report)
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
            out.write("\n")
        if report["problem"]:
            out.write(f"{report['problem']}\n")
    out.flush()
    return 0 if report["quorum"] else ExitCode.UNAVAILABLE


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


def print_services(
    client: ZkClient,
    base_path: str,
    name: str | None = None,
    *,
    as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """Print the services under ``base_path`` (or the instances of ``name``), Java's too; 0."""
    out = sys.stdout if out is None else out
    discovery = zk_recipes.ServiceDiscovery(client, base_path)
    names = [name] if name is not None else discovery.query_for_names()
    found = {service: discovery.query_for_instances(service) for service in names}
    if as_json:
        document = {
            service: [json.loads(instance.to_json()) for instance in instances]
            for service, instances in found.items()
        }
        out.write(json.dumps(document, indent=2) + "\n")
    elif not found:
        out.write(f"no services under {base_path}\n")
    else:
        for service, instances in found.items():
            out.write(f"{service}: {len(instances)} instance{'s' * (len(instances) != 1)}\n")
            for instance in instances:
                port = "-" if instance.port is None else instance.port
                where = f"{instance.address or '-'}:{port}"
                ssl = f" ssl {instance.ssl_port}" if instance.ssl_port is not None else ""
                off = "" if instance.enabled else " (disabled)"
                uri = f"  {instance.build_uri()}" if instance.uri_spec is not None else ""
                out.write(
                    f"  {instance.id}  {where}{ssl}  {instance.service_type.value}{off}{uri}\n"
                )
    out.flush()
    return 0
