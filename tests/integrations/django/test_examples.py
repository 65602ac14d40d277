"""The Django demo runs in CI, so the Django docs' example project cannot rot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(180)  # three deploys' pods, runserver and cron's hosts, each a real process
def test_django_demo() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "example_projects" / "django_site" / "django_demo.py")],
        capture_output=True,
        text=True,
        timeout=170,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.count(": migrated") == 1
    assert out.count(": nothing to migrate") == 2
    assert out.count("   423: ") == 2
    assert "invoice 42 was sent 2 times" in out
    assert "zkstatus: /zk-recipes/locks/send-reminders held by pid" in out
    assert "exit codes [0, 75, 75]; the holder was the first: True" in out
    assert "the page lists the held lock: True" in out
    assert "an anonymous visitor is sent to log in: 302" in out
    assert "ran under /celery/singleton/" in out
    assert out.splitlines()[-1] == "django demo finished"
