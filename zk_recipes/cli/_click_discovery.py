"""The discovery commands: ``announce`` (an instance while a command runs) and ``services``.

Added by ``add_click_commands`` to the ``zk-recipes`` group and ``flask zk``,
with the same settings, connection and exit codes as ``lock``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from zk_recipes import ServiceInstance, ServiceType
from zk_recipes.cli._announced import run_announced
from zk_recipes.cli._arguments import check_path
from zk_recipes.cli._click_shared import (
    BadArgument,
    ConfigOf,
    Seconds,
    check_argument,
    connected,
    json_option,
)
from zk_recipes.cli._reports import print_services


def add_discovery_commands(
    add: Callable[[Callable[..., Any]], click.Command], config_of: ConfigOf
) -> None:
    """Add announce and services through ``add`` (which fills the help's facts)."""

    @add
    @click.argument("name")
    @click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
    @click.option("--port", type=click.IntRange(0, 65535), help="The port COMMAND listens on.")
    @click.option("--ssl-port", type=click.IntRange(0, 65535), help="Its TLS port.")
    @click.option(
        "--address", help="Where to reach it. Default: this host's first non-loopback IPv4."
    )
    @click.option("--id", "instance_id", help="The instance id. Default: a random UUID.")
    @click.option(
        "--payload",
        metavar="JSON",
        help='JSON: a string, number, or an object starting with "@class" (the Java class '
        "a Java reader reads it as).",
    )
    @click.option("--uri-spec", metavar="TEMPLATE", help="e.g. '{scheme}://{address}:{port}'.")
    @click.option(
        "--type",
        "service_type",
        type=click.Choice(["dynamic", "static", "permanent"], case_sensitive=False),
        default="dynamic",
        show_default=True,
        help="dynamic: an ephemeral node.",
    )
    @click.option(
        "--base-path", default="/services", show_default=True, help="Where services live."
    )
    @click.option(
        "--grace",
        type=Seconds(),
        metavar="SECONDS",
        help="When COMMAND ends, what it left in its process group gets SIGTERM, then "
        "SIGKILL after this long. Default: as lock's.",
    )
    @click.pass_context
    def announce(
        ctx: click.Context,
        name: str,
        command: tuple[str, ...],
        port: int | None,
        ssl_port: int | None,
        address: str | None,
        instance_id: str | None,
        payload: str | None,
        uri_spec: str | None,
        service_type: str,
        base_path: str,
        grace: float | None,
    ) -> None:
        """Run COMMAND with an instance of service NAME registered, exactly while it runs.

        \b
        The instance (curator-x-discovery's layout and JSON under --base-path, so
        Curator's ServiceDiscovery, ServiceCache and ServiceProvider see it) is
        registered as COMMAND starts and unregistered the moment it ends. COMMAND
        runs in a process group of its own; SIGINT, SIGTERM and SIGHUP are passed
        on, and if this process dies, even by kill -9, the group is stopped and
        the node goes with the session. ZooKeeper unreachable: exit {UNAVAILABLE};
        an instance id registered by another process: exit {CONFIG}.

        \b
        Examples:
          {PROG} announce orders --port 8080 -- gunicorn app:app -b 0.0.0.0:8080
          {PROG} announce orders --port 80 --uri-spec '{{scheme}}://{{address}}:{{port}}' -- ./s
        """
        kwargs: dict[str, object] = {
            "port": port,
            "ssl_port": ssl_port,
            "service_type": ServiceType(service_type.upper()),
        }
        if address is not None:
            kwargs["address"] = address
        if instance_id is not None:
            kwargs["id"] = instance_id
        if uri_spec is not None:
            kwargs["uri_spec"] = uri_spec
        if payload is not None:
            try:
                kwargs["payload"] = json.loads(payload)
            except ValueError as exc:
                raise BadArgument(f"--payload is not JSON: {exc}") from None
        instance: list[ServiceInstance] = []
        check_argument(lambda: instance.append(ServiceInstance(name=name, **kwargs)))  # type: ignore[arg-type]
        check_argument(lambda: check_path(base_path, "--base-path", example=""))
        with connected(config_of, ctx) as (client, _config):
            code = run_announced(client, instance[0], command, base_path=base_path, grace=grace)
        sys.exit(code)

    @add
    @click.argument("name", required=False)
    @click.option(
        "--base-path", default="/services", show_default=True, help="Where services live."
    )
    @json_option
    @click.pass_context
    def services(ctx: click.Context, name: str | None, base_path: str, as_json: bool) -> None:
        """List the services under --base-path, or the instances of NAME (Curator's too).

        \b
        Examples:
          {PROG} services
          {PROG} services orders --json | jq '.orders[].port'
        """
        check_argument(lambda: check_path(base_path, "--base-path", example=""))
        with connected(config_of, ctx, at_once=True) as (client, _config):
            code = print_services(client, base_path, name, as_json=as_json)
        sys.exit(code)
