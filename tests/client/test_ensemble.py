"""Following the ensemble (``/zookeeper/config``): parsing, and a real rolling replacement.

The rolling replacement runs on a 3-node ensemble started with dynamic
reconfiguration: a client that was given one original server only holds a
lock, leads a latch and keeps a TreeCache while two servers are added and the
three originals removed and stopped; its session survives (SUSPENDED then
RECONNECTED at most, never LOST), the lock is never lost, the cache equals
the server, and its next connection goes to the tracked servers.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.client.ensemble_roles import run_role
from zk_recipes import (
    ConfigurationError,
    ConnectionState,
    DistributedQueue,
    Ensemble,
    EnsembleConfigError,
    EnsembleServer,
    ItemContext,
    LeaderLatch,
    Lock,
    TreeCache,
    ZkClient,
)
from zk_recipes._client.ensemble import parse_config
from zk_recipes._client.ensemble_tracking import EnsembleTracker
from zk_recipes.frameworks import connection_report, connection_rows
from zk_recipes.testing import (
    StateRecorder,
    ZooKeeperCluster,
    ZooKeeperServer,
    free_ports,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

CONFIG = b"""server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181
server.2=10.0.0.2:2888:3888:participant;10.0.1.2:2182
server.3=[fd00::3]:2888:3888:observer;[fd00::13]:2181
server.4=10.0.0.4:2888:3888:participant
server.5=10.0.0.5:2888:3888;2185
version=10000000a
"""


def test_the_config_gives_client_addresses_observers_included() -> None:
    ensemble = parse_config(CONFIG)
    assert ensemble.version == 0x10000000A
    assert ensemble.servers == (
        EnsembleServer(1, "10.0.0.1", 2181, "participant"),  # a wildcard: the server's address
        EnsembleServer(2, "10.0.1.2", 2182, "participant"),
        EnsembleServer(3, "fd00::13", 2181, "observer"),
        # server.4 serves no clients (no ';' part): left out, as Curator does
        EnsembleServer(5, "10.0.0.5", 2185, "participant"),  # the role is optional
    )
    assert ensemble.hosts == "10.0.0.1:2181,10.0.1.2:2182,[fd00::13]:2181,10.0.0.5:2185"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"server.1=10.0.0.1:2888:3888;", "no server with a client address"),
        (b"", "no server with a client address"),
        (b"server.x=10.0.0.1:2888:3888;2181", "id is not a number"),
        (b"server.1=10.0.0.1:2888:3888;21x81", "not a number"),
        (b"server.1=10.0.0.1:2888:3888;99999", "not host:port"),
        (b"version=zz\nserver.1=a:1:2;3", "not hexadecimal"),
        (b"no equals sign", "not key=value"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_config_that_cannot_be_followed_says_why(data: bytes, says: str) -> None:
    with pytest.raises(EnsembleConfigError, match=says):
        parse_config(data)


def test_the_tracker_keeps_the_last_good_list_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    used: list[str] = []
    tracker = EnsembleTracker(
        lambda hosts, _shuffled: used.append(hosts), reachable=lambda _e: True
    )
    with caplog.at_level(logging.INFO, logger="zk_recipes.client"):
        assert tracker.offer(b"server.1=h1:1:2;2181") is not None  # no version line: 0
        assert used == ["h1:2181"]
        newer = b"server.1=h1:1:2;2181\nserver.2=h2:1:2;2181\nversion=20"
        assert isinstance(tracker.offer(newer), Ensemble)
        assert used == ["h1:2181", "h1:2181,h2:2181"]
        for _ in range(3):  # a malformed config (and an empty list): a warning once each
            assert tracker.offer(b"server.1=h1:1:2;bad\nversion=21") is None
            assert tracker.offer(b"version=22") is None
        older = b"server.9=h9:1:2;2181\nversion=1f"
        tracker.offer(older)  # read late, behind a newer one: ignored
    assert used == ["h1:2181", "h1:2181,h2:2181"]
    assert tracker.ensemble is not None
    assert tracker.ensemble.hosts == "h1:2181,h2:2181"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert all("keeping the last good one" in r.getMessage() for r in warnings)


def test_a_server_without_dynamic_config_is_followed_quietly_not_at_all(
    zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # The shared test servers run without reconfigEnabled: their config names no
    # client address. Nothing is followed, said once at INFO, never a warning.
    with caplog.at_level(logging.INFO, logger="zk_recipes.client"):
        client = zk_client_factory()
        wait_until(lambda: "not following the ensemble" in caplog.text, "said once", 10)
    assert client.ensemble is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert zk_client_factory(track_ensemble=False).ensemble is None


def test_every_original_server_is_replaced_under_a_lock_a_latch_a_queue_and_a_cache(
    registry: Any,
) -> None:
    """3 -> 5 (two added), one original moved to new ports, the other two removed: every
    original server gone. Each process side has a client of its own, given one original
    server only (what it learns comes from the ensemble's config)."""
    with ZooKeeperCluster(3, reconfig=True) as cluster:
        originals = list(cluster.servers)
        client = ZkClient(originals[0].connect_string, session_timeout=4.0, namespace="/roll")
        consumer_client = ZkClient(
            originals[1].connect_string, session_timeout=4.0, namespace="/roll"
        )
        states, consumer_states = StateRecorder(), StateRecorder()
        client.add_listener(states)
        consumer_client.add_listener(consumer_states)
        client.start()
        consumer_client.start()
        checker = ZkClient(cluster.connect_string).start()
        fencing_log: list[tuple[bytes, int | None]] = []

        def consume(value: bytes, context: ItemContext) -> None:
            fencing_log.append((value, context.fencing_token))  # what storage would be told

        queue = DistributedQueue(consumer_client, "/jobs", consume, lock_path="/jobs-locks")
        try:
            wait_until(lambda: client.ensemble is not None, "the ensemble followed", 10)
            session, consumer_session = client.session_id, consumer_client.session_id
            lock = Lock(client, "/lock")
            assert lock.acquire(timeout=10)
            token = lock.fencing_token
            latch = LeaderLatch(client, "/latch")
            latch.start()
            assert latch.await_leadership(10)
            cache = TreeCache(client, "/tree")
            client.ensure_path("/tree")
            cache.start()
            assert cache.wait_initialized(10)
            queue.start()

            added = [cluster.add_server(), cluster.add_server()]  # growing 3 -> 5
            queue.put(b"job-grown")
            moved = cluster.move_server(originals[0])  # to new ports (a new id)
            queue.put(b"job-moved")
            for n, old in enumerate(originals[1:]):
                cluster.remove_server(old)
                client.create(f"/tree/after-{n}", b"%d" % n)
                queue.put(b"job-%d" % n)
            wanted = {m.port for m in [*added, moved]}
            wait_until(
                lambda: {s.port for s in (client.ensemble or Ensemble((), 0)).servers} == wanted,
                "the new membership followed",
                10,
            )
            # What status pages and `zk-recipes status` show of it.
            report = connection_report(client, server=False)
            tracked = client.ensemble
            assert tracked is not None
            assert report["ensemble"]["version"] == f"{tracked.version:x}"
            shown = dict(connection_rows(report))["ensemble"]
            assert shown.startswith(f"config {tracked.version:x}: ")
            assert all(f"127.0.0.1:{port} (participant)" in shown for port in wanted)
            # With the servers asked (status pages, `zk-recipes status`): each one's mode.
            asked = dict(connection_rows(connection_report(client)))["ensemble"]
            assert asked.count(", leader)") == 1
            assert asked.count(", follower)") == 2
            # ... and the metrics (the newest config any client of the process follows).
            scraped = registry.get_sample_value("zk_recipes_ensemble_config_version")
            assert scraped == tracked.version
            servers = {"role": "participant"}
            assert registry.get_sample_value("zk_recipes_ensemble_servers", servers) == 3

            # The sessions lived through it all, and so did the holds (in doubt while
            # each moved to another server: SUSPENDED, then RECONNECTED).
            wait_until(lock.is_held, "the lock held for sure again", 20)
            assert (client.session_id, consumer_client.session_id) == (session, consumer_session)
            assert ConnectionState.LOST not in states.states + consumer_states.states
            assert lock.fencing_token == token
            assert latch.has_leadership()
            wait_until(lambda: len(cache.children("/tree")) == 2, "the cache", 10)
            on_server = sorted(checker.get_children("/roll/tree"))
            assert sorted(cache.children("/tree")) == on_server
            # Every job consumed (a second time only after its claim was in doubt: at least
            # once), each under a newer claim than the one before (the fencing log).
            wanted_jobs = {b"job-0", b"job-1", b"job-grown", b"job-moved"}
            wait_until(lambda: {j for j, _ in fencing_log} == wanted_jobs, "the jobs", 20)
            if len(fencing_log) > 4:
                assert ConnectionState.SUSPENDED in consumer_states.states, fencing_log
            tokens = [t for _, t in fencing_log if t is not None]
            assert len(tokens) == len(fencing_log)
            assert tokens == sorted(tokens)
            assert len(set(tokens)) == len(tokens)

            # A new connection attempt (the server it is on goes) uses the tracked list.
            wait_until(lambda: cluster.server_for_session(session) is not None, "its server", 20)
            serving = cluster.server_for_session(session)
            assert serving in [*added, moved]
            assert serving is not None
            serving.restart()
            wait_until(lambda: client.state is ConnectionState.RECONNECTED, "reconnected", 20)
            assert client.session_id == session
            wait_until(lock.is_held, "the lock held for sure again", 20)
            latch.close()
            lock.release()
            cache.close()
        finally:
            queue.close()
            client.close()
            consumer_client.close()
            checker.close()


def test_processes_keep_their_holds_leaders_queue_and_cache_through_a_replacement(
    tmp_path: Path,
) -> None:
    """The same replacement with each role in a process of its own (spawned), each given
    one original server: no process is restarted, none sees LOST, each keeps its session,
    and the queue's fencing log and the cache's children are checked at the end."""
    roles = ("lock", "latch", "queue", "cache")
    context = multiprocessing.get_context("spawn")
    with ZooKeeperCluster(3, reconfig=True) as cluster:
        originals = list(cluster.servers)
        stop = context.Event()
        readies = {role: context.Event() for role in roles}
        outs = {role: tmp_path / f"{role}.json" for role in roles}
        processes = [
            context.Process(
                target=run_role,
                args=(role, originals[i % 3].connect_string, readies[role], stop, str(outs[role])),
                name=f"role {role}",
            )
            for i, role in enumerate(roles)
        ]
        for process in processes:
            process.start()
        try:
            for role, ready in readies.items():
                assert ready.wait(60), f"the {role} process did not get going"
            with ZkClient(cluster.connect_string, namespace="/roll") as producer:
                queue = DistributedQueue(producer, "/jobs")
                added = [cluster.add_server(), cluster.add_server()]
                queue.put(b"job-grown")
                moved = cluster.move_server(originals[0])
                queue.put(b"job-moved")
                for n, old in enumerate(originals[1:]):
                    cluster.remove_server(old)
                    producer.create(f"/tree/after-{n}")
                    queue.put(b"job-%d" % n)
                on_server = sorted(producer.get_children("/tree"))
            stop.set()
            for process in processes:
                process.join(60)
                assert process.exitcode == 0, process.name
        finally:
            for process in processes:
                if process.is_alive():
                    process.kill()
        results = {role: json.loads(outs[role].read_text()) for role in roles}
        new_ports = {m.port for m in [*added, moved]}
    for role, result in results.items():
        assert result["same_session"], role
        assert not result["lost"], role
        assert {int(h.rsplit(":", 1)[1]) for h in result["followed"].split(",")} == new_ports
    assert results["lock"]["held"]
    assert results["lock"]["same_token"]
    assert results["latch"]["leader"]
    assert results["cache"]["children"] == on_server
    log = results["queue"]["fencing_log"]
    jobs = [job for job, _ in log]
    assert set(jobs) == {"job-0", "job-1", "job-grown", "job-moved"}  # none lost
    if len(jobs) > 4:  # at-least-once: a job again only after its claim was in doubt
        assert results["queue"]["suspended"], log
    tokens = [token for _, token in log]
    assert tokens == sorted(tokens)  # each delivery under a newer claim than the one before
    assert len(set(tokens)) == len(tokens)


def test_the_harness_refuses_membership_changes_without_reconfig() -> None:
    cluster = ZooKeeperCluster(2)  # not started: the refusal comes first
    try:
        with pytest.raises(ConfigurationError, match="reconfig=True"):
            cluster.add_server()
        with pytest.raises(ConfigurationError, match="do not mix"):
            ZooKeeperCluster(3, reconfig=True, quorum_proxies=True)
    finally:
        cluster.close()


def test_a_config_naming_only_servers_that_do_not_answer_keeps_the_last_good_list(
    zk_server: ZooKeeperServer, caplog: pytest.LogCaptureFixture
) -> None:
    used: list[str] = []
    tracker = EnsembleTracker(lambda hosts, _shuffled: used.append(hosts))  # connects, as a client
    live = f"server.1=127.0.0.1:1:2;{zk_server.port}\nversion=1".encode()
    assert tracker.offer(live) is not None
    (closed,) = free_ports(1)
    with caplog.at_level(logging.WARNING, logger="zk_recipes.client"):
        nowhere = f"server.2=127.0.0.1:1:2;{closed}\nversion=2".encode()
        assert tracker.offer(nowhere) is None
    assert used == [f"127.0.0.1:{zk_server.port}"]
    assert tracker.ensemble is not None
    assert tracker.ensemble.version == 1
    assert "accepts a connection from here" in caplog.text
    assert "keeping the last good one" in caplog.text


def test_the_observers_first_ordering_spreads_over_observers_then_voters() -> None:
    ensemble = parse_config(CONFIG)
    assert ensemble.connect_order(prefer_observers=False) == (ensemble.hosts, True)
    orders = {ensemble.connect_order(prefer_observers=True) for _ in range(50)}
    assert {shuffled for _, shuffled in orders} == {False}  # kazoo keeps the order
    firsts = set()
    for hosts, _ in orders:
        roles = [next(s.role for s in ensemble.servers if s.address == h) for h in hosts.split(",")]
        assert roles == sorted(roles, key=lambda role: role != "observer")  # observers first
        firsts.add(hosts.split(",")[0])
    assert firsts == {s.address for s in ensemble.servers if s.role == "observer"}
    voters_only = Ensemble(tuple(s for s in ensemble.servers if s.role != "observer"), 1)
    assert voters_only.connect_order(prefer_observers=True) == (voters_only.hosts, True)


def test_a_client_preferring_observers_keeps_its_session_guarantees_on_one() -> None:
    """Moved to the observer (its voter stopped), then off it (the observer stopped): the same
    session throughout, its writes read back at once, its watches fired, its lock held."""
    with ZooKeeperCluster(3, reconfig=True) as cluster:
        observer = cluster.add_server(observer=True)
        voter = cluster.servers[0]
        client = ZkClient(voter.connect_string, session_timeout=4.0, prefer_observers=True)
        other = ZkClient(cluster.servers[1].connect_string, track_ensemble=False)
        states = StateRecorder()
        client.add_listener(states)
        with client, other:
            followed = client.wait_ensemble(10)
            assert followed is not None
            assert observer.port in {s.port for s in followed.servers if s.role == "observer"}
            session = client.session_id
            lock = Lock(client, "/observed-lock")
            assert lock.acquire(timeout=10)
            token = lock.fencing_token

            voter.stop()  # the next attempt goes to the observer, tried first
            wait_until(lambda: client.state is ConnectionState.RECONNECTED, "reconnected", 20)
            assert client.connected_address == (observer.host, observer.port)
            assert client.session_id == session
            wait_until(lock.is_held, "the lock held for sure again", 20)
            assert lock.fencing_token == token
            # Read-your-writes through the observer (the write is forwarded to the leader).
            client.create("/observed", b"1")
            assert client.get("/observed")[0] == b"1"
            client.set("/observed", b"2")
            assert client.get("/observed")[0] == b"2"
            # A watch set on the observer fires on a write made through a voter.
            changed = threading.Event()
            client.get("/observed", watch=lambda _event: changed.set())
            other.set("/observed", b"3")
            assert changed.wait(10)
            client.sync("/observed")  # then a read sees the voter's write
            assert client.get("/observed")[0] == b"3"

            observer.stop()  # off the observer: to a voter, the session and the lock kept
            wait_until(
                lambda: (
                    client.state is ConnectionState.RECONNECTED
                    and client.connected_address != (observer.host, observer.port)
                ),
                "reconnected to a voter",
                20,
            )
            assert client.session_id == session
            assert client.get("/observed")[0] == b"3"  # never behind what it saw
            wait_until(lock.is_held, "the lock held for sure again", 20)
            assert lock.fencing_token == token
            assert ConnectionState.LOST not in states.states
            lock.release()
