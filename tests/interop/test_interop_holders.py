"""holders() reads Curator 5.4's nodes beside ours: a Java mutex holder, a Java latch leader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from zk_recipes import LeaderLatch, Lock, Owner, holders
from zk_recipes.testing import wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import PeerFactory


def test_a_java_mutex_holder_and_our_waiter(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    reader = zk_client_factory()
    peer.call(f"mutex m {zk_namespace}/shared")
    assert peer.call("acquire m 5000", timeout=15).startswith("acquired ")
    java_node = peer.call("participants m").split()[0]
    raw, stat = reader.get(java_node.removeprefix(zk_namespace))
    waiter_client = zk_client_factory()
    ours = Lock(waiter_client, "/shared", identifier="py-waiter")
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(ours.acquire(timeout=30)))
    thread.start()
    try:
        wait_for_children(reader, "/shared", 2)

        [report] = holders(reader)

        assert (report.path, report.kind) == ("/shared", "lock")
        [java] = report.holders
        assert java.node == java_node.removeprefix(zk_namespace)
        assert java.session_id == peer.session_id()
        assert java.fencing_token == stat.czxid
        assert java.owner == Owner()
        assert java.data == raw.decode()  # Curator's default data: the peer's IP address
        assert java.identifier is None
        assert java.since == stat.ctime / 1000.0
        [python] = report.waiting
        assert python.position == 1
        assert python.sequence > java.sequence
        assert python.session_id == waiter_client.session_id
        assert python.owner.pid == os.getpid()
        assert (python.identifier, python.data) == ("py-waiter", None)

        # The same through the command line, for programs: `zk-recipes holders --json`.
        env = dict(os.environ, ZK_RECIPES_HOSTS=zk_hosts, ZK_RECIPES_NAMESPACE=zk_namespace)
        listed = subprocess.run(
            [sys.executable, "-m", "zk_recipes", "holders", "/shared", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        [shown] = json.loads(listed.stdout)
        assert [n["session_id_hex"] for n in shown["holders"]] == [f"0x{peer.session_id():x}"]
        assert [n["data"] for n in shown["holders"]] == [raw.decode()]
        assert [(n["pid"], n["id"]) for n in shown["waiting"]] == [(os.getpid(), "py-waiter")]
    finally:
        peer.call("release m")
        thread.join(15)
    assert result == [True]
    after = holders(reader, "/shared")
    assert [n.session_id for n in after[0].holders] == [waiter_client.session_id]
    ours.release()


def test_a_java_latch_leader_with_an_empty_id(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    peer = curator_peer_factory(zk_hosts)
    reader = zk_client_factory()
    peer.call(f"latch j {zk_namespace}/election")
    peer.wait_event("j isLeader", timeout=10)
    standby = LeaderLatch(zk_client_factory(), "/election", "py-standby").start()
    try:
        wait_for_children(reader, "/election", 2)
        [report] = holders(reader, "/election")
        assert report.kind == "leader latch"
        [leader] = report.holders
        assert leader.session_id == peer.session_id()
        assert (leader.data, leader.identifier, leader.owner) == ("", None, Owner())
        assert [n.identifier for n in report.waiting] == ["py-standby"]
    finally:
        standby.close()
        peer.call("close j")
