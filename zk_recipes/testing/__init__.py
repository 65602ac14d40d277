"""Real-ZooKeeper test harness: servers, ensembles, network faults, session expiry.

The Python counterpart of Curator's ``curator-test`` (``TestingServer``,
``TestingCluster``, ``KillSession``), shipped to users for their own tests::

    from zk_recipes.testing import ZooKeeperServer, expire_session

    with ZooKeeperServer() as zk:
        client = KazooClient(zk.connect_string)
        ...

It runs the ZooKeeper installed on the machine (``ZOOKEEPER_HOME`` or Debian's
``zookeeper`` package) with Java; see ``docs/testing.md``. Needs the ``testing``
extra (mirakuru). The pytest fixtures live in ``zk_recipes.testing.pytest_plugin``.
"""

from __future__ import annotations

from zk_recipes.testing._cluster import ClusterMember, ZooKeeperCluster
from zk_recipes.testing._faults import (
    break_connection_thread,
    expire_session,
    expire_session_locally,
)
from zk_recipes.testing._install import (
    HarnessError,
    Installation,
    JavaNotFoundError,
    ZooKeeperNotFoundError,
    clear_installation_cache,
    find_installation,
)
from zk_recipes.testing._process import DEFAULT_JVM_OPTIONS, four_letter_word, free_ports
from zk_recipes.testing._proxy import TcpProxy, proxied_connect_string
from zk_recipes.testing._recorder import Recorder, StateRecorder, wait_for_children, wait_until
from zk_recipes.testing._server import ZooKeeperServer

__all__ = [
    "DEFAULT_JVM_OPTIONS",
    "ClusterMember",
    "HarnessError",
    "Installation",
    "JavaNotFoundError",
    "Recorder",
    "StateRecorder",
    "TcpProxy",
    "ZooKeeperCluster",
    "ZooKeeperNotFoundError",
    "ZooKeeperServer",
    "break_connection_thread",
    "clear_installation_cache",
    "expire_session",
    "expire_session_locally",
    "find_installation",
    "four_letter_word",
    "free_ports",
    "proxied_connect_string",
    "wait_for_children",
    "wait_until",
]
