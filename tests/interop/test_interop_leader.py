"""Our LeaderLatch / LeaderSelector and Curator 5.4's on one path: one leader between them."""

from __future__ import annotations

import threading

from zk_recipes import LeaderLatch, LeaderSelector, LeadershipContext
from zk_recipes.testing import wait_for_children
from zk_recipes.testing.pytest_plugin import ClientFactory

from .curator import CuratorPeer, PeerFactory


def _java_participants(peer: CuratorPeer, handle: str) -> list[tuple[str, bool]]:
    result = []
    for item in peer.call(f"participants {handle}").split():
        ident, _, leading = item.rpartition(":")
        result.append((ident, leading == "true"))
    return result


def _java_leads(peer: CuratorPeer, handle: str) -> bool:
    return peer.call(f"hasleadership {handle}") == "true"


def test_java_and_python_latches_elect_one_leader_and_fail_over_both_ways(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    path = "/election"
    observer = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    peer.call(f"latch j1 {zk_namespace}{path} java-1")
    peer.wait_event("j1 isLeader", timeout=10)
    py1 = LeaderLatch(zk_client_factory(), path, "py-1").start()
    wait_for_children(observer, path, 2)
    peer.call(f"latch j2 {zk_namespace}{path} java-2")
    wait_for_children(observer, path, 3)

    # Exactly one leader, and both sides agree on the order and the ids.
    expected = [("java-1", True), ("py-1", False), ("java-2", False)]
    assert _java_participants(peer, "j1") == expected
    assert [(p.id, p.is_leader) for p in py1.participants()] == expected
    assert _java_leads(peer, "j1")
    assert not _java_leads(peer, "j2")
    assert not py1.has_leadership()

    # Java leader closes: the Python latch behind it leads.
    peer.call("close j1")
    assert py1.await_leadership(10)
    assert not _java_leads(peer, "j2")
    assert [ident for ident, leading in _java_participants(peer, "j2") if leading] == ["py-1"]

    # Python leader closes: the Java latch behind it leads.
    py2 = LeaderLatch(zk_client_factory(), path, "py-2").start()
    wait_for_children(observer, path, 3)
    py1.close()
    peer.wait_event("j2 isLeader", timeout=10)
    assert not py2.has_leadership()
    assert [(p.id, p.is_leader) for p in py2.participants()] == [
        ("java-2", True),
        ("py-2", False),
    ]

    # And once more towards Python, with Curator's NOTIFY_LEADER close.
    peer.call("close j2 NOTIFY_LEADER")
    peer.wait_event("j2 notLeader", timeout=10)
    assert py2.await_leadership(10)
    py2.close()


def test_java_and_python_selectors_alternate_and_never_lead_together(
    curator_peer_factory: PeerFactory,
    zk_client_factory: ClientFactory,
    zk_hosts: str,
    zk_namespace: str,
) -> None:
    path = "/selector"
    observer = zk_client_factory()
    peer = curator_peer_factory(zk_hosts)
    leading = threading.Event()
    give_up = threading.Event()
    terms: list[LeadershipContext] = []

    def take_leadership(ctx: LeadershipContext) -> None:
        terms.append(ctx)
        leading.set()
        give_up.wait(20)
        give_up.clear()
        leading.clear()

    peer.call(f"selector js {zk_namespace}{path} java-sel")
    peer.wait_event("js leading", timeout=10)
    ours = LeaderSelector(
        zk_client_factory(), path, take_leadership, identifier="py-sel", auto_requeue=True
    ).start()
    wait_for_children(observer, path, 2)
    assert [(p.id, p.is_leader) for p in ours.participants()] == [
        ("java-sel", True),
        ("py-sel", False),
    ]
    assert _java_participants(peer, "js") == [("java-sel", True), ("py-sel", False)]

    for round_ in range(3):
        # Java leads; ours waits, queued behind it. Ours queues again only after
        # its term ended, while Java already leads: Java must not yield before
        # ours is in line, or Java's own requeue goes first and leads again.
        wait_for_children(observer, path, 2)
        assert [(p.id, p.is_leader) for p in ours.participants()] == [
            ("java-sel", True),
            ("py-sel", False),
        ], f"round {round_}"
        assert not leading.is_set()
        assert not ours.has_leadership()
        peer.call("yield js")
        peer.wait_event("js yielded", timeout=10)
        # Ours leads; Java (auto-requeued) waits behind it.
        assert leading.wait(10), f"round {round_}: our selector never led"
        assert ours.has_leadership()
        wait_for_children(observer, path, 2)
        assert not _java_leads(peer, "js")
        give_up.set()
        peer.wait_event("js leading", timeout=10)
    assert [ctx.term for ctx in terms] == [1, 2, 3]
    tokens = [ctx.fencing_token for ctx in terms]
    assert tokens == sorted(tokens)
    ours.close()
    peer.call("close js")
