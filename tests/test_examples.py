"""The runnable examples and the demo run in CI, so the docs cannot rot."""

from __future__ import annotations

import os
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
    out = _run("example_projects/foundation_demo.py")
    assert "back on the same session" in out
    assert "LOST known" in out
    assert "no orphan: True" in out
    assert "deleted: True" in out
    assert "demo finished" in out


def test_lock_example() -> None:
    out = _run("example_projects/recipes/lock_example.py")
    assert "10 writes, all accepted in token order" in out


def test_leader_example() -> None:
    out = _run("example_projects/recipes/leader_example.py")
    assert "failover: scheduler-" in out
    assert "store accepted 4 writes, none stale" in out
    assert "6 terms taken in turn, tokens increasing: True" in out


@pytest.mark.slow
@pytest.mark.skipif(not os.access("/usr/bin/redis-server", os.X_OK), reason="needs redis-server")
def test_celery_demo() -> None:
    pytest.importorskip("celery")
    pytest.importorskip("redis")
    out = _run("example_projects/celery_demo.py")
    assert "account 42: " in out
    assert "runs of one account never overlapped, and their fencing tokens increase" in out
    assert "due entries as standby" in out
    assert "leads now" in out
    assert "failover: the next nightly_report ran" in out
    assert out.splitlines()[-1] == "celery demo finished"
