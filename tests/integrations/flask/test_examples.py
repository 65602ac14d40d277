"""The Flask demo runs in CI, so the Flask docs' example project cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_flask_demo() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "example_projects" / "flask_app" / "flask_demo.py")],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "exit codes [0, 75, 75]" in out
    assert out.count("exported the orders") == 1
    assert out.count("   423: ") == 2
    assert "a later click: 200" in out
    assert "/zk/health: 200 CONNECTED" in out
    assert "/zk/ lists the held lock: True" in out
    assert "flask zk holders: held by 'export job'" in out
    assert out.splitlines()[-1] == "flask demo finished"
