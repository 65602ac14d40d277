"""The FastAPI demo runs in CI, so the quick start's example project cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_fastapi_demo() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "example_projects" / "fastapi_app" / "fastapi_demo.py")],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.count("   423: ") == 2
    assert out.count("   200: ") == 1
    assert "a later click: 200" in out
    assert "/zk/health: 200" in out
    assert '"CONNECTED"' in out
    assert "charge: 503" in out
    assert "Retry-After=5" in out
    assert "answered in under 5 s: True" in out
    assert "held: 1 node" in out
    assert "after uvicorn exited: 0 nodes" in out
    assert out.splitlines()[-1] == "fastapi demo finished"
