"""The session's silence is counted on a clock that runs while the machine is suspended.

A laptop's sleep or some VM pause paths stop ``time.monotonic()`` but not the
servers' clocks: a client that counted on it would, after a resume, still
believe its session young while the servers expired it long ago. Counted on
CLOCK_BOOTTIME, a suspend is silence, as a SIGSTOP is.
"""

from __future__ import annotations

import time

import pytest

from tests.client.suspend import fake_suspend
from zk_recipes import ConnectionState, Lock, LockLost
from zk_recipes.testing import StateRecorder
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.skipif(
    not hasattr(time, "CLOCK_BOOTTIME"), reason="CLOCK_BOOTTIME is Linux's"
)


def test_a_suspend_counts_as_silence(
    zk_client_factory: ClientFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = zk_client_factory(session_timeout=4.0)
    states = StateRecorder()
    client.add_listener(states)
    lock = Lock(client, "/suspended")
    assert lock.acquire(timeout=5)
    slept = fake_suspend(monkeypatch)
    mark = states.mark()
    slept[0] = 30.0  # the machine slept 30 s; time.monotonic() saw none of it
    lost = states.wait_for(ConnectionState.LOST, timeout=2, after=mark)
    assert lost.simulated
    with pytest.raises(LockLost):
        lock.check()
    assert client.wait_connected(10)  # a new session, on the same clock
    lock.release()
