"""A ZooKeeper ensemble on loopback: ``ZooKeeperCluster`` and its members.

Members are full ``_ServerBase`` servers (same fault verbs: stop, kill, pause,
resume, restart); the cluster starts them in parallel, waits for a quorum with
exactly one leader, and finds the member a session is connected to (Curator's
``findConnectionInstance``) with the ``cons`` four-letter word.

With ``quorum_proxies=True`` every link between two members (quorum and
election ports, each direction) goes through a ``TcpProxy`` written into the
member's own config, so ``isolate(member)`` can cut a member off from the rest
of the ensemble while its clients still reach it: a follower cut from the
quorum keeps answering reads and pings until it notices (``syncLimit *
tickTime``), while the leader expires the sessions it no longer hears of.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from zk_recipes import ConfigurationError
from zk_recipes.testing._install import HarnessError, Installation, find_installation
from zk_recipes.testing._membership import Membership
from zk_recipes.testing._process import (
    DEFAULT_JVM_OPTIONS,
    HOST,
    _make_directory,
    _Options,
    _PortTaken,
    _Resources,
    four_letter_word,
    free_ports,
)
from zk_recipes.testing._proxy import TcpProxy
from zk_recipes.testing._server import (
    ZooKeeperServer,
    _ServerBase,
)

log = logging.getLogger("zk_recipes.testing")


class ClusterMember(_ServerBase):
    """One server of a ``ZooKeeperCluster``, with the same verbs as ``ZooKeeperServer``."""

    def __init__(
        self,
        *,
        myid: int,
        ports: tuple[int, int, int],
        peers: Callable[[], dict[str, str]],
        directory: Path,
        options: _Options,
        installation: Installation,
        resources: _Resources,
        role: str = "participant",
        dynamic: bool = False,
    ) -> None:
        #: ``"participant"`` (votes) or ``"observer"``.
        self.role = role
        #: Started for dynamic reconfiguration: the client port is in the server lines.
        self.dynamic = dynamic
        super().__init__(
            name=f"server.{myid}",
            directory=directory,
            ports=ports,
            myid=myid,
            peers=peers,
            options=options,
            installation=installation,
            resources=resources,
        )

    @property
    def server_line(self) -> str:
        """Its line of a dynamic config: ``server.<id>=host:quorum:election:role;host:client``."""
        return (
            f"server.{self.myid}={HOST}:{self.peer_port}:{self.election_port}:{self.role};"
            f"{HOST}:{self.port}"
        )

    def _config(self) -> dict[str, str]:
        config = super()._config()
        if self.dynamic:  # the client address is in the server lines
            config.pop("clientPort", None)
            config.pop("clientPortAddress", None)
        return config


class ZooKeeperCluster(Membership[ClusterMember]):
    """``size`` ZooKeeper servers on loopback forming one quorum (Curator's ``TestingCluster``).

    Takes the same options as ``ZooKeeperServer``; ``init_limit``/``sync_limit``
    default a little higher so a busy 2-core machine does not lose its leader.
    ``admin_server=True``: each server's AdminServer on a port of its own
    (``server.admin_port``), as ``ZooKeeperServer``'s.
    """

    def __init__(
        self,
        size: int = 3,
        *,
        tick_time: float = 0.2,
        min_session_timeout: float = 0.4,
        max_session_timeout: float = 60.0,
        container_check_interval: float = 0.1,
        log_level: str = "WARN",
        extra_config: Mapping[str, str] | None = None,
        jvm_options: tuple[str, ...] = DEFAULT_JVM_OPTIONS,
        data_dir: str | os.PathLike[str] | None = None,
        start_timeout: float = 30.0,
        init_limit: int = 20,
        sync_limit: int = 10,
        installation: Installation | None = None,
        quorum_proxies: bool = False,
        reconfig: bool = False,
        admin_server: bool = False,
    ) -> None:
        if size < 2:
            raise ConfigurationError(
                f"size={size}: an ensemble needs 2+ servers; use ZooKeeperServer"
            )
        extra = dict(extra_config or {})
        if reconfig:
            if quorum_proxies:
                raise ConfigurationError("reconfig=True and quorum_proxies=True do not mix")
            # Reconfiguration by any client of the harness (a real ensemble wants a super user).
            # standaloneEnabled=false: it may shrink to one voter, as ZooKeeper's docs advise.
            extra = {
                "reconfigEnabled": "true",
                "skipACL": "yes",
                "standaloneEnabled": "false",
                **extra,
            }
        #: Started for dynamic reconfiguration (add_server, remove_server, move_server).
        self.reconfig = reconfig
        options = _Options(
            tick_time=tick_time,
            min_session_timeout=min_session_timeout,
            max_session_timeout=max_session_timeout,
            container_check_interval=container_check_interval,
            log_level=log_level,
            extra_config=extra,
            jvm_options=tuple(jvm_options),
            start_timeout=start_timeout,
            init_limit=init_limit,
            sync_limit=sync_limit,
            admin_server=admin_server,
        )
        install = installation or find_installation()
        directory, owned = _make_directory(data_dir)
        self._options, self._install, self._directory = options, install, directory
        self._resources = _Resources(directory if owned else None)
        self._finalizer = weakref.finalize(self, self._resources.release)
        self._owned = owned
        self._started_once = False
        #: (member seeing, member seen) -> proxies (quorum, election) of that link.
        self._links: dict[tuple[int, int], tuple[TcpProxy, TcpProxy]] = {}
        self._quorum_proxies = quorum_proxies
        ports = free_ports(3 * size)
        self.servers: list[ClusterMember] = [
            ClusterMember(
                myid=i + 1,
                ports=(ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]),
                peers=(
                    functools.partial(self._proxied_peer_lines, i + 1)
                    if quorum_proxies
                    else self._peer_lines
                ),
                directory=directory / f"server-{i + 1}",
                options=options,
                installation=install,
                resources=self._resources,
                dynamic=reconfig,
            )
            for i in range(size)
        ]

    def __repr__(self) -> str:
        return f"<ZooKeeperCluster {self.servers!r}>"

    def _peer_lines(self) -> dict[str, str]:
        if self.reconfig:
            return dict(m.server_line.split("=", 1) for m in self.servers)
        return {f"server.{m.myid}": f"{HOST}:{m.peer_port}:{m.election_port}" for m in self.servers}

    def _new_member(self, role: str) -> ClusterMember:
        myid = max(m.myid for m in self.servers) + 1
        client, quorum, election = free_ports(3)
        return ClusterMember(
            myid=myid,
            ports=(client, quorum, election),
            peers=self._peer_lines,
            directory=self._directory / f"server-{myid}",
            options=self._options,
            installation=self._install,
            resources=self._resources,
            role=role,
            dynamic=True,
        )

    def _proxied_peer_lines(self, viewer: int) -> dict[str, str]:
        """Member ``viewer``'s view of the ensemble: itself as it is, the others via proxies."""
        lines = {}
        for member in self.servers:
            if member.myid == viewer:
                lines[f"server.{member.myid}"] = f"{HOST}:{member.peer_port}:{member.election_port}"
            else:
                quorum, election = self._link(viewer, member)
                lines[f"server.{member.myid}"] = f"{HOST}:{quorum.port}:{election.port}"
        return lines

    def _link(self, viewer: int, target: ClusterMember) -> tuple[TcpProxy, TcpProxy]:
        link = self._links.get((viewer, target.myid))
        if link is not None and (link[0].target[1], link[1].target[1]) == (
            target.peer_port,
            target.election_port,
        ):
            return link
        if link is not None:  # the member moved to other ports (a port was taken)
            for proxy in link:
                proxy.close()
        link = (TcpProxy(HOST, target.peer_port), TcpProxy(HOST, target.election_port))
        self._resources.proxies.extend(link)
        self._links[(viewer, target.myid)] = link
        return link

    def isolate(self, member: ClusterMember) -> None:
        """Cut ``member`` off from every other member, both ways, silently (a black hole).

        Its clients still reach it: a follower so cut keeps answering reads and
        pings until it notices (``sync_limit * tick_time``). Needs
        ``quorum_proxies=True``; ``heal_quorum()`` ends it.
        """
        if not self._quorum_proxies:
            raise ConfigurationError(
                "isolate() needs ZooKeeperCluster(quorum_proxies=True): the links between "
                "members must go through proxies to be cut"
            )
        for (viewer, target), link in self._links.items():
            if member.myid in (viewer, target):
                for proxy in link:
                    proxy.blackhole()

    def heal_quorum(self) -> None:
        """Every link between members forwards again (after ``isolate``)."""
        for link in self._links.values():
            for proxy in link:
                proxy.heal()

    @property
    def connect_string(self) -> str:
        return ",".join(m.connect_string for m in self.servers)

    @property
    def quorum_size(self) -> int:
        """A majority of the voting members (observers do not vote)."""
        return sum(m.role == "participant" for m in self.servers) // 2 + 1

    def start(self) -> None:
        """Start every stopped member at once (resume paused ones), then wait for a quorum."""
        if not self._finalizer.alive:
            raise HarnessError(f"{self!r} is closed")
        for member in self.servers:
            if member.is_paused:
                member.resume()
        for attempt in (1, 2):
            members = [m for m in self.servers if not m.is_running]
            try:
                for member in members:
                    member._spawn()
                for member in members:
                    member._await_ready()
            except _PortTaken:
                for member in members:
                    member.kill()
                if self._started_once or attempt == 2:
                    raise
                ports = free_ports(3 * len(self.servers))
                for i, member in enumerate(self.servers):
                    member._set_ports((ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]))
                continue
            except BaseException:
                for member in members:
                    member.kill()
                raise
            self._started_once = True
            self.wait_for_quorum(self.servers[0]._options.start_timeout)
            return

    def stop(self) -> None:
        """Stop every member gracefully."""
        for member in self.servers:
            member.stop()

    def _quorum_problem(self) -> tuple[ClusterMember | None, str]:
        live = [m for m in self.servers if m.is_running and not m.is_paused]
        voting = [m for m in live if m.role == "participant"]
        if len(voting) < self.quorum_size:
            return None, f"only {len(voting)} of {len(self.servers)} servers running and voting"
        leaders = []
        for member in live:
            try:
                mode = member.mode()
            except HarnessError:
                return None, f"{member!r} is not serving"
            if mode == "leader":
                leaders.append(member)
        if len(leaders) != 1:
            return None, f"{len(leaders)} leaders among {live!r}"
        return leaders[0], ""

    def wait_for_quorum(self, timeout: float = 30.0) -> ClusterMember:
        """Wait until every running member serves and exactly one leads; return the leader."""
        deadline = time.monotonic() + timeout
        while True:
            leader, problem = self._quorum_problem()
            if leader is not None:
                return leader
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {m!r} {m.log_path}:\n{m.log_tail(15)}" for m in self.servers
                )
                raise HarnessError(f"no quorum within {timeout} s: {problem}\n{tails}")
            time.sleep(0.05)

    def leader(self) -> ClusterMember:
        """The member that leads right now (``HarnessError`` if none or several)."""
        leader, problem = self._quorum_problem()
        if leader is None:
            raise HarnessError(f"no single leader: {problem}")
        return leader

    def followers(self) -> list[ClusterMember]:
        leader = self.leader()
        return [m for m in self.servers if m is not leader and m.is_running]

    def server_for_session(self, session_id: int) -> ClusterMember | None:
        """The member a client with this session id is connected to, or None."""
        for member in self.servers:
            if member.is_running and not member.is_paused:
                try:
                    if session_id in member.connected_session_ids():
                        return member
                except HarnessError:
                    continue
        return None

    def proxies(self) -> list[TcpProxy]:
        """One new ``TcpProxy`` per member (in ``servers`` order), closed with the cluster."""
        return [member.proxy() for member in self.servers]

    def close(self) -> None:
        """Kill every member (killed when the temp dir is discarded anyway) and clean up."""
        if not self._finalizer.alive:
            return
        for member in self.servers:
            if self._owned:
                member.kill()
            else:
                member.stop()
        self._finalizer()

    def __enter__(self) -> ZooKeeperCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


__all__ = [
    "DEFAULT_JVM_OPTIONS",
    "ClusterMember",
    "ZooKeeperCluster",
    "ZooKeeperServer",
    "four_letter_word",
]
