"""The runnable examples and the demo run in CI, so the docs cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, timeout: float = 120) -> str:
    result = subprocess.run(
        [sys.executable, str(ROOT / script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
def test_foundation_demo() -> None:
    out = _run("example_projects/foundation/foundation_demo.py")
    assert "back on the same session" in out
    assert "LOST known" in out
    assert "no orphan: True" in out
    assert "deleted: True" in out
    assert "demo finished" in out


def test_lock_example() -> None:
    out = _run("example_projects/recipes/lock_example.py")
    assert "10 writes, all accepted in token order" in out


def test_discovery_example() -> None:
    out = _run("example_projects/recipes/discovery_example.py")
    assert "instances: ['orders-1', 'orders-2']" in out
    assert "round robin: ['http://127.0.0.1:8001/api', 'http://127.0.0.1:8002/api'," in out
    assert "told: DELETED orders-2" in out
    assert "now picks: orders-1" in out


def test_cache_example() -> None:
    out = _run("example_projects/recipes/cache_example.py")
    assert "told: CHANGED /flags/search/beta -> b'on'" in out
    assert (
        "after the cut: [('DELETED', '/flags/checkout'), ('CREATED', '/flags/checkout'), "
        "('CREATED', '/flags/payments')]"
    ) in out
    assert "demo finished" in out


def test_a_face_on_the_framework_kit() -> None:
    out = _run("example_projects/frameworks/wsgi_face.py")
    assert "while one send holds invoice-7: [423, 423]" in out
    assert "status page: /zk-recipes/locks/invoice-7 (lock): ['holder']" in out
    assert "the send: 200 invoice 7 sent, fencing token" in out
    assert "after it: 0 holders on the page" in out
    assert "with ZooKeeper paused: 503 ZooKeeper is unavailable, try again shortly." in out
    assert "demo finished" in out


def test_leader_example() -> None:
    out = _run("example_projects/recipes/leader_example.py")
    assert "failover: scheduler-" in out
    assert "store accepted 4 writes, none stale" in out
    assert "6 terms taken in turn, tokens increasing: True" in out


@pytest.mark.slow
@pytest.mark.timeout(180)  # three phases of real processes, each starting Python and a session
def test_cli_demo() -> None:
    out = _run("example_projects/cli/cli_demo.py")
    assert "exit codes [0, 75, 75]; the report ran on ['host-" in out
    assert out.count(": migrated") == 1
    assert out.count(": nothing to migrate") == 2
    assert "leader pid" in out
    assert "1 standby" in out
    assert "beat-b took over" in out
    assert "demo finished" in out
