"""The request path under faults: the safety net for any change to how requests are sent.

A lean request path (fewer threads, fewer wake-ups, callers writing their own
requests) must keep four promises, checked here against a real server
through the proxy:

- a server that falls silent in the middle of a reply is noticed by the
  client's own timeout: SUSPENDED, then LOST within the session timeout;
- a connection dropped, a session expired or the client closed while many
  threads are sending ends every request: each one answers or raises a
  ``ZkRecipesError``, none hangs;
- no reply is ever matched to the wrong request: a randomized run of many
  threads, each checking that what it reads is its own, with drops, one-way
  partitions and stalls injected meanwhile.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest

from zk_recipes import (
    ClientStateError,
    ConnectionLostError,
    ConnectionState,
    CreateMode,
    NoNodeError,
    ZkClient,
    ZkRecipesError,
)
from zk_recipes.testing import StateRecorder, TcpProxy, expire_session, wait_until
from zk_recipes.testing.pytest_plugin import ClientFactory

pytestmark = pytest.mark.slow

SESSION_TIMEOUT = 2.0


def direct_sends(client: ZkClient) -> int:
    """Requests the client's callers wrote themselves: the path under test here."""
    conn = client._conn
    assert conn is not None
    return conn.direct_sends[0]


class Sender:
    """Threads that each write and read their own node until told to stop.

    Every read must return this thread's own data, one of the values it
    wrote (a write whose reply was lost may or may not have been applied).
    ``mismatches`` lists any read that returned something else.
    """

    def __init__(self, client: ZkClient, threads: int, seed: int = 0) -> None:
        self.client = client
        self.stop = threading.Event()
        self.mismatches: list[str] = []
        self.answered = 0
        self.failed: list[type[BaseException]] = []
        self.foreign: list[BaseException] = []  # anything that is no ZkRecipesError
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._run, args=(i, seed + i), daemon=True)
            for i in range(threads)
        ]

    def __enter__(self) -> Sender:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop.set()
        self.join()

    def join(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        hung = [t.name for t in self._threads if t.is_alive()]
        assert not hung, f"requests never ended in {hung}"

    def _note(self, ok: bool, exc: BaseException | None = None) -> None:
        with self._lock:
            if ok:
                self.answered += 1
            elif isinstance(exc, ZkRecipesError):
                self.failed.append(type(exc))
            elif exc is not None:
                self.foreign.append(exc)

    def _run(self, index: int, seed: int) -> None:
        rng = random.Random(seed)
        mine = f"/senders/t{index}"
        written: set[bytes] = set()
        count = 0
        while not self.stop.is_set():
            count += 1
            value = f"{index}:{count}".encode()
            op = rng.random()
            try:
                if op < 0.4:
                    written.add(value)  # applied or not: a later read may show it
                    try:
                        self.client.set(mine, value)
                    except NoNodeError:
                        self.client.create(mine, value, parents=True)
                    self._note(True)
                elif op < 0.8:
                    data, _ = self.client.get(mine)
                    if data not in written:
                        self.mismatches.append(f"t{index} read {data!r}, never wrote it")
                    self._note(True)
                else:
                    children = self.client.get_children(f"/senders/d{index}")
                    strangers = [c for c in children if not c.startswith(f"n{index}-")]
                    if strangers:
                        self.mismatches.append(f"t{index} listed {strangers}")
                    self.client.create(
                        f"/senders/d{index}/n{index}-",
                        value,
                        mode=CreateMode.EPHEMERAL_SEQUENTIAL,
                        parents=True,
                    )
                    self._note(True)
            except NoNodeError:
                self._note(True)  # an answer: the node or its parent is not there yet
            except ClientStateError as exc:
                self._note(False, exc)
                return  # closed: every later request would fail the same way
            except BaseException as exc:
                self._note(False, exc)
                if not isinstance(exc, ConnectionLostError | ZkRecipesError):
                    return


def _proxied(factory: ClientFactory, proxy: TcpProxy) -> tuple[ZkClient, StateRecorder]:
    recorder = StateRecorder()
    client = factory(hosts=proxy.connect_string, session_timeout=SESSION_TIMEOUT)
    client.add_listener(recorder)
    return client, recorder


def test_a_server_silent_mid_packet_is_suspended_then_lost_within_the_session_timeout(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    client, recorder = _proxied(zk_client_factory, zk_proxy)
    client.create("/silent", b"x", parents=True)
    session = client.session_id
    stalled_at = time.monotonic()
    zk_proxy.stall_replies()
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(client.get("/silent"))
        except ZkRecipesError as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    lost = recorder.wait_for(ConnectionState.LOST, timeout=3 * SESSION_TIMEOUT)
    assert lost.simulated  # the server still hears our pings: the client decided
    assert lost.session_id == session
    assert lost.at - stalled_at < SESSION_TIMEOUT
    reader.join(10)
    assert not reader.is_alive(), "a read stuck mid-packet never ended"
    (result,) = outcome
    assert isinstance(result, ConnectionLostError), result
    assert recorder.states[:2] == [ConnectionState.SUSPENDED, ConnectionState.LOST]
    zk_proxy.heal()
    recorder.wait_for(ConnectionState.RECONNECTED, timeout=10)
    assert client.session_id not in (0, session)
    assert client.get("/silent")[0] == b"x"


@pytest.mark.parametrize("fault", ["cut", "drop_replies", "stall_replies"])
def test_a_connection_broken_while_threads_send_ends_every_request(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory, fault: str
) -> None:
    client, recorder = _proxied(zk_client_factory, zk_proxy)
    with Sender(client, threads=8) as sender:
        wait_until(lambda: sender.answered > 200, "requests flow", timeout=20)
        getattr(zk_proxy, fault)()
        recorder.wait_for(ConnectionState.SUSPENDED, timeout=3 * SESSION_TIMEOUT)
        if fault != "cut":  # silence: the client's own timeout ends the session
            recorder.wait_for(ConnectionState.LOST, timeout=3 * SESSION_TIMEOUT)
        zk_proxy.heal()
        before = sender.answered
        wait_until(lambda: sender.answered > before + 200, "requests flow again", timeout=20)
    assert sender.mismatches == []
    assert sender.foreign == []
    assert sender.failed, "the fault failed no request"
    assert direct_sends(client) > 0


def test_expiry_while_threads_send_ends_every_request_and_work_goes_on(
    zk_client_factory: ClientFactory,
) -> None:
    recorder = StateRecorder()
    client = zk_client_factory(session_timeout=SESSION_TIMEOUT)
    client.add_listener(recorder)
    with Sender(client, threads=8) as sender:
        wait_until(lambda: sender.answered > 200, "requests flow", timeout=20)
        expire_session(client)
        recorder.wait_for(ConnectionState.LOST, timeout=3 * SESSION_TIMEOUT)
        before = sender.answered
        wait_until(lambda: sender.answered > before + 200, "requests flow again", timeout=20)
    assert sender.mismatches == []
    assert sender.foreign == []


def test_close_while_threads_send_ends_every_request_at_once(
    zk_client_factory: ClientFactory,
) -> None:
    client = zk_client_factory(session_timeout=SESSION_TIMEOUT)
    sender = Sender(client, threads=8).__enter__()
    wait_until(lambda: sender.answered > 200, "requests flow", timeout=20)
    closer = threading.Thread(target=client.close, daemon=True)
    closer.start()
    closer.join(10)
    assert not closer.is_alive(), "close() blocked while threads were sending"
    sender.join(10)  # each thread ends on its own: ClientStateError, no stop needed
    assert sender.mismatches == []
    assert sender.foreign == []
    assert ClientStateError in sender.failed


def test_no_reply_is_matched_to_another_request_under_random_faults(
    zk_proxy: TcpProxy, zk_client_factory: ClientFactory
) -> None:
    rng = random.Random(20261124)
    client, _ = _proxied(zk_client_factory, zk_proxy)
    faults: list[Callable[[], None]] = [
        zk_proxy.cut,
        zk_proxy.drop_replies,
        zk_proxy.stall_replies,
        zk_proxy.blackhole,
    ]
    injected = 0
    with Sender(client, threads=16, seed=rng.randrange(1000)) as sender:
        wait_until(lambda: sender.answered > 200, "requests flow", timeout=20)
        for _ in range(6):
            rng.choice(faults)()
            injected += 1
            time.sleep(rng.uniform(0.05, 0.6))  # a fault of random length, some past SUSPENDED
            zk_proxy.heal()
            before = sender.answered
            wait_until(
                lambda before=before: sender.answered > before + 100,  # type: ignore[misc]
                "requests flow again",
                timeout=20,
            )
    assert injected == 6
    assert sender.mismatches == []
    assert sender.foreign == []
    assert direct_sends(client) > 0
