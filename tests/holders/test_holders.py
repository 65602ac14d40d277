"""holders(): every recipe under a path, its holders and its queue, read from real nodes."""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from zk_recipes import (
    ConfigurationError,
    InvalidPathError,
    LeaderLatch,
    LeaderSelector,
    LeadershipContext,
    Lock,
    NoNodeError,
    Owner,
    QueuedNode,
    ReadWriteLock,
    RecipeHolders,
    RecipeLayout,
    RLock,
    Semaphore,
    WrongTypeError,
    ZkClient,
    digest_acl,
    holders,
    holders_table,
    register_layout,
)
from zk_recipes._inspect import layouts
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

HOST = socket.gethostname()
PID = os.getpid()


def _in_line(client: ZkClient, path: str) -> int:
    try:
        return len(client.get_children(path))
    except NoNodeError:
        return 0


def _queued(client: ZkClient, path: str, count: int) -> Callable[[], bool]:
    return lambda: _in_line(client, path) == count


def _one(report: list[RecipeHolders], path: str) -> RecipeHolders:
    found = [r for r in report if r.path == path]
    assert len(found) == 1, report
    return found[0]


class _Background:
    """Acquires that wait on threads of their own; ``cancel()``-ed and joined at the end."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.cancels: list[Callable[[], None]] = []

    def start(self, acquire: Callable[[], object], cancel: Callable[[], None]) -> None:
        thread = threading.Thread(target=acquire, daemon=True)
        thread.start()
        self.threads.append(thread)
        self.cancels.append(cancel)

    def stop(self) -> None:
        for cancel in self.cancels:
            cancel()
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()


@pytest.fixture
def background() -> Iterator[_Background]:
    waiting = _Background()
    yield waiting
    waiting.stop()


def _hold_until_cancelled(ctx: LeadershipContext) -> None:
    ctx.cancelled.wait(30)


def test_a_held_lock_and_its_queue_in_order(
    zk_client_factory: ClientFactory, background: _Background
) -> None:
    reader = zk_client_factory()
    clients = [zk_client_factory() for _ in range(3)]
    locks = [Lock(c, "/app/report", identifier=f"job-{i}") for i, c in enumerate(clients)]
    assert locks[0].acquire()
    for count, lock in enumerate(locks[1:], start=2):
        background.start(functools.partial(lock.acquire, timeout=30), lock.cancel)
        wait_until(_queued(reader, "/app/report", count), "queued")

    report = holders(reader)

    assert [(r.path, r.kind) for r in report] == [("/app/report", "lock")]
    lock_report = report[0]
    [holder] = lock_report.holders
    assert holder.holding
    assert holder.position == 0
    assert holder.session_id == clients[0].session_id
    assert holder.fencing_token == locks[0].fencing_token
    assert holder.node == locks[0].node
    assert (holder.owner.host, holder.owner.pid, holder.identifier) == (HOST, PID, "job-0")
    assert holder.data is None
    assert holder.mode is None
    assert holder.since == holder.owner.since
    assert abs(holder.since - time.time()) < 30
    assert [(n.identifier, n.position, n.holding) for n in lock_report.waiting] == [
        ("job-1", 1, False),
        ("job-2", 2, False),
    ]
    assert [n.session_id for n in lock_report.waiting] == [c.session_id for c in clients[1:]]
    sequences = [n.sequence for n in (holder, *lock_report.waiting)]
    assert sequences == sorted(sequences)
    assert len(set(sequences)) == 3
    # The same answer from the lock's own path, and from a path above it.
    assert holders(reader, "/app/report") == report
    assert holders(reader, "/app") == report
    locks[0].release()


def test_an_rlock_entered_twice_is_one_node(zk_client_factory: ClientFactory) -> None:
    client = zk_client_factory()
    lock = RLock(client, "/r")
    assert lock.acquire()
    assert lock.acquire()
    [report] = holders(zk_client_factory())
    assert report.kind == "lock"
    assert [n.fencing_token for n in report.holders] == [lock.fencing_token]
    assert report.waiting == ()
    lock.release()
    lock.release()


def test_read_write_lock_readers_hold_and_a_writer_waits(
    zk_client_factory: ClientFactory, background: _Background
) -> None:
    reader_client = zk_client_factory()
    rws = [ReadWriteLock(zk_client_factory(), "/rw", identifier=f"rw-{i}") for i in range(4)]
    assert rws[0].read_lock.acquire()
    assert rws[1].read_lock.acquire()
    writer = rws[2].write_lock
    background.start(lambda: writer.acquire(timeout=30), writer.cancel)
    wait_until(lambda: _in_line(reader_client, "/rw") == 3, "writer queued")
    late = rws[3].read_lock
    background.start(lambda: late.acquire(timeout=30), late.cancel)
    wait_until(lambda: _in_line(reader_client, "/rw") == 4, "late reader queued")

    report = _one(holders(reader_client), "/rw")

    assert report.kind == "read-write lock"
    assert [(n.identifier, n.mode) for n in report.holders] == [("rw-0", "read"), ("rw-1", "read")]
    assert [(n.identifier, n.mode, n.position) for n in report.waiting] == [
        ("rw-2", "write", 2),
        ("rw-3", "read", 3),
    ]
    assert report.holders[0].fencing_token == rws[0].read_lock.fencing_token
    rws[0].read_lock.release()
    rws[1].read_lock.release()
    wait_until(writer.is_held, "the writer got it")
    after = _one(holders(reader_client), "/rw")
    assert [(n.identifier, n.mode) for n in after.holders] == [("rw-2", "write")]
    assert [n.identifier for n in after.waiting] == ["rw-3"]
    # The writer's thread holds it (re-entrant: only that thread may release); the
    # client's close at the end of the test ends it.


def test_semaphore_lease_holders_and_waiters(
    zk_client_factory: ClientFactory, background: _Background
) -> None:
    reader = zk_client_factory()
    clients = [zk_client_factory() for _ in range(4)]
    sems = [Semaphore(c, "/sem", 2) for c in clients]
    assert sems[0].acquire()
    assert sems[1].acquire()
    background.start(lambda: sems[2].acquire(timeout=30), sems[2].cancel)
    # The first waiter holds the internal mutex and has made its lease node.
    wait_until(lambda: _in_line(reader, "/sem/leases") == 3, "first waiter's lease")
    background.start(lambda: sems[3].acquire(timeout=30), sems[3].cancel)
    wait_until(lambda: _in_line(reader, "/sem/locks") == 2, "second waiter queued")

    report = _one(holders(reader), "/sem")

    assert report.kind == "semaphore"
    assert [n.session_id for n in report.holders] == [clients[0].session_id, clients[1].session_id]
    tokens = [sems[0].fencing_token, sems[1].fencing_token]
    assert [n.fencing_token for n in report.holders] == tokens
    assert all(n.owner.pid == PID and n.node.startswith("/sem/leases/") for n in report.holders)
    first, second = report.waiting
    assert (first.session_id, first.position) == (clients[2].session_id, 2)
    assert first.node.startswith("/sem/leases/")  # its pending lease
    assert (second.session_id, second.position) == (clients[3].session_id, 3)
    assert second.node.startswith("/sem/locks/")  # still queued on the mutex
    sems[0].release()
    wait_until(lambda: sems[2].is_held(), "the first waiter got a lease")
    after = _one(holders(reader), "/sem")
    assert {n.session_id for n in after.holders} == {clients[1].session_id, clients[2].session_id}
    sems[1].release()
    sems[2].release()


def test_leader_latch_leader_and_standbys(zk_client_factory: ClientFactory) -> None:
    reader = zk_client_factory()
    owner_json = Owner(host="web-7", pid=4242, id="cron").to_bytes().decode()
    clients = [zk_client_factory() for _ in range(3)]
    latches = []
    for client, ident in zip(clients, ("alpha", owner_json, ""), strict=True):
        latches.append(LeaderLatch(client, "/election", ident).start())
        wait_until(_queued(reader, "/election", len(latches)), "candidate in line")
    assert latches[0].await_leadership(10)
    try:
        report = _one(holders(reader), "/election")
        assert report.kind == "leader latch"
        [leader] = report.holders
        assert (leader.identifier, leader.data, leader.owner) == ("alpha", "alpha", Owner())
        assert leader.fencing_token == latches[0].fencing_token
        assert leader.session_id == clients[0].session_id
        json_standby, empty_standby = report.waiting
        assert (json_standby.owner.host, json_standby.owner.pid) == ("web-7", 4242)
        assert (json_standby.identifier, json_standby.data) == ("cron", None)
        assert (empty_standby.identifier, empty_standby.data) == (None, "")
        assert empty_standby.owner == Owner()
        assert empty_standby.since == pytest.approx(time.time(), abs=30)  # the node's ctime
    finally:
        for latch in latches:
            latch.close()


def test_a_leaders_since_bounds_its_term_unless_its_node_records_the_start(
    zk_client_factory: ClientFactory,
) -> None:
    """A latch node says when its candidate joined; its term began then or later."""
    reader = zk_client_factory()
    first = LeaderLatch(zk_client_factory(), "/bound", "first").start()
    assert first.await_leadership(10)
    joined = Owner(host="web-7", pid=4242, since=time.time() - 300, command_pid=4250)
    second = LeaderLatch(zk_client_factory(), "/bound", joined.to_bytes().decode()).start()
    wait_until(_queued(reader, "/bound", 2), "the second candidate in line")
    standby = _one(holders(reader), "/bound").waiting[0]
    assert (standby.since, standby.since_exact) == (joined.since, True)  # when it queued
    first.close()
    assert second.await_leadership(10)
    try:
        (leader,) = _one(holders(reader), "/bound").holders
        assert joined.since is not None
        # It leads for seconds, yet its node can only say "joined 300 s ago": a bound.
        assert (leader.since, leader.since_exact) == (joined.since, False)
        assert leader.age(joined.since + 300.5) == "≤5m"
        assert leader.as_dict()["since_exact"] is False
        assert leader.as_dict()["command_pid"] == 4250
        assert "≤" in holders_table([_one(holders(reader), "/bound")])
    finally:
        second.close()
    recorded = dataclasses.replace(joined, held_since=time.time() - 2)
    third = LeaderLatch(zk_client_factory(), "/bound", recorded.to_bytes().decode()).start()
    try:
        assert third.await_leadership(10)
        (leader,) = _one(holders(reader), "/bound").holders
        assert (leader.since, leader.since_exact) == (recorded.held_since, True)
    finally:
        third.close()


def test_leader_selector_is_told_apart_by_its_identifiers(zk_client_factory: ClientFactory) -> None:
    reader = zk_client_factory()
    clients = [zk_client_factory() for _ in range(2)]
    started = threading.Event()

    def lead(ctx: LeadershipContext) -> None:
        started.set()
        _hold_until_cancelled(ctx)

    first = LeaderSelector(clients[0], "/sel", lead, identifier="sel-a").start()
    assert started.wait(10)
    second = LeaderSelector(clients[1], "/sel", lead, identifier="sel-b").start()
    try:
        wait_until(lambda: _in_line(reader, "/sel") == 2, "second candidate in line")
        report = _one(holders(reader), "/sel")
        assert report.kind == "leader selector"
        assert [n.identifier for n in report.holders] == ["sel-a"]
        assert [n.identifier for n in report.waiting] == ["sel-b"]
        assert report.holders[0].session_id == clients[0].session_id
    finally:
        first.close()
        second.close()


@pytest.fixture
def fresh_layouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout registry as if nothing had registered yet; put back after the test."""
    monkeypatch.setattr(layouts, "_registered", [])
    monkeypatch.setattr(layouts, "_loaded", False)


def _parse_host_pid(data: str) -> Owner | None:
    host, _, pid = data.partition("@")
    return Owner(host=host, pid=int(pid)) if pid.isdigit() else None


def test_a_registered_layout_names_its_recipes(
    zk_client_factory: ClientFactory, fresh_layouts: None
) -> None:
    register_layout(RecipeLayout("job lock", base="lock", path="jobs/*/lock"))
    cron_layout = RecipeLayout(
        "cron leader", base="leader latch", path="cron/*", owner_of_data=_parse_host_pid
    )
    register_layout(cron_layout)
    reader, client = zk_client_factory(), zk_client_factory()
    job = Lock(client, "/app/jobs/nightly/lock", identifier="run-7")
    assert job.acquire()
    elsewhere = Lock(client, "/app/jobs/nightly/other")  # not the layout's last segment
    assert elsewhere.acquire()
    cron = LeaderLatch(client, "/app/cron/main", f"{HOST}@{PID}").start()
    assert cron.await_leadership(10)
    try:
        report = holders(reader, "/app")
        assert [(r.path, r.kind) for r in report] == [
            ("/app/cron/main", "cron leader"),
            ("/app/jobs/nightly/lock", "job lock"),
            ("/app/jobs/nightly/other", "lock"),
        ]
        [leader] = report[0].holders
        assert (leader.owner.host, leader.owner.pid) == (HOST, PID)
        assert leader.identifier == f"{HOST}@{PID}"
        [holder] = report[1].holders
        assert (holder.identifier, holder.owner.pid) == ("run-7", PID)
        assert holder.fencing_token == job.fencing_token
    finally:
        cron.close()
        job.release()
        elsewhere.release()


def test_layouts_load_from_entry_points_and_skip_the_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_layouts: None
) -> None:
    (tmp_path / "facelayouts.py").write_text(
        "from zk_recipes import RecipeLayout\n"
        "LAYOUTS = [RecipeLayout('face lock', base='lock', path='face/*')]\n"
    )
    info = tmp_path / "face_demo-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: face-demo\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[zk_recipes.layouts]\n"
        "face = facelayouts:LAYOUTS\n"
        "missing = no_such_framework_here:LAYOUTS\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = {layout.kind for layout in layouts.layouts()}
    assert "face lock" in found
    assert layouts.kind_of("lock", "/x/face/y") == RecipeLayout(
        "face lock", base="lock", path="face/*"
    )
    assert layouts.kind_of("leader latch", "/x/face/y") is None


def test_layouts_refuse_what_could_never_match() -> None:
    with pytest.raises(ConfigurationError, match="base must be one of 'lock'"):
        RecipeLayout("x", base="mutex", path="a/*")
    with pytest.raises(ConfigurationError, match="no leading, trailing or doubled"):
        RecipeLayout("x", base="lock", path="/a/*")
    with pytest.raises(WrongTypeError, match="non-empty str"):
        RecipeLayout("", base="lock", path="a")
    with pytest.raises(WrongTypeError, match=r"takes a zk_recipes\.RecipeLayout"):
        register_layout("a/*")  # type: ignore[arg-type]
    layout = RecipeLayout("x", base="lock", path="singleton/*/*")
    assert layout.matches("lock", "/celery/singleton/t/k")
    assert not layout.matches("lock", "/celery/singleton/t")
    assert not layout.matches("lock", "/singleton/t")
    assert not layout.matches("leader latch", "/celery/singleton/t/k")


def test_json_and_table(zk_client_factory: ClientFactory, background: _Background) -> None:
    reader = zk_client_factory()
    holder_client, waiter_client = zk_client_factory(), zk_client_factory()
    lock = Lock(holder_client, "/t", identifier="nightly")
    assert lock.acquire()
    waiter = Lock(waiter_client, "/t")
    background.start(lambda: waiter.acquire(timeout=30), waiter.cancel)
    wait_until(lambda: _in_line(reader, "/t") == 2, "waiter queued")

    report = holders(reader)
    encoded = json.loads(json.dumps([r.as_dict() for r in report]))
    assert encoded == [r.as_dict() for r in report]
    [entry] = encoded
    assert set(entry) == {"path", "kind", "items", "dead", "holders", "waiting"}
    assert entry["items"] is None  # a queue's length; not a lock's
    assert entry["dead"] is None  # a queue's dead letters
    assert set(entry["holders"][0]) == {
        "node",
        "sequence",
        "holding",
        "position",
        "mode",
        "host",
        "pid",
        "thread",
        "id",
        "since",
        "since_exact",
        "command_pid",
        "command_pgid",
        "fencing_token",
        "session_id",
        "session_id_hex",
        "data",
        "attempts",
    }
    assert entry["holders"][0]["pid"] == PID
    assert entry["holders"][0]["session_id_hex"] == f"{holder_client.session_id:#x}"
    assert entry["waiting"][0]["position"] == 1

    since = report[0].holders[0].since
    node = report[0].holders[0]
    ages = [node.age(since + d) for d in (-5, 0.5, 59.5, 200.5, 7200.5, 3 * 86400 + 0.5)]
    assert ages == ["0s", "0s", "59s", "3m", "2h", "3d"]
    table = holders_table(report, now=since + 200)
    lines = table.splitlines()
    assert lines[0].split() == [
        "RECIPE",
        "KIND",
        "ROLE",
        "HOST",
        "PID",
        "ID",
        "SINCE",
        "TOKEN",
        "SESSION",
    ]
    assert HOST in lines[1]
    assert str(PID) in lines[1]
    assert "nightly" in lines[1]
    assert "holder" in lines[1]
    assert "3m" in lines[1]
    assert str(lock.fencing_token) in lines[1]
    assert f"{holder_client.session_id:#x}" in lines[1]
    assert "waiting #1" in lines[2]
    assert holders_table([]) == "no locks, semaphores, elections or queues found"
    lock.release()


def test_an_empty_or_missing_path_gives_an_empty_list(zk_client: ZkClient) -> None:
    zk_client.create("/plain/a/b", b"x", parents=True)
    assert holders(zk_client, "/plain") == []
    assert holders(zk_client, "/no/such/path") == []
    assert holders(zk_client) == []
    with pytest.raises(InvalidPathError):
        holders(zk_client, "relative")


def test_a_subtree_this_client_may_not_list_is_left_out(zk_client: ZkClient) -> None:
    zk_client.create("/secret", acl=(digest_acl("someone-else", "pw"),))
    lock = Lock(zk_client, "/open")
    assert lock.acquire()
    assert [r.path for r in holders(zk_client)] == ["/open"]
    lock.release()


def test_nodes_that_vanish_mid_walk_are_left_out(
    zk_client_factory: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = zk_client_factory()
    holder_client = zk_client_factory()
    gone = Lock(zk_client_factory(), "/v/gone")
    stays = Lock(holder_client, "/v/stays")
    assert gone.acquire()
    assert stays.acquire()
    doomed_dir = zk_client_factory()
    doomed_dir.create("/v/dir/sub", parents=True)
    gone_node = gone.node
    assert gone_node is not None
    real_get = reader.get_async
    real_list = reader.get_children_async

    def get_after_release(path: str, watch: object = None) -> object:
        if path == gone_node and gone.is_held():
            gone.release()  # listed, then gone before its data is read
        return real_get(path)

    def list_after_delete(path: str, watch: object = None) -> object:
        if path == "/v/dir/sub":
            doomed_dir.delete("/v/dir/sub")  # listed as a child, gone before it is listed
        return real_list(path)

    monkeypatch.setattr(reader, "get_async", get_after_release)
    monkeypatch.setattr(reader, "get_children_async", list_after_delete)
    report = holders(reader, "/v")

    assert [r.path for r in report] == ["/v/stays"]
    assert report[0].holders[0].session_id == holder_client.session_id
    stays.release()


def test_a_busy_tree_reads_without_errors(zk_client_factory: ClientFactory) -> None:
    reader = zk_client_factory()
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn(client: ZkClient, path: str) -> None:
        lock = Lock(client, path)
        try:
            while not stop.is_set():
                with lock:
                    pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [
        threading.Thread(target=churn, args=(zk_client_factory(), f"/busy/{i % 2}"))
        for i in range(4)
    ]
    for worker in workers:
        worker.start()
    try:
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            for recipe in holders(reader, "/busy"):
                assert recipe.kind == "lock"
                assert len(recipe.holders) <= 1
                nodes: tuple[QueuedNode, ...] = (*recipe.holders, *recipe.waiting)
                assert [n.position for n in nodes] == list(range(len(nodes)))
    finally:
        stop.set()
        for worker in workers:
            worker.join(10)
    assert errors == []


def test_owner_reads_as_host_pid_and_id() -> None:
    assert str(Owner(host="web-1", pid=42, id="t-1")) == "web-1:42 (t-1)"
    assert str(Owner(host="web-1", pid=42)) == "web-1:42"
    assert str(Owner(pid=42)) == "pid 42"
    assert str(Owner(id="t-1")) == "id t-1"
    assert str(Owner()) == "another process (no zk-recipes owner data)"


@pytest.mark.parametrize("identifier", [None, "", "task-7", 'odd "name" \\ é'])
def test_owner_here_bytes_is_here_to_bytes_byte_for_byte(identifier: str | None) -> None:
    thread = threading.current_thread()
    original, thread.name = thread.name, 'worker "1" \\ ß'
    try:
        for _ in range(2):  # the second time comes from the kept parts
            data = Owner.here_bytes(identifier)
            since = json.loads(data)["since"]
            here = Owner.here(identifier)
            assert data == dataclasses.replace(here, since=since).to_bytes()
            assert Owner.from_bytes(data) == dataclasses.replace(here, since=since)
    finally:
        thread.name = original
