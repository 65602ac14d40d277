"""The lock benchmark runs end to end, and the counts it reports hold.

Only counts are checked, never speed: the machines are shared and noisy, and
benchmarks measure while tests assert. Requests per uncontended cycle come
from the server's packet counter; watch notifications are counted client-side.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "locks.py"


@pytest.mark.slow
@pytest.mark.timeout(200)  # 50 s was not enough on a loaded box (the Curator warm-up)
def test_lock_benchmark_counts(request: pytest.FixtureRequest) -> None:
    command = [sys.executable, str(SCRIPT), "--quick", "--sections", "uncontended,watch"]
    hosts = request.config.getoption("--zk-hosts")
    if hosts:
        command += ["--hosts", str(hosts)]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    document = json.loads(result.stdout)

    ours = document["uncontended"]["ours"]
    # create (pipelined with get_children) + delete = 3; a little headroom for stray pings.
    assert ours["requests_per_cycle"] <= 3.2, ours

    counts = document["watch_notifications"]
    assert sorted(counts, key=int) == ["1", "10", "100"]
    for length, per_lock in counts.items():
        assert per_lock["ours"] == 1, f"{length} waiters: {per_lock}"
