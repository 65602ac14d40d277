"""A FastAPI app under a real uvicorn process: its locks outlive neither a kill -9 nor a stop.

kill -9 while a request holds a lock: nothing in the process runs, and the
lock is free once ZooKeeper expires the session (no orphan node, nobody
blocked for longer). A stop (SIGTERM) while a request holds one: uvicorn's
graceful shutdown cancels the request, the lifespan closes the session, and
the node is gone by the time the process has exited, not a session timeout
later.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.containers import children_of
from zk_recipes import Lock, ZkClient
from zk_recipes.frameworks import lock_path
from zk_recipes.testing import free_ports, wait_for_children

pytest.importorskip("uvicorn")

HERE = Path(__file__).resolve().parent
#: The longest a server takes to start and answer its health route.
START = 30.0


class Served:
    """``uvicorn held_app:app`` in a process of its own, on a free port."""

    def __init__(self, environ: dict[str, str]) -> None:
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "held_app:app",
                "--app-dir",
                str(HERE),
                "--port",
                str(self.port),
                "--timeout-graceful-shutdown",
                "1",
                "--log-level",
                "warning",
            ],
            env={**os.environ, **environ},
        )

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + START
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "uvicorn exited at start-up"
            try:
                if httpx.get(f"{self.url}/zk/health", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # a process starting: nothing to wait on but its port
        raise AssertionError(f"uvicorn at {self.url} not healthy within {START:g} s")

    def hold_in_background(self, name: str) -> None:
        def get() -> None:
            with contextlib.suppress(httpx.TransportError):  # the server went away: the test
                httpx.get(f"{self.url}/hold/{name}", timeout=60)

        threading.Thread(target=get, daemon=True).start()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


@pytest.fixture
def served(environ: dict[str, str]) -> Iterator[Served]:
    server = Served(environ)
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(90)
def test_kill_9_while_holding_frees_the_lock_when_the_session_expires(
    served: Served, zk_client: ZkClient
) -> None:
    directory = lock_path("killed")
    served.hold_in_background("killed")
    (node,) = wait_for_children(zk_client, directory, 1)
    served.process.send_signal(signal.SIGKILL)
    assert served.process.wait(10) == -signal.SIGKILL
    assert zk_client.get_children(directory) == [node], "held until the session expires"
    with Lock(zk_client, directory).acquired(timeout=30):  # the session expired: ours now
        assert children_of(zk_client, directory) != [node]


@pytest.mark.timeout(90)
def test_a_stop_while_holding_frees_the_lock_at_shutdown(
    served: Served, zk_client: ZkClient
) -> None:
    directory = lock_path("stopped")
    served.hold_in_background("stopped")
    wait_for_children(zk_client, directory, 1)
    served.process.send_signal(signal.SIGTERM)
    # uvicorn ends by raising the signal again once its shutdown is done (newer versions)
    assert served.process.wait(30) in (0, -signal.SIGTERM)
    # The lifespan closed the session before the process exited (an expiry would take
    # the 3 s session timeout more): the node is gone already.
    assert children_of(zk_client, directory) == []


@pytest.mark.timeout(90)
def test_gunicorn_workers_forked_from_a_connected_master_each_make_their_own_session(
    environ: dict[str, str], zk_client: ZkClient, tmp_path: Path
) -> None:
    """``gunicorn --preload -k uvicorn_worker.UvicornWorker -w 2``: the master connected at
    import; each worker's lifespan makes a session of its own, none uses the master's."""
    pytest.importorskip("uvicorn_worker")
    (port,) = free_ports(1)
    marker = tmp_path / "master-session"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--preload",
            "-k",
            "uvicorn_worker.UvicornWorker",
            "-w",
            "2",
            "--chdir",
            str(HERE),
            "-b",
            f"127.0.0.1:{port}",
            "held_app:app",
        ],
        env={**os.environ, **environ, "HELD_APP_CONNECT_AT_IMPORT": str(marker)},
    )
    try:
        sessions: set[str] = set()
        deadline = time.monotonic() + START
        while len(sessions) < 2:  # the two workers answer in turn, each with its session
            assert time.monotonic() < deadline, f"two workers never both answered: {sessions}"
            assert process.poll() is None, "gunicorn exited"
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/zk/health", timeout=2)
            except httpx.TransportError:
                time.sleep(0.1)  # the server starting: nothing to wait on but its port
                continue
            if answer.status_code == 200:
                sessions.add(answer.json()["session_id"])
            with httpx.Client(timeout=2) as fresh:  # a new connection may reach the other
                answer = fresh.get(f"http://127.0.0.1:{port}/zk/health")
                if answer.status_code == 200:
                    sessions.add(answer.json()["session_id"])
        master = marker.read_text()
        assert master not in sessions
        assert len(sessions) == 2
    finally:
        process.terminate()
        process.wait(30)
