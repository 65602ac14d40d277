"""Following the ensemble: ``/zookeeper/config`` read at each connection and change.

Why: a client keeps the host list it started with; once every server of it
has been replaced (dynamic reconfiguration, ZooKeeper 3.5+) it can no longer
reconnect. Curator follows the ensemble (``EnsembleTracker``); so does
``EnsembleFollower`` here: at each connection it reads ``/zookeeper/config``
with a watch (outside the client's namespace: it is the server's node), and
at each change again, and hands the client addresses it names
(``ensemble.py`` parses them) to the connection, which uses them from its
next connection attempt on (kazoo's ``set_hosts``; the session and its
server are not touched). ``reconfigure`` is ``ZkClient.reconfig``.

Quiet where the server does not allow it: a server without dynamic
reconfiguration has no such node (or a static one with no client
addresses), and an ACL may forbid reading it; either is logged once, at
INFO, and the settings' hosts stay in use. A node that does not parse, names
no server, or none that accepts a connection from here, is logged as a
warning, once per config version, and the last good list stays.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from zk_recipes._client.ensemble import (
    CONFIG_NODE,
    Ensemble,
    EnsembleConfigError,
    NothingToFollow,
    parse_config,
    version_of,
)
from zk_recipes._client.states import StateChange
from zk_recipes._errors import ConfigurationError, NoAuthError, NoNodeError, ZkRecipesError
from zk_recipes._types import WatchEvent, WatchEventType, ZnodeStat

if TYPE_CHECKING:
    from zk_recipes._client.kazoo import KazooConnection, Pending
    from zk_recipes._settings import ClientSettings

log = logging.getLogger("zk_recipes.client")


class EnsembleTracker:
    """What one client follows: each config read is ``offer``ed; its hosts go to the connection.

    A new host list is used only if one of its servers accepts a connection
    (``reachable``; a config naming only servers no client can reach, a typo
    in a client port say, would strand the client at its next reconnect): if
    none does, a warning, and the last good list stays. Quiet where the server
    does not allow reading the config (see the module note).
    """

    def __init__(
        self,
        use_hosts: Callable[[str, bool], None],
        reachable: Callable[[Ensemble], bool] | None = None,
        *,
        prefer_observers: bool = False,
    ) -> None:
        self._use_hosts = use_hosts
        self._prefer_observers = prefer_observers
        self._reachable = reachable or any_server_answers
        self._lock = threading.Lock()
        self.ensemble: Ensemble | None = None
        self._told_unavailable = False
        self._told_bad: set[int | None] = set()

    def offer(self, data: bytes) -> Ensemble | None:
        """The config's data as read: followed if it names servers, else the last good kept."""
        try:
            ensemble = parse_config(data)
        except NothingToFollow as exc:
            if self.ensemble is None:
                self.unavailable(str(exc))
                return None
            self._bad(data, exc)  # it named servers before: a config gone wrong
            return None
        except EnsembleConfigError as exc:
            self._bad(data, exc)
            return None
        with self._lock:
            previous = self.ensemble
            if previous is not None and previous.version > ensemble.version:
                return previous  # an older config read late (a reply behind a watch event)
        moved = previous is None or previous.hosts != ensemble.hosts
        if moved and not self._reachable(ensemble):
            self._bad(
                data,
                EnsembleConfigError(
                    f"none of its servers ({ensemble.hosts}) accepts a connection from here"
                ),
            )
            return None
        with self._lock:
            if self.ensemble is not None and self.ensemble.version > ensemble.version:
                return self.ensemble  # a newer one was followed while we looked
            self.ensemble = ensemble
        if moved:
            log.info(
                "following the ensemble's config version %x: %s", ensemble.version, ensemble.hosts
            )
            self._use_hosts(*ensemble.connect_order(self._prefer_observers))
        return ensemble

    def would_move(self, data: bytes) -> bool:
        """Whether ``offer(data)`` would try a new host list (and so connect to its servers)."""
        try:
            ensemble = parse_config(data)
        except EnsembleConfigError:
            return False
        current = self.ensemble
        return current is None or current.hosts != ensemble.hosts

    def _bad(self, data: bytes, exc: EnsembleConfigError) -> None:
        """A config that cannot be followed: a warning once per version; the hosts stay."""
        key = version_of(data)
        with self._lock:
            first = key not in self._told_bad
            self._told_bad.add(key)
        if first:
            log.warning(
                "/zookeeper/config does not give a host list to follow (%s); keeping %s",
                exc,
                "the last good one" if self.ensemble else "the configured hosts",
            )

    def unavailable(self, why: str) -> None:
        """The server does not let us read the config: said once, the hosts stay as they are."""
        with self._lock:
            first = not self._told_unavailable
            self._told_unavailable = True
        if first:
            log.info(
                "not following the ensemble's membership (%s): the configured hosts stay in use",
                why,
            )


def any_server_answers(ensemble: Ensemble, timeout: float = 1.0) -> bool:
    """True once one server of ``ensemble`` accepts a TCP connection (tried in order)."""
    for server in ensemble.servers:
        try:
            with socket.create_connection((server.host, server.port), timeout=timeout):
                return True
        except OSError:
            continue
    return False


class _Client(Protocol):
    """What the follower uses of a ZkClient (typed here: the client imports this module)."""

    def add_listener(self, listener: Callable[[StateChange], None]) -> None: ...

    def _live_conn(self) -> KazooConnection: ...


class EnsembleFollower:
    """One client's following of ``/zookeeper/config``: read at each connection and change.

    The read is sent from the state listener's thread and answered on the
    connection's (no thread waits); a change of the node fires the watch,
    which reads it again (and arms the next watch).
    """

    def __init__(
        self,
        client: _Client,
        use_hosts: Callable[[str, bool], None],
        *,
        prefer_observers: bool = False,
    ) -> None:
        self._client = client
        self.tracker = EnsembleTracker(use_hosts, prefer_observers=prefer_observers)
        #: Set once a read of the config answered (followed, or not followable).
        self._read_once = threading.Event()
        client.add_listener(self._on_state)

    @classmethod
    def of(
        cls, client: _Client, settings: ClientSettings, use_hosts: Callable[[str, bool], None]
    ) -> EnsembleFollower | None:
        """The follower ``settings`` ask for (``track_ensemble``, ``prefer_observers``), or None."""
        if not settings.track_ensemble:
            return None
        return cls(client, use_hosts, prefer_observers=settings.prefer_observers)

    def wait(self, timeout: float) -> Ensemble | None:
        """The ensemble once a read answered (at most ``timeout`` s); None: not followed."""
        self._read_once.wait(timeout)
        return self.tracker.ensemble

    @property
    def ensemble(self) -> Ensemble | None:
        return self.tracker.ensemble

    def _on_state(self, change: StateChange) -> None:
        if change.state.is_connected:
            self.read()

    def _on_watch(self, event: WatchEvent) -> None:
        if event.type is not WatchEventType.NONE:  # a disconnect: the next connection reads
            self.read()

    def read(self) -> None:
        """Send the read (with its watch); the answer is offered to the tracker."""
        try:
            pending = self._client._live_conn().get_async(CONFIG_NODE, self._on_watch)
        except ZkRecipesError:
            return  # not connected (closing): the next connection reads again
        pending.add_done_callback(self._answered)

    def _answered(self, pending: Pending[tuple[bytes, ZnodeStat]]) -> None:
        try:
            data, _stat = pending.result_now()
        except (NoNodeError, NoAuthError) as exc:
            self.tracker.unavailable(
                "the server has no /zookeeper/config (dynamic reconfiguration is off)"
                if isinstance(exc, NoNodeError)
                else "reading /zookeeper/config is not allowed to this client"
            )
            self._read_once.set()
            return
        except ZkRecipesError:
            return  # the connection went: the next one reads again
        if not self.tracker.would_move(data):
            self._offer(data)  # nothing to try: at once, on this thread
            return
        # Not on the connection's completion thread: offer() tries to connect to the
        # servers of a new list (a moment, once per membership change).
        threading.Thread(
            target=self._offer, args=(data,), name="zk-recipes ensemble", daemon=True
        ).start()

    def _offer(self, data: bytes) -> None:
        try:
            self.tracker.offer(data)
        finally:
            self._read_once.set()


class _Reconfiguring(Protocol):
    """What ``reconfigure`` uses of a ZkClient."""

    _ensemble: EnsembleFollower | None

    def _usable(self) -> KazooConnection: ...

    @property
    def _op_timeout(self) -> float: ...


def reconfigure(
    client: _Reconfiguring,
    joining: Sequence[str],
    leaving: Sequence[int],
    new_members: Sequence[str],
    from_config: int,
) -> Ensemble:
    """``ZkClient.reconfig``: one reconfig request; the new ensemble (followed at once).

    ``joining``: servers to add, as their config lines (``"server.4=10.0.0.4:2888:
    3888:participant;2181"``); ``leaving``: ids of servers to remove; or
    ``new_members``: the whole new membership. ``from_config``: refuse unless
    the current config has that version (``ensemble.version``). The servers
    must run with ``reconfigEnabled=true``, and the client be a super user (or
    the servers run with ``skipACL=yes``). Not retried: a lost reply leaves the
    outcome unknown; read ``ensemble`` again.
    """
    if new_members and (joining or leaving):
        raise ConfigurationError(
            "reconfig takes joining/leaving (incremental) or new_members, not both"
        )
    for line in (*joining, *new_members):
        if not isinstance(line, str) or not line.startswith("server."):
            raise ConfigurationError(
                f"{line!r} is not a server line: 'server.<id>=<host>:<quorum port>:"
                "<election port>[:participant|:observer];[<client host>:]<client port>'"
            )
    if not (joining or leaving or new_members):
        raise ConfigurationError("reconfig needs joining, leaving or new_members")
    data, _stat = (
        client._usable()
        .reconfig_async(
            ",".join(joining) or None,
            ",".join(str(int(i)) for i in leaving) or None,
            ",".join(new_members) or None,
            from_config,
        )
        .result(client._op_timeout)
    )
    ensemble = parse_config(data)
    if client._ensemble is not None:
        client._ensemble.tracker.offer(data)
    return ensemble
