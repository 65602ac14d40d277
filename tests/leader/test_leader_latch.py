"""LeaderLatch: one leader at a time across processes, failover, and the SUSPENDED/LOST rules."""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import multiprocessing.queues
import os
import re
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from zk_recipes import (
    CloseMode,
    ConnectionLostError,
    ConnectionState,
    ErrorPolicy,
    LeaderLatch,
    NoNodeError,
    RecipeUsageError,
    ZkClient,
)
from zk_recipes.testing import (
    Recorder,
    StateRecorder,
    TcpProxy,
    ZooKeeperServer,
    expire_session,
    expire_session_locally,
    wait_for_children,
    wait_until,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

NODE_NAME = re.compile(r"_c_[0-9a-f-]{36}-latch-\d{10}")


class LatchEvents:
    """A latch listener that tests can wait on; notes the fencing token at each is_leader."""

    def __init__(self, latch: LeaderLatch | None = None) -> None:
        self.latch = latch
        #: (kind, time.monotonic(), token) with kind "leader" or "not_leader".
        self._events: Recorder[tuple[str, float, int | None]] = Recorder()

    @property
    def events(self) -> list[tuple[str, float, int | None]]:
        return self._events.snapshot()

    def is_leader(self) -> None:
        token = self.latch.fencing_token if self.latch is not None else None
        self._events(("leader", time.monotonic(), token))

    def not_leader(self) -> None:
        self._events(("not_leader", time.monotonic(), None))

    def kinds(self) -> list[str]:
        return [kind for kind, _, _ in self.events]

    def wait_for(
        self, kind: str, count: int = 1, timeout: float = 10.0
    ) -> tuple[float, int | None]:
        """(time, token) of the ``count``-th event of ``kind``; AssertionError on timeout."""
        _, at, token = self._events.wait_for(lambda e: e[0] == kind, timeout, count=count)
        return at, token


def _latch(
    client: ZkClient,
    path: str,
    identifier: str = "",
    error_policy: ErrorPolicy = ErrorPolicy.STANDARD,
) -> LeaderLatch:
    return LeaderLatch(client, path, identifier, error_policy=error_policy)


def _started(
    client: ZkClient,
    path: str,
    identifier: str = "",
    error_policy: ErrorPolicy = ErrorPolicy.STANDARD,
) -> tuple[LeaderLatch, LatchEvents]:
    latch = _latch(client, path, identifier, error_policy)
    recorder = LatchEvents(latch)
    latch.add_listener(recorder)
    latch.start()
    return latch, recorder


def _in_line(client: ZkClient, path: str) -> int:
    """How many nodes are in the latch directory (0 before it exists)."""
    try:
        return len(client.get_children(path))
    except NoNodeError:
        return 0


# -- five processes ---------------------------------------------------------------------


def _latch_child(
    hosts: str,
    namespace: str,
    ident: str,
    log_path: str,
    commands: multiprocessing.queues.Queue[str],
) -> None:
    """Child process: one latch on /election; log transitions; obey 'close' and 'exit'."""
    with open(log_path, "a", buffering=1) as log:

        def write(kind: str) -> None:
            log.write(f"{kind} {time.monotonic_ns()}\n")

        class Listener:
            def is_leader(self) -> None:
                write("leader")

            def not_leader(self) -> None:
                write("not_leader")

        # 3 s sessions; LOST declared after 1.5 s without a reply.
        with ZkClient(
            hosts,
            namespace=namespace,
            session_timeout=3.0,
            simulated_expiry_fraction=0.5,
            connection_timeout=10.0,
        ) as client:
            latch = LeaderLatch(client, "/election", ident)
            latch.add_listener(Listener())
            latch.start()
            write("started")
            while True:
                command = commands.get(timeout=120)
                if command == "close":
                    write("closing")
                    latch.close()
                elif command == "exit":
                    if latch.has_leadership():
                        write("closing")
                    latch.close()
                    return


def _events(log_path: Path) -> list[tuple[str, int]]:
    if not log_path.exists():
        return []
    rows = []
    for line in log_path.read_text().splitlines():
        kind, _, ns = line.partition(" ")
        if ns.isdigit():
            rows.append((kind, int(ns)))
    return rows


def _is_leading(events: list[tuple[str, int]]) -> bool:
    state = False
    for kind, _ in events:
        if kind == "leader":
            state = True
        elif kind in ("not_leader", "closing"):
            state = False
    return state


def _intervals(events: list[tuple[str, int]], end_ns: int) -> list[tuple[int, int]]:
    """Leadership intervals from a child's log; an open one ends at ``end_ns``."""
    result, began = [], None
    for kind, at in events:
        if kind == "leader" and began is None:
            began = at
        elif kind in ("not_leader", "closing") and began is not None:
            result.append((began, at))
            began = None
    if began is not None:
        result.append((began, end_ns))
    return result


@pytest.mark.slow
def test_five_processes_one_leader_at_a_time_through_close_kill_and_partition(
    zk_private_server: ZooKeeperServer,
    zk_namespace: str,
    zk_client_factory: ClientFactory,
    tmp_path: Path,
) -> None:
    count = 5
    context = multiprocessing.get_context("spawn")
    logs = [tmp_path / f"child-{i}.log" for i in range(count)]
    commands = [context.Queue() for _ in range(count)]
    killed: dict[int, int] = {}  # child -> time.monotonic_ns() of its kill -9
    with contextlib.ExitStack() as stack:
        proxies = [
            stack.enter_context(TcpProxy(zk_private_server.host, zk_private_server.port))
            for _ in range(count)
        ]
        children = [
            context.Process(
                target=_latch_child,
                args=(proxies[i].connect_string, zk_namespace, f"p{i}", str(logs[i]), commands[i]),
                daemon=True,
            )
            for i in range(count)
        ]
        for child in children:
            child.start()
        stack.callback(_reap, children)
        observer = zk_client_factory(hosts=zk_private_server.connect_string)

        def leaders() -> list[int]:
            found = [i for i in range(count) if i not in killed and _is_leading(_events(logs[i]))]
            assert len(found) <= 1, f"two leaders at once: {found}"
            return found

        def next_leader(previous: int | None, timeout: float = 30.0) -> int:
            deadline = time.monotonic() + timeout
            while True:
                current = leaders()
                if current and current[0] != previous:
                    return current[0]
                assert time.monotonic() < deadline, f"no new leader after {previous}"
                time.sleep(0.02)

        wait_until(lambda: all(_events(log) for log in logs), "every child started", timeout=60)
        wait_until(lambda: _in_line(observer, "/election") == count, "all in line", timeout=30)
        first = next_leader(None)

        # 1. Graceful close of the leader: another leads.
        commands[first].put("close")
        second = next_leader(first)
        assert second != first

        # 2. kill -9 of the leader: another leads once the server expires its session.
        victim = children[second].pid
        assert victim is not None  # os.kill(0, ...) would signal our own process group
        os.kill(victim, signal.SIGKILL)
        killed[second] = time.monotonic_ns()
        third = next_leader(second)

        # 3. Partition of the leader: it hears not_leader before anyone else leads.
        proxies[third].blackhole()
        fourth = next_leader(third)
        fourth_at = [at for kind, at in _events(logs[fourth]) if kind == "leader"][-1]
        third_events = _events(logs[third])
        dropped = [at for kind, at in third_events if kind == "not_leader"]
        assert dropped, f"the partitioned leader never heard not_leader: {third_events}"
        assert dropped[-1] < fourth_at, "the partitioned leader must step down before a new one"
        proxies[third].heal()

        # The partitioned child re-joins on a new session. In line: it, the new leader and
        # the child that never led (the closed latch and the killed process are gone).
        wait_until(
            lambda: _in_line(observer, "/election") == count - 2,
            "the partitioned child back in line",
            timeout=30,
        )
        assert leaders() == [fourth]

        for index in range(count):
            if index not in killed:
                commands[index].put("exit")
        for index, child in enumerate(children):
            child.join(30)
            if index not in killed:
                assert child.exitcode == 0, f"child {index} exited with {child.exitcode}"

    end = time.monotonic_ns()
    intervals = sorted(
        (start, stop, index)
        for index in range(count)
        for start, stop in _intervals(_events(logs[index]), killed.get(index, end))
    )
    assert len(intervals) >= 4
    for (_, prev_stop, prev), (start, _, index) in itertools.pairwise(intervals):
        assert start >= prev_stop, f"p{prev} and p{index} led at the same time"
    assert len({index for *_, index in intervals}) >= 4


def _reap(children: Sequence[multiprocessing.process.BaseProcess]) -> None:
    for child in children:
        if child.is_alive():
            child.kill()
            child.join(5)


# -- connection states ------------------------------------------------------------------


def test_standard_policy_drops_on_suspended_and_session_policy_keeps_leading(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    def client() -> ZkClient:
        return zk_client_factory(
            hosts=zk_proxy.connect_string, session_timeout=4.0, simulated_expiry_fraction=0.9
        )

    std_client, ses_client = client(), client()
    states = StateRecorder()
    std_client.add_listener(states)
    standard, std_events = _started(std_client, "/standard", error_policy=ErrorPolicy.STANDARD)
    session, ses_events = _started(ses_client, "/session", error_policy=ErrorPolicy.SESSION)
    _, std_token = std_events.wait_for("leader")
    ses_events.wait_for("leader")
    mark = states.mark()

    zk_proxy.cut()
    states.wait_for(ConnectionState.SUSPENDED, after=mark)
    std_events.wait_for("not_leader")
    assert not standard.has_leadership()
    wait_until(lambda: ses_client.state is ConnectionState.SUSPENDED, "session client SUSPENDED")
    assert session.has_leadership()

    zk_proxy.heal()
    states.wait_for(ConnectionState.RECONNECTED, after=mark)
    # Same session, node still first: leadership comes back, with the same token.
    _, token_again = std_events.wait_for("leader", count=2)
    assert token_again == std_token
    assert standard.has_leadership()
    assert session.has_leadership()
    assert ses_events.kinds() == ["leader"]
    standard.close()
    session.close()


def test_server_side_expiry_drops_leadership_then_rejoins_with_a_new_node(
    zk_client: ZkClient,
) -> None:
    latch, events = _started(zk_client, "/expiry", "solo")
    _, first_token = events.wait_for("leader")
    first_node = latch.node
    assert first_node is not None
    expired = expire_session(zk_client)
    events.wait_for("not_leader")
    _, second_token = events.wait_for("leader", count=2, timeout=15)
    assert zk_client.session_id != expired
    assert second_token is not None
    assert first_token is not None
    assert second_token > first_token
    assert latch.node not in (None, first_node)
    stat = zk_client.exists(latch.node or "")
    assert stat is not None
    assert stat.ephemeral_owner == zk_client.session_id
    assert zk_client.exists(first_node) is None
    latch.close()


def test_never_leads_on_a_node_of_its_previous_session(zk_client_factory: ClientFactory) -> None:
    # CURATOR-696: after a client-side expiry the server keeps the old session, and
    # our old node, for a while. Curator 5.4 can lead on it; we must not.
    a_client, b_client = zk_client_factory(), zk_client_factory()
    a, a_events = _started(a_client, "/stale", "a")
    a_events.wait_for("leader")
    b, b_events = _started(b_client, "/stale", "b")
    wait_until(lambda: _in_line(a_client, "/stale") == 2, "b in line")
    old_node, old_session = a.node, a_client.session_id
    assert old_node is not None

    expire_session_locally(a_client)
    a_events.wait_for("not_leader")
    b_at, _ = b_events.wait_for("leader", timeout=15)
    a_dropped_at, _ = a_events.wait_for("not_leader")
    assert a_dropped_at < b_at
    assert not a.has_leadership()
    # a is back in line on its new session, behind b, and its old node is gone.
    wait_until(lambda: a.node not in (None, old_node), "a's new node")
    stat = a_client.exists(a.node or "")
    assert stat is not None
    assert stat.ephemeral_owner == a_client.session_id != old_session
    assert a_client.exists(old_node) is None
    assert [p.id for p in a.participants()] == ["b", "a"]
    assert a_events.kinds() == ["leader", "not_leader"]

    b.close()
    _, token = a_events.wait_for("leader", count=2)
    assert token == stat.czxid
    a.close()


def test_deleting_the_leaders_node_makes_it_step_down_and_rejoin(
    zk_client_factory: ClientFactory,
) -> None:
    admin = zk_client_factory()
    a, a_events = _started(zk_client_factory(), "/deleted", "a")
    a_events.wait_for("leader")
    b, b_events = _started(zk_client_factory(), "/deleted", "b")
    wait_until(lambda: _in_line(admin, "/deleted") == 2, "b in line")
    old_node = a.node
    assert old_node is not None
    admin.delete(old_node)
    a_events.wait_for("not_leader")
    b_events.wait_for("leader")
    wait_until(lambda: a.node not in (None, old_node), "a back in line")
    assert [(p.id, p.is_leader) for p in b.participants()] == [("b", True), ("a", False)]
    assert a.statistics().resets >= 1
    assert not a.has_leadership()
    a.close()
    b.close()


# -- close, await, participants -----------------------------------------------------------


def test_close_notify_leader_tells_the_leader_and_silent_does_not(zk_client: ZkClient) -> None:
    notify, notify_events = _started(zk_client, "/notify")
    notify_events.wait_for("leader")
    notify.close(CloseMode.NOTIFY_LEADER)
    # not_leader has run by the time close() returns (before the node was deleted).
    assert notify_events.kinds() == ["leader", "not_leader"]
    assert not notify.has_leadership()

    silent, silent_events = _started(zk_client, "/silent")
    silent_events.wait_for("leader")
    silent.close()
    assert not silent.has_leadership()
    time.sleep(0.2)  # give a wrongly queued callback the time to show up
    assert silent_events.kinds() == ["leader"]
    assert zk_client.exists("/silent") is None or not zk_client.get_children("/silent")


def test_await_leadership_times_out_then_succeeds_on_failover(
    zk_client_factory: ClientFactory,
) -> None:
    leader, leader_events = _started(zk_client_factory(), "/await", "alpha")
    assert leader.await_leadership(10)
    follower = _latch(zk_client_factory(), "/await", "beta").start()
    began = time.monotonic()
    assert follower.await_leadership(0.3) is False
    assert time.monotonic() - began >= 0.3
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(follower.await_leadership(20)))
    waiter.start()
    leader.close()
    waiter.join(20)
    assert result == [True]
    assert follower.has_leadership()
    assert leader_events.kinds() == ["leader"]
    follower.close()


def test_participants_and_leader_ids_and_node_layout(zk_client_factory: ClientFactory) -> None:
    admin = zk_client_factory()
    alpha = _latch(zk_client_factory(), "/ids", "alpha").start()
    assert alpha.await_leadership(10)
    beta = _latch(zk_client_factory(), "/ids", "beta").start()
    anonymous = _latch(zk_client_factory(), "/ids").start()
    wait_until(lambda: _in_line(admin, "/ids") == 3, "three in line")
    # ... and each latch has read its create's reply (its ``node``), a moment later.
    wait_until(lambda: all(x.node for x in (alpha, beta, anonymous)), "each knows its node")
    expected = [("alpha", True), ("beta", False), ("", False)]
    for latch in (alpha, beta, anonymous):
        assert [(p.id, p.is_leader) for p in latch.participants()] == expected
    leader = beta.leader()
    assert leader is not None
    assert leader.id == "alpha"
    assert leader.node == alpha.node
    assert alpha.has_leadership()
    assert not beta.has_leadership()
    # Curator's layout: protected latch- nodes; data is the UTF-8 id, "" gives 0 bytes.
    for latch, data in ((alpha, b"alpha"), (beta, b"beta"), (anonymous, b"")):
        node = latch.node or ""
        assert NODE_NAME.fullmatch(node.rsplit("/", 1)[1]), node
        assert admin.get(node)[0] == data
    assert alpha.fencing_token == admin.get(alpha.node or "")[1].czxid
    for latch in (anonymous, beta, alpha):
        latch.close()
    assert alpha.leader() is None


def test_followers_watch_only_their_predecessor(
    zk_private_server: ZooKeeperServer, zk_client_factory: ClientFactory, zk_namespace: str
) -> None:
    clients = [zk_client_factory(hosts=zk_private_server.connect_string) for _ in range(5)]
    latches = []
    for index, client in enumerate(clients):
        latch = _latch(client, "/herd", f"c{index}").start()
        latches.append(latch)
        wait_until(lambda: _in_line(clients[0], "/herd") == len(latches), "in line")
    assert latches[0].await_leadership(10)
    # A node is on the server (in line) a moment before its latch has read the create's
    # reply and knows it (``node``): wait for that too.
    wait_until(lambda: all(latch.node for latch in latches), "each latch knows its node")
    nodes = [latch.node or "" for latch in latches]

    def watchers() -> dict[str, int]:
        answer = zk_private_server.four_letter("wchp")
        counts: dict[str, int] = {}
        path = ""
        for line in answer.splitlines():
            if line.startswith("/"):
                path = line.strip()
            elif line.strip().startswith("0x") and path.startswith(zk_namespace + "/herd/"):
                key = path[len(zk_namespace) :]
                counts[key] = counts.get(key, 0) + 1
        return counts

    # Each follower watches its predecessor; the leader watches its own node.
    expected = {nodes[0]: 2, nodes[1]: 1, nodes[2]: 1, nodes[3]: 1}
    wait_until(lambda: watchers() == expected, f"watches {expected}")
    for latch in reversed(latches):
        latch.close()


# -- misuse and lifecycle -----------------------------------------------------------------


def test_misuse_fails_at_once_and_close_is_idempotent(zk_client: ZkClient) -> None:
    latch = _latch(zk_client, "/misuse")
    with pytest.raises(RecipeUsageError, match="not started"):
        latch.await_leadership(0)
    with pytest.raises(RecipeUsageError, match="never led"):
        _ = latch.fencing_token
    with pytest.raises(TypeError):
        LeaderLatch(zk_client, "/misuse", 42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        latch.add_listener(object())  # type: ignore[arg-type]
    with latch:
        assert latch.await_leadership(10)
        with pytest.raises(RecipeUsageError, match="already started"):
            latch.start()
        assert "leader token=" in repr(latch)
    latch.close()  # idempotent
    assert latch.await_leadership(1) is False
    assert not latch.has_leadership()
    assert latch.statistics().state == "closed"
    with pytest.raises(RecipeUsageError, match="already closed"):
        latch.start()


def test_closing_the_client_ends_leadership_and_wakes_waiters(
    zk_client_factory: ClientFactory,
) -> None:
    first = zk_client_factory()
    second = zk_client_factory()
    leader, events = _started(first, "/client-close")
    events.wait_for("leader")
    follower = _latch(second, "/client-close").start()
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(follower.await_leadership(30)))
    waiter.start()
    time.sleep(0.1)
    second.close()
    waiter.join(10)
    assert result == [False]
    first.close()
    events.wait_for("not_leader")
    assert not leader.has_leadership()
    leader.close()
    follower.close()


def test_a_failed_read_after_entering_leaves_no_orphan_ahead_of_us(
    zk_client_factory: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list behind our create is lost, and the re-read fails too (a flapping
    connection): the node we made is still ours, not a second one queued behind it."""
    a_client, b_client = zk_client_factory(), zk_client_factory()
    latch_a = _latch(a_client, "/orphan", "A")
    queue = latch_a._queue
    real_enter, real_participants = queue.enter, queue.participants
    entered = itertools.count(1)
    listed = itertools.count(1)

    def enter(data: bytes, token: object = None) -> Any:
        entry, names = real_enter(data)
        return (entry, None) if next(entered) == 1 else (entry, names)  # the list was lost

    def participants() -> list[str]:
        if next(listed) == 1:
            raise ConnectionLostError("connection to ZooKeeper lost (/orphan)")  # lost again
        return real_participants()

    monkeypatch.setattr(queue, "enter", enter)
    monkeypatch.setattr(queue, "participants", participants)
    latch_a.start()
    assert latch_a.await_leadership(10)
    latch_b = _latch(b_client, "/orphan", "B").start()
    wait_for_children(b_client, "/orphan", 2)
    owners = sorted(
        stat.ephemeral_owner
        for name in b_client.get_children("/orphan")
        if (stat := b_client.exists(f"/orphan/{name}")) is not None
    )
    assert owners == sorted([a_client.session_id, b_client.session_id])  # one node each
    latch_a.close()
    assert latch_b.await_leadership(10)  # nothing of A's left ahead of B
    latch_b.close()
