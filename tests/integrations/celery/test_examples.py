"""The Celery demo runs in CI, so the Celery docs' example project cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_celery_demo() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "example_projects" / "celery_site" / "celery_demo.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "account 42: " in out
    assert "runs of one account never overlapped, and their fencing tokens increase" in out
    assert "due entries as standby" in out
    assert "leads now" in out
    assert "failover: the next nightly_report ran" in out
    assert out.splitlines()[-1] == "celery demo finished"
