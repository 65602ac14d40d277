"""One session watchdog thread for the whole process, looking at each client only when due.

A thread per client that woke four times a second cost more than a core at
1,000 idle clients and lost 80 % of their sessions to the starved replies
(benchmarks/README.md, "Sessions"). The scheduler is tested with trackers of
its own (it knows nothing of ZooKeeper), the sharing with real clients.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.client.suspend import fake_suspend
from zk_recipes import ZkClient
from zk_recipes._client import watchdog as watchdog_module
from zk_recipes._client.watchdog import THREAD_NAME, Watchdog
from zk_recipes.testing import wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory


class Counted:
    """A tracker that counts its looks and asks for the next one after ``every`` seconds."""

    def __init__(self, every: float | None, looks_wanted: int = 0, fails: int = 0) -> None:
        self.every = every
        self.looks = 0
        self.fails = fails
        self.reached = threading.Event()
        self._wanted = looks_wanted

    def look(self) -> float | None:
        self.looks += 1
        if self.looks >= self._wanted:
            self.reached.set()
        if self.fails:
            self.fails -= 1
            raise RuntimeError("a tracker's bug")
        return self.every


class Gated(Counted):
    """A tracker done with (its look says None) once its gate opens."""

    def __init__(self) -> None:
        super().__init__(None)
        self.gate = threading.Event()

    def look(self) -> float | None:
        self.gate.wait(10)
        return super().look()


def _watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD_NAME]


def test_a_tracker_is_looked_at_when_its_look_falls_due_not_on_every_wake() -> None:
    dog = Watchdog()
    busy, idle = Counted(0.05, looks_wanted=6), Counted(60.0)
    dog.follow(busy)
    dog.follow(idle)
    try:
        assert busy.reached.wait(10)
        assert idle.looks == 1  # at follow(); its next look is a minute away
        dog.poke(idle)  # its state changed: looked at again at once
        wait_until(lambda: idle.looks == 2, "the poked tracker's look")
    finally:
        for tracker in (busy, idle):
            thread = dog.forget(tracker)
        assert thread is not None
        thread.join(5)
        assert not thread.is_alive()  # no tracker left: the thread ends


def test_a_look_that_fails_is_reported_and_tried_again_while_the_others_go_on() -> None:
    dog = Watchdog()
    broken, healthy = Counted(0.05, looks_wanted=3, fails=2), Counted(0.05, looks_wanted=5)
    dog.follow(broken)
    dog.follow(healthy)
    try:
        assert broken.reached.wait(10), "a tracker whose look raised was never looked at again"
        assert healthy.reached.wait(10)
    finally:
        dog.forget(broken)
        thread = dog.forget(healthy)
        assert thread is not None
        thread.join(5)


def test_a_tracker_done_with_is_followed_no_more_and_the_thread_ends() -> None:
    before = set(_watchdog_threads())
    dog = Watchdog()
    done = Gated()  # a closed client's tracker: its look says None
    dog.follow(done)
    [thread] = set(_watchdog_threads()) - before  # alive: the look waits for the gate
    done.gate.set()
    thread.join(5)
    assert not thread.is_alive()  # nothing left to follow: the thread ended by itself
    assert done.looks == 1
    again = Counted(None)
    dog.follow(again)  # the next follow() starts a thread again
    wait_until(lambda: again.looks == 1, "a look by a new thread")


def test_every_client_of_the_process_shares_one_watchdog_thread(
    zk_client_factory: ClientFactory,
) -> None:
    clients: list[ZkClient] = [zk_client_factory() for _ in range(12)]
    assert all(c.state is not None and c.state.is_connected for c in clients)
    assert len(_watchdog_threads()) == 1
    for client in clients:
        client.close()
    # Other tests' clients may still be open in this process; closing ours leaves one or none.
    assert len(_watchdog_threads()) <= 1


def test_a_forked_child_gets_a_watchdog_of_its_own() -> None:
    parent = watchdog_module.current()
    held = Counted(60.0)
    parent.follow(held)  # the parent's watchdog has a thread, which a child lacks
    try:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                tracker = Counted(0.05, looks_wanted=3)
                watchdog_module.current().follow(tracker)
                code = 0 if tracker.reached.wait(10) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "the child's tracker was never looked at"
    finally:
        parent.forget(held)


@pytest.mark.skipif(not hasattr(time, "CLOCK_BOOTTIME"), reason="CLOCK_BOOTTIME is Linux's")
def test_looks_set_before_the_session_clock_stepped_back_come_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test that fakes a suspend ends its fake: the clock steps back, no look is put off."""
    shift = fake_suspend(monkeypatch, 30.0)
    dog = Watchdog()
    tracker = Counted(1.0)
    dog.follow(tracker)
    try:
        wait_until(lambda: tracker.looks == 1, "the first look")
        shift[0] = 0.0  # its next look was set 1 s after a clock 30 s ahead
        wait_until(lambda: tracker.looks >= 2, "the next look", timeout=5)
    finally:
        thread = dog.forget(tracker)
        if thread is not None:
            thread.join(5)
