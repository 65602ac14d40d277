"""The ``ensemble`` commands: the servers as they are, and ``reconfig`` to change them.

``ensemble`` prints every server (``_reports.print_ensemble``); ``ensemble
reconfig --add LINE --remove ID`` changes the membership (ZooKeeper's
dynamic reconfiguration) after checking, with the same probes, that the
change leaves a quorum of serving voters: a change that would not is
refused before anything is sent (the leader would refuse most of them too,
but not one that leaves a quorum on paper of servers that are down).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from zk_recipes import Ensemble, EnsembleConfigError, ZkClient, ZkRecipesError
from zk_recipes.cli._click_shared import CONTEXT, ConfigOf, connected, json_option
from zk_recipes.cli._exit_codes import ExitCode
from zk_recipes.cli._reports import print_ensemble
from zk_recipes.frameworks import ADMIN_PORT, AdminPorts, ensemble_report, probe_server

_SERVING = ("leader", "follower", "observer")


def add_ensemble_commands(
    group: click.Group,
    config_of: ConfigOf,
    filled: dict[str, object],
    decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
) -> None:
    """Add the ``ensemble`` group (and its ``reconfig``) to ``group``."""

    def finish(made: click.Command) -> click.Command:
        made.help = (made.help or "").format(**filled)
        if decorate is not None and made.callback is not None:
            made.callback = decorate(made.callback)
        return made

    @group.group(context_settings=CONTEXT, invoke_without_command=True)
    @json_option
    @click.option(
        "--admin-port",
        "admin_ports",
        multiple=True,
        metavar="PORT|HOST:PORT=PORT",
        callback=_admin_ports,
        help=f"Where a server that refuses the four-letter words has its AdminServer: "
        f"one port for all (default {ADMIN_PORT}), or a server's own "
        "(its client address=the port; repeat it for each).",
    )
    @click.pass_context
    def ensemble(ctx: click.Context, as_json: bool, admin_ports: AdminPorts) -> None:
        """Show every server of the ensemble: role, mode, zxid, latency, load, config version.

        \b
        The servers are those the ensemble's own config names (followed by the
        client), else the configured hosts; each is asked with the srvr and conf
        four-letter words, or through its AdminServer when it refuses them
        (4lw.commands.whitelist; the AdminServer does not tell the config version).
        The server this process is connected to is marked. Exit 0 when a quorum
        answers, {UNAVAILABLE} when it does not or ZooKeeper cannot be reached.
        Examples:
          {PROG} ensemble
          {PROG} ensemble --json | jq '.servers[] | [.address, .mode]'
          {PROG} ensemble --admin-port 9090
          {PROG} ensemble reconfig --add 'server.4=10.0.0.4:2888:3888:participant;2181'
        """
        if ctx.invoked_subcommand is not None:
            return
        with connected(config_of, ctx, at_once=True) as (client, _config):
            code = print_ensemble(client, as_json=as_json, admin_ports=admin_ports)
        sys.exit(code)

    finish(ensemble)

    @ensemble.command(context_settings=CONTEXT)
    @click.option(
        "--add",
        "joining",
        multiple=True,
        metavar="LINE",
        help="A server to add, as its config line: "
        "'server.<id>=<host>:<quorum port>:<election port>[:observer];<client port>'.",
    )
    @click.option("--remove", "leaving", multiple=True, type=int, metavar="ID", help="A server id.")
    @click.pass_context
    def reconfig(ctx: click.Context, joining: tuple[str, ...], leaving: tuple[int, ...]) -> None:
        """Add and remove servers (dynamic reconfiguration), refusing a change with no quorum.

        \b
        Each server to add must run already (started with a config listing the
        members and itself): it is asked first. The servers need
        reconfigEnabled=true, and this client a super user (or skipACL=yes). Exit
        0 when the change is made, {CONFIG} when it is refused (no quorum after it,
        a bad line or id, reconfiguration disabled), {UNAVAILABLE} when ZooKeeper
        cannot be reached.
        """
        if not joining and not leaving:
            raise click.UsageError("give --add LINE and/or --remove ID")
        with connected(config_of, ctx, at_once=True) as (client, _config):
            code = _reconfigure(client, joining, leaving)
        sys.exit(code)

    finish(reconfig)


def _admin_ports(
    _ctx: click.Context, _param: click.Parameter, given: tuple[str, ...]
) -> AdminPorts:
    """``--admin-port``: a port for every server, or ``HOST:PORT=ADMIN_PORT`` for each."""
    if not given:
        return ADMIN_PORT
    if len(given) == 1 and "=" not in given[0]:
        return _port(given[0], given[0])
    ports: dict[str, int] = {}
    for entry in given:
        address, sep, port = entry.rpartition("=")
        if not sep or ":" not in address:
            raise click.BadParameter(
                f"{entry!r}: give one port for all the servers, or each server's as "
                "HOST:CLIENT_PORT=ADMIN_PORT (e.g. 10.0.0.1:2181=8080)"
            )
        ports[address] = _port(port, entry)
    return ports


def _port(text: str, entry: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise click.BadParameter(f"{entry!r}: {text!r} is not a TCP port (1 to 65535)")
    return int(text)


def _refuse(message: str) -> int:
    click.echo(f"refused: {message}", err=True)
    return int(ExitCode.CONFIG)


def _reconfigure(client: ZkClient, joining: tuple[str, ...], leaving: tuple[int, ...]) -> int:
    report = ensemble_report(client)
    if not report["followed"]:
        return _refuse(
            "the ensemble has no dynamic config to change (reconfigEnabled=true on the "
            "servers, with client addresses in their server lines)"
        )
    members = {s["id"]: s for s in report["servers"]}
    added = []
    for line in joining:
        try:
            [server] = Ensemble.from_config(line.encode()).servers
        except (EnsembleConfigError, ValueError) as exc:
            return _refuse(f"--add {line!r}: {exc}")
        if server.id in members:
            return _refuse(f"server.{server.id} is a member already: --remove it first")
        probe = probe_server(server.host, server.port)
        if probe.get("mode") not in _SERVING:
            return _refuse(
                f"server.{server.id} does not serve at {server.address} "
                f"({probe.get('error', probe.get('mode'))}): start it first, with a config "
                "listing the members and itself"
            )
        added.append(server)
    unknown = [i for i in leaving if i not in members]
    if unknown:
        return _refuse(f"no server with id {unknown[0]} in the ensemble ({sorted(members)})")
    voters = [s for i, s in members.items() if s["role"] == "participant" and i not in leaving]
    voters += [{"mode": "follower"} for s in added if s.role == "participant"]
    serving = [s for s in voters if s.get("mode") in ("leader", "follower")]
    if not voters or len(serving) <= len(voters) // 2:
        return _refuse(
            f"after it, {len(serving)} of {len(voters)} voting servers would serve: no quorum"
        )
    try:
        changed = client.reconfig(joining=joining, leaving=leaving)
    except ZkRecipesError as exc:
        return _refuse(f"the ensemble refused it: {exc}")
    click.echo(f"config version {changed.version:x}: {changed.hosts}")
    return 0
