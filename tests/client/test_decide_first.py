"""Decide first, talk later: nothing a log stream does can delay a loss, nor a dead thread.

A logging handler whose stream blocks (a full pipe to a log shipper that
stopped reading: Docker's default blocking log mode, a stalled journald or
fluentd) is correlated with the faults the watchdog exists for, since a
partition that cuts ZooKeeper off usually cuts the shipper off too. And thread
or memory exhaustion comes with requests piling up behind a partition. Neither
may keep a holder believing it holds after the server has given its lock away.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from zk_recipes import (
    ConnectionState,
    ErrorPolicy,
    LeaderLatch,
    Lock,
    LockLost,
    ZkClient,
)
from zk_recipes._threads import said, say
from zk_recipes.testing import StateRecorder, TcpProxy, ZooKeeperServer
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.slow

SESSION = 2.0


@contextlib.contextmanager
def a_stalled_log_stream(level: int = logging.WARNING) -> Iterator[None]:
    """A root handler writing to a full pipe nobody reads, drained (and removed) at the end."""
    read_end, write_end = os.pipe()
    flags = fcntl.fcntl(write_end, fcntl.F_GETFL)
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 4096)  # as full as a stalled shipper leaves it
    fcntl.fcntl(write_end, fcntl.F_SETFL, flags)  # back to blocking, as stderr is
    stream = os.fdopen(write_end, "w", buffering=1)
    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        draining = threading.Event()

        def drain() -> None:
            with contextlib.suppress(OSError):
                while os.read(read_end, 65536):
                    draining.set()

        threading.Thread(target=drain, daemon=True).start()
        assert said(30), "the log writer never caught up once the stream moved again"
        stream.close()
        os.close(read_end)


def _loss_seen(lock: Lock, session: LeaderLatch, standard: LeaderLatch) -> dict[str, Any]:
    try:
        lock.check()
        check = "passes"
    except LockLost:
        check = "raises LockLost"
    return {
        "check()": check,
        "is_held()": lock.is_held(),
        "SESSION latch leads": session.has_leadership(),
        "STANDARD latch leads": standard.has_leadership(),
    }


def test_a_blocked_log_stream_delays_no_loss(
    zk_private_server: ZooKeeperServer, zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    holder = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=SESSION)
    rival = zk_client_factory(hosts=zk_private_server.connect_string, session_timeout=SESSION)
    states = StateRecorder()
    holder.add_listener(states)
    lock = Lock(holder, "/blocked/lock")
    assert lock.acquire(timeout=5)
    session_latch = LeaderLatch(
        holder, "/blocked/session", "A", error_policy=ErrorPolicy.SESSION
    ).start()
    standard_latch = LeaderLatch(holder, "/blocked/standard", "A").start()
    assert session_latch.await_leadership(5)
    assert standard_latch.await_leadership(5)
    theirs = Lock(rival, "/blocked/lock")
    with a_stalled_log_stream():
        # The library's own log writer is stuck from the start, as in a real stall.
        say(functools.partial(logging.getLogger("zk_recipes.test").warning, "stuck"))
        zk_proxy.blackhole()
        assert theirs.acquire(timeout=15)
        # The server gave the lock away: the holder must know it already.
        assert _loss_seen(lock, session_latch, standard_latch) == {
            "check()": "raises LockLost",
            "is_held()": False,
            "SESSION latch leads": False,
            "STANDARD latch leads": False,
        }
        assert states.wait_for(ConnectionState.LOST, timeout=1).simulated
        assert lock.lost.wait(1)  # set before any word about it is written
        zk_proxy.heal()
    theirs.release()


def test_a_lock_is_marked_lost_before_its_warning_is_logged(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = zk_client_factory(hosts=zk_proxy.connect_string, session_timeout=SESSION)
    lock = Lock(client, "/order/lock")
    assert lock.acquire(timeout=5)
    seen: list[bool] = []

    class Witness(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if getattr(record, "zk_event", None) == "lock.lost":
                seen.append(lock.lost.is_set())

    witness = Witness()
    logging.getLogger("zk_recipes.lock").addHandler(witness)
    try:
        zk_proxy.blackhole()
        assert lock.lost.wait(10)
        assert said(10)
        for _ in range(100):
            if seen:
                break
            lock.lost.wait(0.05)
    finally:
        logging.getLogger("zk_recipes.lock").removeHandler(witness)
        zk_proxy.heal()
    assert seen == [True]


def test_a_thread_that_cannot_start_wedges_neither_the_watchdog_nor_a_listener(
    zk_private_server: ZooKeeperServer,
    zk_proxy: TcpProxy,
    zk_client_factory: ClientFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holder: ZkClient = zk_client_factory(
        hosts=zk_proxy.connect_string, session_timeout=3.0, simulated_expiry_fraction=0.4
    )
    rival = zk_client_factory(hosts=zk_private_server.connect_string, session_timeout=3.0)
    lock = Lock(holder, "/exhausted/lock")
    assert lock.acquire(timeout=5)
    latch = LeaderLatch(holder, "/exhausted/latch", "A", error_policy=ErrorPolicy.SESSION)
    latch.start()
    assert latch.await_leadership(5)
    exhausted = threading.Event()
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        if exhausted.is_set() and self.name.startswith("zk-recipes"):
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    exhausted.set()  # no zk-recipes thread can start from now on: listeners, log writer...
    zk_proxy.blackhole()
    theirs = Lock(rival, "/exhausted/lock")
    got = theirs.acquire(timeout=15)
    try:
        assert got
        with pytest.raises(LockLost):
            lock.check()
        assert not latch.has_leadership()
        assert not lock.lost.is_set()  # its listener could not start: it waits, not lost
        exhausted.clear()  # threads start again: the watchdog starts what was put off
        assert lock.lost.wait(5), "the loss was never delivered once threads could start"
        zk_proxy.heal()
        assert holder.wait_connected(15)
        theirs.release()
        lock.release()  # a lost lock is released as any other
        assert lock.acquire(timeout=10)  # the client, its watchdog and listeners work again
        lock.release()
    finally:
        exhausted.clear()
        zk_proxy.heal()
        with contextlib.suppress(Exception):
            theirs.release()
        latch.close()
