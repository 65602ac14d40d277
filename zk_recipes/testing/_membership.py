"""Changing a running ensemble's membership in tests: add, remove and move servers.

For ``ZooKeeperCluster(reconfig=True)``, whose members run with dynamic
reconfiguration (``reconfigEnabled=true``, client addresses in the server
lines, ``skipACL=yes`` so any client of the test may reconfigure). The steps
are ZooKeeper's own for a live ensemble:

- **add**: a new server starts with a config listing the current members and
  itself; it syncs with the leader as a non-voting member; then
  ``reconfig(joining=[its line])`` makes it a participant (or an observer);
- **remove**: ``reconfig(leaving=[its id])``, then the server is stopped;
- **move**: a server to new ports is a remove and an add under a new id
  (ZooKeeper cannot change a member's quorum ports in place).

Clients that follow the ensemble (``track_ensemble``, on by default) learn
each new membership from ``/zookeeper/config``; a test can replace every
original server and check that its processes never noticed.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from zk_recipes import ConfigurationError, ConnectionLostError, Ensemble, ZkClient


class MemberLike(Protocol):
    """What the verbs use of a member (``_cluster.ClusterMember``; typed here, where the
    cluster's module is not imported: it imports this one)."""

    myid: int
    role: str

    @property
    def port(self) -> int: ...

    @property
    def connect_string(self) -> str: ...

    @property
    def server_line(self) -> str: ...

    @property
    def is_running(self) -> bool: ...

    def _spawn(self) -> None: ...

    def _await_ready(self) -> None: ...

    def stop(self) -> None: ...

    def kill(self) -> None: ...


M = TypeVar("M", bound=MemberLike)


class Membership(Generic[M]):
    """The membership verbs of ``ZooKeeperCluster`` (see the module note)."""

    servers: list[M]
    reconfig: bool

    def _new_member(self, role: str) -> M:
        raise NotImplementedError

    def wait_for_quorum(self, timeout: float = 30.0) -> M:
        raise NotImplementedError

    @property
    def connect_string(self) -> str:
        raise NotImplementedError

    def _require_reconfig(self) -> None:
        if not self.reconfig:
            raise ConfigurationError(
                "changing the membership needs ZooKeeperCluster(reconfig=True): the servers "
                "must run with dynamic reconfiguration"
            )

    def reconfigure(
        self, *, joining: tuple[str, ...] = (), leaving: tuple[int, ...] = ()
    ) -> Ensemble:
        """One ``reconfig`` through a client of members that stay; the new ensemble.

        Removing the leader makes it step down once the change is committed, and
        the ensemble elects again: the reply may be lost on the way. Then the
        config is read back, and the change counts as made if it shows.
        """
        self._require_reconfig()
        staying = [m for m in self.servers if m.is_running and m.myid not in leaving]
        hosts = ",".join(m.connect_string for m in staying)
        for attempt in (1, 2):
            try:
                with ZkClient(hosts, track_ensemble=False, connection_timeout=15.0) as admin:
                    return admin.reconfig(joining=joining, leaving=leaving)
            except ConnectionLostError:
                self.wait_for_quorum()
                current = self._current_ensemble(hosts)
                ids = {server.id for server in current.servers}
                added = {int(line.split("=", 1)[0].split(".", 1)[1]) for line in joining}
                if added <= ids and not ids & set(leaving):
                    return current
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    @staticmethod
    def _current_ensemble(hosts: str) -> Ensemble:
        with ZkClient(hosts, track_ensemble=False, connection_timeout=15.0) as reader:
            data, _stat = reader.retry(lambda: reader.get("/zookeeper/config"))
        return Ensemble.from_config(data)

    def start_joining(self, *, observer: bool = False) -> M:
        """Start a new server, not a member yet: its ``server_line`` is what to add.

        It syncs with the leader as a non-voting member; ``reconfigure(joining=
        (member.server_line,))`` (or an operator's reconfig) makes it one.
        """
        self._require_reconfig()
        member = self._new_member("observer" if observer else "participant")
        self.servers.append(member)  # its own config lists the members and itself
        try:
            member._spawn()
            member._await_ready()
        except BaseException:
            self.servers.remove(member)
            member.kill()
            raise
        return member

    def add_server(self, *, observer: bool = False) -> M:
        """Start a new server and make it a member (a participant, or an observer)."""
        member = self.start_joining(observer=observer)
        try:
            self.reconfigure(joining=(member.server_line,))
        except BaseException:
            self.servers.remove(member)
            member.kill()
            raise
        self.wait_for_quorum()
        return member

    def remove_server(self, member: M) -> None:
        """Take ``member`` out of the ensemble, then stop it."""
        self._require_reconfig()
        if member not in self.servers:
            raise ConfigurationError(f"{member!r} is not a member of this ensemble")
        self.reconfigure(leaving=(member.myid,))
        self.servers.remove(member)
        member.stop()
        self.wait_for_quorum()

    def move_server(self, member: M) -> M:
        """``member`` to new ports: a new server added in its role, then ``member`` removed."""
        moved = self.add_server(observer=member.role == "observer")
        self.remove_server(member)
        return moved
