"""A locked view served by gunicorn's pre-fork workers while ZooKeeper is paused or absent.

The test app (``appsite``) runs under a real ``gunicorn -w 2``: each worker
makes its own client after the fork (``ProcessClient``). With the server
paused (SIGSTOP: connections accepted, nothing answered) and with no server
at all, every request is answered 503 with ``Retry-After``, at once, by
either worker: never "busy" (423), never a 500 after the connection timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from zk_recipes.frameworks import RETRY_AFTER
from zk_recipes.testing import ZooKeeperServer, free_ports, wait_until

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
CONNECTION_TIMEOUT = 30.0
AT_ONCE = 5.0
REQUESTS = 6

if shutil.which("gunicorn", path=str(Path(sys.executable).parent)) is None:
    pytest.skip("gunicorn is not installed (the [test-flask] extra)", allow_module_level=True)


def _get(url: str) -> tuple[int, dict[str, str], bytes, float]:
    began = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=CONNECTION_TIMEOUT * 2) as answer:
            status, headers, body = answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        status, headers, body = error.code, dict(error.headers), error.read()
    return status, headers, body, time.monotonic() - began


class Served:
    """``gunicorn -w 2`` serving the test app on ``hosts``; ``url(path)`` reaches it."""

    def __init__(self, hosts: str, namespace: str) -> None:
        (self.port,) = free_ports(1)
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "integrations")]),
            SHOP_ZK_HOSTS=hosts,
            SHOP_ZK_NAMESPACE=namespace,
            SHOP_ZK_CONNECTION_TIMEOUT=str(CONNECTION_TIMEOUT),
        )
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "gunicorn"),
                "--workers=2",
                f"--bind=127.0.0.1:{self.port}",
                "--graceful-timeout=2",
                "tests.integrations.flask.appsite:create_app()",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_until(self._listening, "gunicorn listens", timeout=30.0)

    def _listening(self) -> bool:
        assert self.process.poll() is None, self.process.communicate()[1]
        try:
            _get(self.url("/zk/health"))
        except OSError:
            return False
        return True

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> str:
        self.process.terminate()
        try:
            return self.process.communicate(timeout=20)[1]
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.communicate()[1]


@pytest.fixture
def serve(zk_namespace: str) -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        served.close()


def _all_unavailable(served: Served) -> None:
    for id in range(REQUESTS):
        status, headers, body, took = _get(served.url(f"/charge/{id}"))
        assert status == 503, body
        assert took < AT_ONCE
        assert headers["Retry-After"] == str(RETRY_AFTER)


def test_a_paused_server_gets_503_at_once_from_every_worker_then_200(
    serve: list[Served], zk_private_server: ZooKeeperServer, zk_namespace: str
) -> None:
    served = Served(zk_private_server.connect_string, zk_namespace)
    serve.append(served)
    # Both workers connected: each request is served by one or the other.
    for id in range(REQUESTS):
        assert _get(served.url(f"/charge/{id}"))[0] == 200
    zk_private_server.pause()
    try:
        _all_unavailable(served)
    finally:
        zk_private_server.resume()
    wait_until(
        lambda: all(_get(served.url(f"/charge/{id}"))[0] == 200 for id in range(REQUESTS)),
        "every worker serves again once the server is back",
        timeout=CONNECTION_TIMEOUT,
    )


def test_no_server_at_all_gets_503_at_once_and_health_says_why(
    serve: list[Served], zk_namespace: str
) -> None:
    (port,) = free_ports(1)
    served = Served(f"127.0.0.1:{port}", zk_namespace)
    serve.append(served)
    _all_unavailable(served)
    answers: list[tuple[int, bytes]] = []

    def says_why() -> bool:
        # Each answer is at once and 503; why comes once the worker that answers has
        # seen an attempt refused (the other worker may still be on its first one).
        status, _, body, _ = _get(served.url("/zk/health"))
        answers.append((status, body))
        return b"Connection refused" in body

    wait_until(says_why, "health names the refusal", timeout=AT_ONCE)
    assert all(status == 503 for status, _ in answers)
    assert all(b'"connected":false' in body.replace(b" ", b"") for _, body in answers)
