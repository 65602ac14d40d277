"""Internal wake-ups run on the connection thread; every other watch keeps kazoo's worker.

A watch callback marked with ``mark_inline`` (only ours, that set an event)
skips the hop through kazoo's watch-worker thread. A user's callback must
never run on the connection thread: one that blocked would stall the reads,
and with them the proof that the server hears us.
"""

from __future__ import annotations

import threading

from zk_recipes import Lock, ZkClient
from zk_recipes._types import WatchEvent, WatchEventType, is_inline, mark_inline
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


class Recorder:
    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.events: list[WatchEvent] = []
        self.fired = threading.Event()

    def __call__(self, event: WatchEvent) -> None:
        self.threads.append(threading.current_thread())
        self.events.append(event)
        self.fired.set()


def connection_thread(client: ZkClient) -> threading.Thread:
    thread: threading.Thread = client.kazoo_client._connection._connection_routine
    return thread


def test_a_marked_watch_runs_on_the_connection_thread(zk_client: ZkClient) -> None:
    zk_client.create("/watched", b"")
    ours, users = Recorder(), Recorder()
    mark_inline(ours)
    assert is_inline(ours)
    assert not is_inline(users)
    zk_client.get("/watched", watch=ours)
    zk_client.exists("/watched", watch=users)
    zk_client.delete("/watched")
    assert ours.fired.wait(5)
    assert users.fired.wait(5)
    assert ours.threads == [connection_thread(zk_client)]
    assert users.threads[0] is not connection_thread(zk_client)
    # The namespace is stripped from the path as for any watch.
    assert ours.events == users.events == [WatchEvent(WatchEventType.DELETED, "/watched")]


def test_a_user_watch_that_blocks_does_not_stall_the_connection(zk_client: ZkClient) -> None:
    zk_client.create("/slow", b"")
    release = threading.Event()
    entered = threading.Event()

    def blocking(_event: WatchEvent) -> None:
        entered.set()
        release.wait(10)

    zk_client.get("/slow", watch=blocking)
    zk_client.set("/slow", b"1")
    try:
        assert entered.wait(5)
        # The connection thread still reads replies while the callback blocks.
        assert zk_client.get("/slow")[0] == b"1"
    finally:
        release.set()


def test_a_lock_waiter_wakes_while_a_user_watch_holds_kazoos_worker(
    zk_client_factory: ClientFactory,
) -> None:
    # The lock's wake-up is inline: it does not queue behind a user's slow callback.
    holder = Lock(zk_client_factory(), "/handoff")
    waiter_client = zk_client_factory()
    waiter = Lock(waiter_client, "/handoff")
    waiter_client.create("/busy", b"")
    release, entered = threading.Event(), threading.Event()

    def blocking(_event: WatchEvent) -> None:
        entered.set()
        release.wait(20)

    assert holder.acquire(timeout=5)
    got = threading.Event()

    def wait_turn() -> None:
        if waiter.acquire(timeout=15):
            got.set()

    thread = threading.Thread(target=wait_turn)
    thread.start()
    try:
        wait_until(lambda: len(holder.contenders()) == 2, "the waiter queued", timeout=5)
        waiter_client.get("/busy", watch=blocking)
        waiter_client.delete("/busy")
        assert entered.wait(5)  # kazoo's watch worker is now stuck in the user's callback
        holder.release()
        assert got.wait(10)
    finally:
        release.set()
        thread.join(20)
    waiter.release()
