"""A short chaos run in the normal suite: every fault kind once or more, figures at target.

Every kind includes the one-way partitions with watch churn and the
overlapping faults; the first pass applies each once (overlaps first, so that
they cover the kinds they are made of), which keeps the run about as short as
it was with five kinds. Every family runs in it: the workers contend for the
locks and the latch, put into and consume from the queues (poison items
included), and register and flap discovery instances, all at once on their
one client, so every fault hits all three.

See docs/chaos.md. No timing is asserted: the checker compares orderings of
events on the machine's one monotonic clock, and exempts what a SIGSTOPped
process cannot know.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from zk_recipes import ZkClient
from zk_recipes.testing import ZooKeeperCluster

from .chaosrun.check import off_figures
from .chaosrun.config import FAULT_KINDS, OVERLAP_KINDS, ChaosConfig
from .chaosrun.run import render, run_chaos

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


@pytest.fixture(scope="module")
def proxied_cluster() -> Iterator[ZooKeeperCluster]:
    """An ensemble whose members reach each other through proxies (isolate_follower)."""
    with ZooKeeperCluster(size=3, quorum_proxies=True) as cluster:
        yield cluster


@pytest.mark.timeout(600)
def test_chaos_short(proxied_cluster: ZooKeeperCluster, tmp_path: Path) -> None:
    namespace = "/chaos-short"
    with ZkClient(proxied_cluster.connect_string, connection_timeout=30.0) as admin:
        admin.create(namespace, parents=True)
    config = ChaosConfig(duration=25.0, workers=8, seed=20261122)
    report = run_chaos(proxied_cluster, namespace, tmp_path / "chaos", config)
    shown = render(report)
    locks, leadership = report["locks"], report["leadership"]
    queues, discovery = report["queues"], report["discovery"]

    # Every fault kind applied (some of them inside an overlap), and both overlaps.
    assert set(report["faults"]) == set(FAULT_KINDS), shown
    assert set(report["schedule"]) >= set(OVERLAP_KINDS), shown
    overlapping = report["faults_overlapping"]
    assert any(pair.endswith("+kill_leader") for pair in overlapping), shown
    assert "pause_worker+restart_server" in overlapping, shown
    assert report["fault_errors"] == [], shown
    assert report["churn_notifications"] > 0, shown
    assert report["acquisitions"] > 0, shown
    assert locks["overlaps"] == 0, shown
    assert locks["stale_writes_accepted"] == 0, shown
    assert locks["refused_unexplained"] == 0, shown
    assert locks["lost_after_next_holder"] == 0, shown
    assert report["orphans"] == 0, shown
    assert leadership["overlaps"] == 0, shown
    assert leadership["terms"] > 0, shown
    assert report["workers_hung_at_stop"] == 0, shown

    # Queues: nothing lost or left, no commit or unwarned fenced write from a lost claim,
    # a second delivery only after a loss report or a kill, dead letters = poison only.
    assert queues["items_consumed"] > 0, shown
    assert queues["poison_items"] > 0, shown
    assert queues["dead_letters"] >= queues["poison_items"], shown
    # Discovery: no ghost, no healthy instance missing, no sequential node twice.
    assert discovery["registrations"], shown
    assert discovery["snapshots"] > 0, shown
    assert off_figures(report) == [], shown
