"""Bad input across the public API: one table, one test (issue 6, part 3).

Each case provokes one misuse and says what must come back: an error of our
hierarchy (or the TypeError/ValueError our errors also are), a message that
names what is wrong, within a time bound, and nothing left behind — after
the case a fresh client finds no ephemeral or contender node the failed call
made. A few cases assert documented *non*-errors (closing twice; a lock on a
node that already holds data). The narrower checks of settings, hosts and
path syntax live in test_settings_and_paths.py and test_client.py.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Callable

import pytest

from zk_recipes import (
    AtomicLong,
    Barrier,
    ClientStateError,
    ConfigurationError,
    ConnectTimeoutError,
    CorruptedValueError,
    CreateMode,
    DataTooLargeError,
    DoubleBarrier,
    GroupMember,
    InvalidPathError,
    LeaderLatch,
    LeaderSelector,
    LeadershipContext,
    Lock,
    MultiLock,
    NoChildrenForEphemeralsError,
    NoNodeError,
    PersistentNode,
    ReadWriteLock,
    RecipeUsageError,
    RLock,
    Semaphore,
    SemaphoreMutex,
    SharedCount,
    ZkClient,
    ZkRecipesError,
)
from zk_recipes.testing.pytest_plugin import ClientFactory

BIG = b"x" * (1 << 20)  # 1 MiB: over the default max_data_bytes


@dataclasses.dataclass
class Env:
    """What a case may use: a started client in the test's namespace, and a factory."""

    client: ZkClient
    make: ClientFactory
    #: Ephemeral nodes a case made on purpose (its setup), not by the failing call.
    allowed: set[str] = dataclasses.field(default_factory=set)
    cleanup: list[Callable[[], object]] = dataclasses.field(default_factory=list)

    def closed_client(self) -> ZkClient:
        client = self.make()
        client.close()
        return client


@dataclasses.dataclass(frozen=True)
class Case:
    id: str
    provoke: Callable[[Env], object]
    #: None: the call must succeed (the documented behaviour is "no error").
    error: type[BaseException] | None
    match: str = ""
    bound: float = 5.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


def _unreachable(env: Env) -> None:
    client = ZkClient(f"127.0.0.1:{_free_port()}")
    env.cleanup.append(client.close)
    client.start(timeout=1)


def _take(make_lock: Callable[[ZkClient], Lock | RLock]) -> Callable[[Env], object]:
    def provoke(env: Env) -> object:
        return make_lock(env.client).acquire(timeout=2)

    return provoke


def _foreign_node_with_data(env: Env) -> None:
    # Documented (contenders.py): the lock directory may hold other nodes; they
    # take part in the queue. Here the lock path itself is an app node with data.
    env.client.create("/app-node", b"payload that is not a lock")
    lock = Lock(env.client, "/app-node")
    assert lock.acquire(timeout=3)
    lock.release()
    assert env.client.get("/app-node")[0] == b"payload that is not a lock"


def _lock_under_ephemeral(env: Env) -> None:
    env.client.create("/eph", mode=CreateMode.EPHEMERAL)
    env.allowed.add("/eph")
    Lock(env.client, "/eph/lock").acquire(timeout=3)


def _corrupted_counter(env: Env) -> None:
    env.client.create("/counter", b"\x01\x02")
    AtomicLong(env.client, "/counter").increment()


def _close_twice(env: Env) -> None:
    client = env.make()
    latch = LeaderLatch(client, "/latch").start()
    node = PersistentNode(client, "/pn")
    node.start()
    count = SharedCount(client, "/count", 0).start()
    for closable in (latch, node, count, client):
        closable.close()
        closable.close()


def _release_rlock_from_other_thread(env: Env) -> None:
    lock = RLock(env.client, "/rl")
    assert lock.acquire(timeout=3)
    errors: list[BaseException] = []

    def other() -> None:
        try:
            lock.release()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join(5)
    lock.release()
    raise errors[0]


def _leader(ctx: LeadershipContext) -> None:
    return None


def _on_closed(use: Callable[[ZkClient], object]) -> Callable[[Env], object]:
    def provoke(env: Env) -> object:
        return use(env.closed_client())

    return provoke


def _barrier_wait_negative(env: Env) -> None:
    Barrier(env.client, "/b").wait(timeout=-1)


CLOSED = "ZkClient is closed; create a new one"

CASES = [
    # -- hosts and connecting
    Case(
        "hosts-semicolon-separated",
        lambda e: ZkClient("zk1:2181;zk2:2181"),
        ConfigurationError,
        r"uses ';' between servers; separate them with commas",
    ),
    Case(
        "hosts-with-url-scheme",
        lambda e: ZkClient("zk://zk1:2181"),
        ConfigurationError,
        r"looks like a URL; give host:port pairs",
    ),
    Case(
        "hosts-negative-port",
        lambda e: ZkClient("zk1:-1"),
        ConfigurationError,
        r"port must be a number from 1 to 65535",
    ),
    Case(
        "unreachable-ensemble",
        _unreachable,
        ConnectTimeoutError,
        r"127\.0\.0\.1:\d+ within 1 s",
        bound=3.0,
    ),
    # -- client requests
    Case(
        "client-create-relative",
        lambda e: e.client.create("jobs/a"),
        InvalidPathError,
        r"'jobs/a' is relative: znode paths start with '/'",
    ),
    Case(
        "client-create-path-as-bytes",
        lambda e: e.client.create(b"/jobs"),  # type: ignore[arg-type]
        InvalidPathError,
        r"must be a str like '/app/locks/x', got bytes",
    ),
    Case(
        "client-create-reserved",
        lambda e: e.client.create("/zookeeper/mine"),
        InvalidPathError,
        r"'/zookeeper/mine' is reserved by ZooKeeper; use a path of your own",
    ),
    Case(
        "client-create-over-1mb",
        lambda e: e.client.create("/big", BIG),
        DataTooLargeError,
        r"1,048,576 bytes; the limit is .*jute\.maxbuffer",
    ),
    Case(
        "client-set-over-1mb",
        lambda e: (e.client.create("/n"), e.client.set("/n", BIG)),
        DataTooLargeError,
        r"node data for /n is 1,048,576 bytes",
    ),
    Case(
        "client-set-str-data",
        lambda e: (e.client.create("/n"), e.client.set("/n", "text")),  # type: ignore[arg-type]
        TypeError,
        r"must be bytes, got str; encode text first",
    ),
    # -- recipe constructors: client type, relative/invalid/reserved paths
    Case(
        "lock-non-client",
        lambda e: Lock("127.0.0.1:2181", "/l"),  # type: ignore[arg-type]
        TypeError,
        r"Lock needs a ZkClient, got '127\.0\.0\.1:2181'",
    ),
    Case(
        "group-member-non-client",
        lambda e: GroupMember(None, "/g", "w1"),  # type: ignore[arg-type]
        TypeError,
        r"GroupMember needs a ZkClient, got None",
    ),
    Case(
        "persistent-node-non-client",
        lambda e: PersistentNode(object(), "/pn"),  # type: ignore[arg-type]
        TypeError,
        r"PersistentNode needs a ZkClient, got <object",
    ),
    Case("lock-relative", lambda e: Lock(e.client, "locks/a"), InvalidPathError, "relative"),
    Case(
        "lock-reserved",
        lambda e: Lock(e.client, "/zookeeper/locks"),
        InvalidPathError,
        "reserved by ZooKeeper",
    ),
    Case("rlock-trailing-slash", lambda e: RLock(e.client, "/r/"), InvalidPathError, "trailing"),
    Case("rwlock-relative", lambda e: ReadWriteLock(e.client, "rw"), InvalidPathError, "relative"),
    Case(
        "semaphore-empty-segment",
        lambda e: Semaphore(e.client, "/s//x", 2),
        InvalidPathError,
        r"empty segment \('//'\)",
    ),
    Case(
        "semaphore-mutex-relative",
        lambda e: SemaphoreMutex(e.client, "m"),
        InvalidPathError,
        "relative",
    ),
    Case(
        "leader-latch-reserved",
        lambda e: LeaderLatch(e.client, "/zookeeper"),
        InvalidPathError,
        "reserved",
    ),
    Case(
        "leader-selector-relative",
        lambda e: LeaderSelector(e.client, "elect", _leader),
        InvalidPathError,
        "relative",
    ),
    Case("barrier-relative", lambda e: Barrier(e.client, "b"), InvalidPathError, "relative"),
    Case(
        "double-barrier-dot-segment",
        lambda e: DoubleBarrier(e.client, "/db/../x", 2),
        InvalidPathError,
        r"relative segment '\.\.'",
    ),
    Case("shared-count-relative", lambda e: SharedCount(e.client, "c", 0), InvalidPathError, "rel"),
    Case(
        "atomic-long-path-bytes",
        lambda e: AtomicLong(e.client, b"/a"),  # type: ignore[arg-type]
        InvalidPathError,
        "must be a str",
    ),
    Case(
        "persistent-node-relative",
        lambda e: PersistentNode(e.client, "pn"),
        InvalidPathError,
        "relative",
    ),
    Case(
        "group-member-relative",
        lambda e: GroupMember(e.client, "group", "w1"),
        InvalidPathError,
        r"group_path 'group' is relative",
    ),
    Case(
        "group-member-id-with-slash",
        lambda e: GroupMember(e.client, "/group", "a/b"),
        ValueError,
        r"member_id must be a non-empty str without '/'",
    ),
    Case(
        "multilock-empty",
        lambda e: MultiLock([]),
        ValueError,
        "MultiLock needs at least one lock",
    ),
    Case(
        "multilock-same-path-twice",
        lambda e: MultiLock([Lock(e.client, "/m"), Lock(e.client, "/m")]),
        ValueError,
        "same path .*list each lock once",
    ),
    Case(
        "multilock-not-a-lock",
        lambda e: MultiLock([object()]),  # type: ignore[list-item]
        TypeError,
        "must be lock-like recipes",
    ),
    # -- data: size and type
    Case(
        "persistent-node-data-over-1mb",
        lambda e: PersistentNode(e.client, "/pn", BIG),
        DataTooLargeError,
        r"node data for /pn is 1,048,576 bytes",
    ),
    Case(
        "persistent-node-data-str",
        lambda e: PersistentNode(e.client, "/pn", "text"),  # type: ignore[arg-type]
        TypeError,
        "encode text first",
    ),
    Case(
        "barrier-data-str",
        lambda e: Barrier(e.client, "/b", data="up"),  # type: ignore[arg-type]
        TypeError,
        "data must be bytes, got str",
    ),
    Case(
        "shared-count-seed-str",
        lambda e: SharedCount(e.client, "/c", "1"),  # type: ignore[arg-type]
        TypeError,
        "seed must be an int, got '1'",
    ),
    # -- counts
    Case(
        "semaphore-max-leases-zero",
        lambda e: Semaphore(e.client, "/s", 0),
        ValueError,
        "max_leases must be >= 1, got 0",
    ),
    Case(
        "semaphore-max-leases-negative",
        lambda e: Semaphore(e.client, "/s", -3),
        ValueError,
        "max_leases must be >= 1, got -3",
    ),
    Case(
        "semaphore-more-leases-than-max",
        lambda e: Semaphore(e.client, "/s", 2).acquire_leases(3),
        ValueError,
        r"between 1 and max_leases \(2\), got 3",
    ),
    Case(
        "double-barrier-member-qty-zero",
        lambda e: DoubleBarrier(e.client, "/db", 0),
        ValueError,
        "member_qty must be >= 1, got 0",
    ),
    # -- timeouts
    Case(
        "lock-acquire-negative-timeout",
        lambda e: Lock(e.client, "/l").acquire(timeout=-2),
        ValueError,
        r"timeout must be >= 0 \(or None to wait forever\), got -2",
    ),
    Case(
        "lock-non-blocking-with-timeout",
        lambda e: Lock(e.client, "/l").acquire(blocking=False, timeout=1),
        ValueError,
        "can't specify a timeout for a non-blocking acquire",
    ),
    Case(
        "semaphore-acquire-negative-timeout",
        lambda e: Semaphore(e.client, "/s", 2).acquire(timeout=-0.5),
        ValueError,
        "timeout must be >= 0",
    ),
    Case(
        "latch-await-negative-timeout",
        lambda e: LeaderLatch(e.client, "/latch").await_leadership(timeout=-1),
        ValueError,
        r"timeout must be >= 0 \(or None to wait forever\), got -1",
    ),
    Case(
        "double-barrier-enter-negative-timeout",
        lambda e: DoubleBarrier(e.client, "/db", 2).enter(timeout=-1),
        ValueError,
        "timeout must be >= 0",
    ),
    Case("barrier-wait-negative-timeout", _barrier_wait_negative, ValueError, "must be >= 0"),
    # -- misuse of held/unheld recipes
    Case(
        "lock-release-unheld",
        lambda e: Lock(e.client, "/l").release(),
        RecipeUsageError,
        r"release of <Lock .*/l.*, which is not held",
    ),
    Case(
        "semaphore-release-unheld",
        lambda e: Semaphore(e.client, "/s", 2).release(),
        RecipeUsageError,
        r"which is not held \(it has no lease\)",
    ),
    Case(
        "semaphore-mutex-release-unheld",
        lambda e: SemaphoreMutex(e.client, "/m").release(),
        RecipeUsageError,
        "which is not held",
    ),
    Case(
        "read-lock-release-unheld",
        lambda e: ReadWriteLock(e.client, "/rw").read_lock.release(),
        RecipeUsageError,
        "not held",
    ),
    Case(
        "rlock-release-from-other-thread",
        _release_rlock_from_other_thread,
        RecipeUsageError,
        "only the holding thread may release a re-entrant RLock",
    ),
    Case(
        "latch-await-before-start",
        lambda e: LeaderLatch(e.client, "/latch").await_leadership(timeout=1),
        RecipeUsageError,
        r"is not started: call start\(\) first",
    ),
    Case("close-twice-is-harmless", _close_twice, None),
    # -- a closed client, for every recipe
    Case(
        "closed-client-lock",
        _on_closed(lambda c: Lock(c, "/l").acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-rlock",
        _on_closed(lambda c: RLock(c, "/l").acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-write-lock",
        _on_closed(lambda c: ReadWriteLock(c, "/rw").write_lock.acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-read-lock",
        _on_closed(lambda c: ReadWriteLock(c, "/rw").read_lock.acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-semaphore",
        _on_closed(lambda c: Semaphore(c, "/s", 2).acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-semaphore-mutex",
        _on_closed(lambda c: SemaphoreMutex(c, "/m").acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-multilock",
        _on_closed(lambda c: MultiLock([Lock(c, "/a"), Lock(c, "/b")]).acquire(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-leader-latch",
        _on_closed(lambda c: LeaderLatch(c, "/latch").start()),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-leader-selector",
        _on_closed(lambda c: LeaderSelector(c, "/sel", _leader).start()),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-barrier",
        _on_closed(lambda c: Barrier(c, "/b").wait(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-double-barrier",
        _on_closed(lambda c: DoubleBarrier(c, "/db", 2).enter(timeout=1)),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-shared-count",
        _on_closed(lambda c: SharedCount(c, "/c", 0).start()),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-atomic-long",
        _on_closed(lambda c: AtomicLong(c, "/a").increment()),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-persistent-node",
        _on_closed(lambda c: PersistentNode(c, "/pn").start()),
        ClientStateError,
        CLOSED,
    ),
    Case(
        "closed-client-group-member",
        _on_closed(lambda c: GroupMember(c, "/g", "w1").start()),
        ClientStateError,
        CLOSED,
    ),
    # -- what is already in the tree
    Case("lock-on-node-with-data", _foreign_node_with_data, None),
    Case(
        "lock-under-ephemeral-parent",
        _lock_under_ephemeral,
        NoChildrenForEphemeralsError,
        r"cannot create /.*/eph/lock: a parent of it is an EPHEMERAL node",
    ),
    Case(
        "atomic-long-corrupted-data",
        _corrupted_counter,
        CorruptedValueError,
        r"/counter holds 2 byte\(s\) \(0102\), not a 64-bit counter .*fix or delete the node",
    ),
]


def _leftovers(client: ZkClient, allowed: set[str]) -> list[str]:
    """Ephemeral or contender (``_c_``) nodes in the namespace, except ``allowed``."""
    found: list[str] = []
    pending = ["/"]
    while pending:
        path = pending.pop()
        try:
            names = client.get_children(path)
        except NoNodeError:
            # An empty CONTAINER (a lock's directory) the server reaped after we
            # listed it: the test server checks containers every 0.1 s.
            continue
        for name in names:
            child = f"{path.rstrip('/')}/{name}"
            stat = client.exists(child)
            if stat is None:
                continue
            if (stat.ephemeral_owner or name.startswith("_c_")) and child not in allowed:
                found.append(child)
            pending.append(child)
    return found


def test_case_table_is_broad() -> None:
    assert len(CASES) >= 30
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input(case: Case, zk_client_factory: ClientFactory) -> None:
    env = Env(client=zk_client_factory(), make=zk_client_factory)
    started = time.monotonic()
    try:
        if case.error is None:
            case.provoke(env)
        else:
            with pytest.raises(case.error, match=case.match) as info:
                case.provoke(env)
            error = info.value
            assert isinstance(error, (ZkRecipesError, TypeError, ValueError)), repr(error)
        elapsed = time.monotonic() - started
        assert elapsed < case.bound, f"{case.id} took {elapsed:.2f} s (bound {case.bound} s)"
        # Loses nothing: the case's clients are still open, so an ephemeral or
        # contender node the failed call left behind would still be there.
        fresh = zk_client_factory()
        assert _leftovers(fresh, env.allowed) == []
    finally:
        for cleanup in env.cleanup:
            cleanup()


def test_a_timeout_given_as_acquires_first_argument_is_refused(zk_client: ZkClient) -> None:
    """``acquire(5)``: a 5 s timeout to someone coming from Curator; ``threading`` reads it as
    ``blocking=True`` and waits for ever. Refused, with the call to write instead."""
    from zk_recipes import WrongTypeError

    for recipe in (Lock(zk_client, "/trap/lock"), Semaphore(zk_client, "/trap/sem", 1)):
        with pytest.raises(WrongTypeError, match=r"write acquire\(timeout=5\)"):
            recipe.acquire(5)  # type: ignore[arg-type]


def test_a_kazoo_client_given_to_a_recipe_says_to_use_a_zkclient() -> None:
    from kazoo.client import KazooClient

    from zk_recipes import (
        ChildrenCache,
        DistributedQueue,
        NodeCache,
        ServiceDiscovery,
        TreeCache,
        WrongTypeError,
    )

    kazoo_client = KazooClient("127.0.0.1:2181")
    makers: list[Callable[..., object]] = [
        Lock,
        DistributedQueue,
        ServiceDiscovery,
        TreeCache,
        ChildrenCache,
        NodeCache,
    ]
    for make in makers:
        with pytest.raises(WrongTypeError, match="got kazoo's KazooClient: a ZkClient makes"):
            make(kazoo_client, "/x")
